// GRPO's arithmetic as TRL 1.16 computes it, on tensors: the NaN-aware unbiased deviation, the
// group advantages of the rewards (weights, None rewards, scale_rewards,
// multi_objective_aggregation), and each loss type's per-token loss and its normalisation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <torch/types.h>

namespace trainer::trl::grpo {

// TRL's nanstd: the unbiased standard deviation of the values that are not NaN (NaN with fewer
// than two) along `dim`, or of all of them when dim < 0.
torch::Tensor nanstd(const torch::Tensor& x, int64_t dim = -1, bool keepdim = false);

// reward_weights as a row [1, functions] float32 (1 where none is given).
torch::Tensor reward_weights(int64_t functions, const std::vector<double>& weights);

struct AdvantageSettings {
  int64_t num_generations = 2;
  std::string scale_rewards = "group";             // group, batch or none
  std::string aggregation = "sum_then_normalize";  // or normalize_then_sum
  std::vector<double> weights;                     // empty: 1 each
};

struct Advantages {
  torch::Tensor advantages;   // [N], 0 where NaN
  torch::Tensor rewards;      // [N], the weighted sum, NaN where every reward is None
  torch::Tensor std_is_zero;  // [N]
  torch::Tensor unscorable;   // [N], every reward None
};

// The advantages of every process's completions (rewards_per_func [N, F] float32, NaN for None;
// groups are consecutive rows of num_generations).
Advantages group_advantages(const torch::Tensor& rewards_per_func, const AdvantageSettings& s);

struct LossSettings {
  std::string loss_type = "dapo";
  std::string importance_sampling_level = "token";
  double epsilon_low = 0.2, epsilon_high = 0.2;
  std::optional<double> delta;
  double beta = 0.0;
  bool use_bias_correction_kl = true;
  double sapo_temperature_pos = 1.0, sapo_temperature_neg = 1.05;
  double vespo_k_pos = 2.0, vespo_lambda_pos = 3.0, vespo_k_neg = 3.0, vespo_lambda_neg = 2.0;
  int64_t max_completion_length = 512;
};

// A micro-batch's per-token objective: `loss` [B, T] (or [B, 1] at the sequence level before
// the KL broadcasts it), the importance ratio `coef_1` after delta's cap (the clip metrics read
// it), the KL term (beta > 0) and vespo's phi.
struct PerTokenLoss {
  torch::Tensor loss, coef_1, kl, phi_seq;
};
// `logps` [B, T] the policy's (with gradients), `old` the old policy's (or logps detached),
// `ref` the reference's (beta > 0), `advantages` [B, 1], `mask` [B, T] float, `entropy_mask`
// (top_entropy_quantile; undefined: none).
PerTokenLoss per_token_loss(const torch::Tensor& logps, const torch::Tensor& old,
                            const torch::Tensor& ref, const torch::Tensor& advantages,
                            const torch::Tensor& mask, const torch::Tensor& entropy_mask,
                            const LossSettings& s);

// The micro-batch's loss from the per-token one: each type's normalisation, over `accumulation`
// micro-batches (1 in evaluation); dapo, cispo and vespo divide by `token_normalizer` (the
// generation batch's tokens over the processes, scaled as TRL scales it).
torch::Tensor aggregate_loss(const torch::Tensor& per_token, const torch::Tensor& mask,
                             const LossSettings& s, double accumulation,
                             const torch::Tensor& token_normalizer);

}  // namespace trainer::trl::grpo
