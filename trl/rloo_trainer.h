// TRL's RLOOTrainer on GRPOTrainer's machinery (the prompts, the sampling, the rewards, the
// buffer, evaluation): what differs is its own. The old policy's sequence log-probabilities kept
// at every generation, the reference's KL folded into the reward (beta 0.05 by default), the
// rewards clipped, REINFORCE's leave-one-out baseline (optionally normalised), and the clipped
// sequence-level ratio loss with TRL 1.16's metrics.
#pragma once

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "trl/grpo_trainer.h"

namespace trainer::trl {
namespace grpo {

struct RlooSettings {
  int64_t num_generations = 2;
  std::vector<double> weights;                          // empty: 1 each
  std::optional<std::pair<double, double>> clip_range;  // reward_clip_range
  double beta = 0.05;
  bool normalize = false;  // normalize_advantages
};

// RLOOTrainer's advantages of every process's completions (rewards_per_func [N, F] float32, NaN
// for None; `kl` [N]: each completion's summed old-minus-reference log-probability, undefined
// with beta 0): the weighted reward (NaN where every reward is None) clamped to the clip range,
// less beta x kl, minus the mean of the other completions of its group (the scorable ones), then
// standardised over the batch with `normalize`; NaN made 0. `rewards` is the weighted reward
// before clipping and KL (TRL's reward metric), `std_is_zero` one per group.
Advantages rloo_advantages(const torch::Tensor& rewards_per_func, const torch::Tensor& kl,
                           const RlooSettings& s);

// RLOO's loss of a micro-batch: the sequences' summed log-probabilities `logps` ([B]) against
// the old policy's (`old_logps`), the ratio clipped to [1 - epsilon_low, 1 + epsilon_high], the
// pessimistic objective times the advantages, averaged over the sequences.
struct SequenceLoss {
  torch::Tensor loss, coef_1;
};
SequenceLoss rloo_sequence_loss(const torch::Tensor& logps, const torch::Tensor& old_logps,
                                const torch::Tensor& advantages, double epsilon_low,
                                double epsilon_high);

}  // namespace grpo

class RLOOTrainer : public GRPOTrainer {
 public:
  using GRPOTrainer::GRPOTrainer;

  LossOutput compute_loss(models::Model& model, const data::Batch& inputs,
                          bool return_outputs = false,
                          const torch::Tensor& num_items_in_batch = {}) override;

 protected:
  // old_logps [n] always (the old policy's summed log-probabilities), and with beta != 0 the
  // sequences' KL to the reference, for compute_advantages.
  void add_old_and_reference(data::Batch& out, bool training) override;
  grpo::Advantages compute_advantages(const torch::Tensor& rewards_per_func,
                                      bool training) override;

 private:
  // The last generation's per-token KL of the old policy to the reference and its mask (beta
  // != 0), read by compute_advantages.
  torch::Tensor token_kl_, kl_mask_;
};

}  // namespace trainer::trl
