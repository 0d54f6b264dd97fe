// RLOOTrainer: TRL 1.16's _generate_and_score_completions where it differs from GRPO's (old and
// reference log-probabilities, the KL-shaped leave-one-out advantages) and its _compute_loss.
#include "trl/rloo_trainer.h"

#include <cmath>

#include <torch/torch.h>

#include "lib/base/errors.h"

namespace trainer::trl {

using torch::Tensor;

namespace grpo {

Advantages rloo_advantages(const Tensor& rewards_per_func, const Tensor& kl,
                           const RlooSettings& s) {
  const int64_t G = s.num_generations;
  Advantages out;
  out.unscorable = rewards_per_func.isnan().all(1);
  out.rewards = (rewards_per_func * reward_weights(rewards_per_func.size(1), s.weights))
                    .nansum(1)
                    .masked_fill(out.unscorable, NAN);
  Tensor shaped = out.rewards;
  if (s.clip_range) shaped = shaped.clamp(s.clip_range->first, s.clip_range->second);
  if (s.beta != 0.0 && kl.defined()) shaped = shaped - s.beta * kl.to(shaped.scalar_type());
  const Tensor grouped = shaped.view({-1, G});
  const Tensor std = G > 1 ? nanstd(grouped, 1) : torch::zeros({grouped.size(0)});
  if (G > 1) {
    const Tensor count = grouped.isnan().logical_not().sum(1, /*keepdim=*/true);
    const Tensor baseline = (grouped.nansum(1, /*keepdim=*/true) - grouped) / (count - 1);
    out.advantages = shaped - baseline.view({-1});
  } else {
    out.advantages = torch::zeros_like(shaped);
  }
  if (s.normalize) {
    out.advantages =
        (out.advantages - torch::nanmean(out.advantages)) / (nanstd(out.advantages) + 1e-4);
  }
  out.advantages = torch::nan_to_num(out.advantages, 0.0);
  out.std_is_zero = torch::isclose(std, torch::zeros_like(std));
  return out;
}

SequenceLoss rloo_sequence_loss(const Tensor& logps, const Tensor& old_logps,
                                const Tensor& advantages, double epsilon_low, double epsilon_high) {
  SequenceLoss out;
  out.coef_1 = torch::exp(logps - old_logps);
  const Tensor coef_2 = torch::clamp(out.coef_1, 1 - epsilon_low, 1 + epsilon_high);
  out.loss = (-torch::min(out.coef_1 * advantages, coef_2 * advantages)).mean();
  return out;
}

}  // namespace grpo

void RLOOTrainer::add_old_and_reference(data::Batch& out, bool training) {
  // The old policy's always (RLOO's ratio is against it), the reference's with beta != 0.
  auto [old, ref] = old_and_reference_logps(out, training, /*old=*/true);
  torch::NoGradGuard no_grad;
  const Tensor mask = out.at("completion_mask").to(torch::kFloat);
  out["old_logps"] = (old * mask).sum(1);
  token_kl_ = ref.defined() ? (old - ref) * mask : Tensor();
  kl_mask_ = mask;
}

grpo::Advantages RLOOTrainer::compute_advantages(const Tensor& rewards_per_func, bool training) {
  const TrainingArguments& a = args();
  Tensor kl;
  if (a.beta() != 0.0 && token_kl_.defined()) {
    kl = token_kl_.sum(-1);
    Accelerator& acc = accelerator();
    if (acc.num_processes() > 1) kl = acc.gather(kl.to(acc.device()));
    kl = kl.cpu();
    // The old policy's KL to the reference at this generation, token-weighted over every process.
    const Tensor totals = process_sum(torch::stack({token_kl_.sum(), kl_mask_.sum()}));
    metrics_.add(training, "kl", (totals[0] / totals[1].clamp_min(1.0)).item<double>());
  }
  grpo::RlooSettings s;
  s.num_generations = training ? a.num_generations() : eval_generations();
  s.weights = a.reward_weights();
  if (a.reward_clip_range().size() == 2) {
    s.clip_range = std::make_pair(a.reward_clip_range()[0], a.reward_clip_range()[1]);
  }
  s.beta = a.beta();
  s.normalize = a.normalize_advantages();
  return grpo::rloo_advantages(rewards_per_func, kl, s);
}

LossOutput RLOOTrainer::compute_loss(models::Model& model, const data::Batch& inputs,
                                     bool return_outputs, const Tensor&) {
  if (return_outputs) throw InputError("The RLOOTrainer does not support returning outputs");
  const TrainingArguments& a = args();
  const bool training = model.is_training();
  auto [per_token, entropies] = token_logps(model, inputs, 0);
  const Tensor mask = inputs.at("completion_mask").to(torch::kFloat);
  const Tensor advantages = inputs.at("advantages").to(torch::kFloat);
  const double low = a.epsilon(), high = a.epsilon_high().value_or(a.epsilon());
  const grpo::SequenceLoss loss = grpo::rloo_sequence_loss(
      (per_token * mask).sum(1), inputs.at("old_logps").to(per_token.scalar_type()), advantages,
      low, high);
  LossOutput out;
  // TRL leaves the accumulation to the Trainer (loss_is_scaled_for_ga false): divided here, as
  // GRPOTrainer's training_step expects its loss.
  out.loss =
      training ? loss.loss / static_cast<double>(current_gradient_accumulation_steps()) : loss.loss;
  {
    torch::NoGradGuard no_grad;
    const Tensor totals =
        process_sum(torch::stack({(entropies.detach() * mask).sum(), mask.sum()}));
    metrics_.add(training, "entropy", (totals[0] / totals[1].clamp_min(1.0)).item<double>());
    const Tensor c1 = loss.coef_1.detach();
    const Tensor is_low = (c1 < 1 - low).logical_and(advantages < 0).to(torch::kFloat);
    const Tensor is_high = (c1 > 1 + high).logical_and(advantages > 0).to(torch::kFloat);
    const Tensor region = is_low.logical_or(is_high).to(torch::kFloat);
    Accelerator& acc = accelerator();
    auto gathered = [&](const Tensor& x) {
      return (acc.num_processes() > 1 ? acc.gather(x.to(acc.device())) : x).cpu();
    };
    const Tensor lows = gathered(is_low), highs = gathered(is_high), regions = gathered(region);
    metrics_.add(training, "clip_ratio/low_mean", torch::nanmean(lows).item<double>());
    metrics_.add(training, "clip_ratio/low_min", lows.min().item<double>());
    metrics_.add(training, "clip_ratio/high_mean", torch::nanmean(highs).item<double>());
    metrics_.add(training, "clip_ratio/high_max", highs.max().item<double>());
    metrics_.add(training, "clip_ratio/region_mean", torch::nanmean(regions).item<double>());
  }
  return out;
}

}  // namespace trainer::trl
