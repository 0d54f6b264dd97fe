// GRPO's advantages and losses (trl/grpo_math.h), and GRPOTrainer::compute_loss with TRL's
// metrics of each micro-step.
#include <cmath>

#include <torch/torch.h>

#include "trl/grpo_math.h"
#include "trl/grpo_trainer.h"

namespace trainer::trl {

using torch::Tensor;

namespace grpo {

Tensor nanstd(const Tensor& x, int64_t dim, bool keepdim) {
  if (dim < 0) return nanstd(x.reshape({-1}), 0, keepdim);
  const Tensor mean = torch::nanmean(x, dim, /*keepdim=*/true);
  const Tensor variance = torch::nanmean((x - mean).pow(2), dim, /*keepdim=*/true);
  const Tensor count = x.isnan().logical_not().sum(dim, /*keepdim=*/true).to(x.scalar_type());
  const Tensor correction =
      torch::where(count > 1, count / (count - 1), torch::full_like(count, NAN));
  Tensor std = (variance * correction).sqrt();
  return keepdim ? std : std.squeeze(dim);
}

Tensor reward_weights(int64_t functions, const std::vector<double>& weights) {
  std::vector<float> values(static_cast<size_t>(functions), 1.0f);
  for (size_t f = 0; f < weights.size() && f < values.size(); ++f)
    values[f] = static_cast<float>(weights[f]);
  return torch::tensor(values, torch::kFloat).unsqueeze(0);
}

Advantages group_advantages(const Tensor& rewards_per_func, const AdvantageSettings& s) {
  const int64_t F = rewards_per_func.size(1), G = s.num_generations;
  const Tensor weights = reward_weights(F, s.weights);
  Advantages out;
  out.unscorable = rewards_per_func.isnan().all(1);
  out.rewards = (rewards_per_func * weights).nansum(1).masked_fill(out.unscorable, NAN);
  Tensor std_rewards;
  if (s.aggregation == "sum_then_normalize") {
    const Tensor& rewards = out.rewards;
    const Tensor mean_grouped = torch::nanmean(rewards.view({-1, G}), 1).repeat_interleave(G, 0);
    if (s.scale_rewards == "batch") {
      std_rewards =
          rewards.numel() > 1 ? nanstd(rewards).expand_as(rewards) : torch::zeros_like(rewards);
    } else {
      std_rewards = nanstd(rewards.view({-1, G}), 1).repeat_interleave(G, 0);
    }
    out.advantages = rewards - mean_grouped;
    if (s.scale_rewards != "none") out.advantages = out.advantages / (std_rewards + 1e-4);
  } else {
    // normalize_then_sum: each reward normalised in its group, then the weighted sum over the
    // batch's deviation (scale_rewards does not apply, as in TRL).
    const Tensor grouped = rewards_per_func.view({-1, G, F});
    const Tensor mean_k = torch::nanmean(grouped, 1, /*keepdim=*/true);
    const Tensor std_k = nanstd(grouped, 1, /*keepdim=*/true);
    const Tensor reward_k = ((grouped - mean_k) / (std_k + 1e-4)).view({-1, F});
    const Tensor rewards = (reward_k * weights).nansum(1).masked_fill(out.unscorable, NAN);
    std_rewards =
        rewards.numel() > 1 ? nanstd(rewards).expand_as(rewards) : torch::zeros_like(rewards);
    out.advantages = (rewards - torch::nanmean(rewards)) / (std_rewards + 1e-4);
  }
  out.std_is_zero = torch::isclose(std_rewards, torch::zeros_like(std_rewards));
  out.advantages = torch::nan_to_num(out.advantages, 0.0);
  return out;
}

namespace {

// vespo's sequence weights (no gradient): a gamma-shaped function of the sequence's summed
// log-ratio, its shape by the advantage's sign.
Tensor vespo_phi(const Tensor& log_ratio, const Tensor& mask, const Tensor& advantages,
                 const LossSettings& s) {
  torch::NoGradGuard no_grad;
  const double lower = std::log(1e-8);
  const Tensor seq_log_ratio =
      (torch::clamp(log_ratio.detach(), -20.0, 20.0) * mask).sum(-1, /*keepdim=*/true);
  const Tensor log_w = torch::clamp(seq_log_ratio, lower, 20.0);
  const Tensor w = torch::exp(log_w);
  const Tensor nonneg = advantages >= 0;
  auto pick = [&](double pos, double neg) {
    return torch::where(nonneg, torch::full_like(advantages, pos),
                        torch::full_like(advantages, neg));
  };
  const Tensor k = pick(s.vespo_k_pos, s.vespo_k_neg);
  const Tensor lam = pick(s.vespo_lambda_pos, s.vespo_lambda_neg).clamp_min(1e-4);
  return torch::nan_to_num(torch::exp(lam + k * log_w - lam * w), 0.0, 0.0, 0.0);
}

}  // namespace

PerTokenLoss per_token_loss(const Tensor& logps, const Tensor& old, const Tensor& ref,
                            const Tensor& advantages, const Tensor& mask,
                            const Tensor& entropy_mask, const LossSettings& s) {
  PerTokenLoss out;
  const Tensor log_ratio = logps - old;
  const Tensor log_weights =
      s.importance_sampling_level == "token"
          ? log_ratio
          : ((log_ratio * mask).sum(-1) / mask.sum(-1).clamp_min(1.0)).unsqueeze(-1);
  out.coef_1 = torch::exp(log_weights);
  if (s.beta != 0.0) {
    out.kl = torch::exp(ref - logps) - (ref - logps) - 1;
    if (s.use_bias_correction_kl) out.kl = out.kl * out.coef_1;
  }
  if (s.loss_type == "cispo") {
    const Tensor clamped = torch::clamp(out.coef_1, std::nullopt, s.epsilon_high).detach();
    out.loss = -clamped * advantages * logps;
  } else if (s.loss_type == "sapo") {
    const Tensor temperatures =
        torch::where(advantages > 0, torch::full_like(advantages, s.sapo_temperature_pos),
                     torch::full_like(advantages, s.sapo_temperature_neg));
    out.loss = -(torch::sigmoid(temperatures * (out.coef_1 - 1)) * 4 / temperatures) * advantages;
  } else if (s.loss_type == "vespo") {
    out.phi_seq = vespo_phi(log_ratio, mask, advantages, s);
    out.loss = -out.phi_seq * advantages * logps;
  } else {
    const Tensor coef_2 = torch::clamp(out.coef_1, 1 - s.epsilon_low, 1 + s.epsilon_high);
    if (s.delta) out.coef_1 = torch::clamp(out.coef_1, std::nullopt, *s.delta);
    out.loss = -torch::min(out.coef_1 * advantages, coef_2 * advantages);
  }
  if (entropy_mask.defined()) out.loss = out.loss * entropy_mask;
  if (s.beta != 0.0) out.loss = out.loss + s.beta * out.kl;
  return out;
}

Tensor aggregate_loss(const Tensor& per_token, const Tensor& mask, const LossSettings& s,
                      double accumulation, const Tensor& token_normalizer) {
  const std::string& type = s.loss_type;
  if (type == "grpo" || type == "sapo") {
    return ((per_token * mask).sum(-1) / mask.sum(-1).clamp_min(1.0)).mean() / accumulation;
  }
  if (type == "bnpo") return (per_token * mask).sum() / mask.sum().clamp_min(1.0) / accumulation;
  if (type == "dr_grpo") {
    return (per_token * mask).sum() /
           static_cast<double>(per_token.size(0) * s.max_completion_length) / accumulation;
  }
  if (type == "luspo") return (per_token * mask).sum(-1).mean() / accumulation;
  return (per_token * mask).sum() / token_normalizer.to(per_token.device());  // cispo, dapo, vespo
}

}  // namespace grpo

grpo::LossSettings GRPOTrainer::loss_settings() const {
  const TrainingArguments& a = args();
  grpo::LossSettings s;
  s.loss_type = a.loss_type().front();
  s.importance_sampling_level = a.importance_sampling_level();
  s.epsilon_low = a.epsilon();
  s.epsilon_high = a.epsilon_high().value_or(a.epsilon());
  s.delta = a.delta();
  s.beta = a.beta();
  s.use_bias_correction_kl = a.use_bias_correction_kl();
  s.sapo_temperature_pos = a.sapo_temperature_pos();
  s.sapo_temperature_neg = a.sapo_temperature_neg();
  s.vespo_k_pos = a.vespo_k_pos();
  s.vespo_lambda_pos = a.vespo_lambda_pos();
  s.vespo_k_neg = a.vespo_k_neg();
  s.vespo_lambda_neg = a.vespo_lambda_neg();
  s.max_completion_length = *a.max_completion_length();
  return s;
}

Tensor GRPOTrainer::high_entropy_mask(const Tensor& entropies, const Tensor& mask) {
  torch::NoGradGuard no_grad;
  Accelerator& acc = accelerator();
  const Tensor local = entropies.detach().masked_select(mask.to(torch::kBool)).to(torch::kFloat);
  Tensor all = local;
  if (acc.num_processes() > 1) {
    all = acc.gather(acc.pad_across_processes(local, 0, -1e9));
    all = all.masked_select(all.ne(-1e9));
  }
  if (all.numel() == 0) return torch::zeros_like(mask, torch::kBool);
  const double threshold = torch::quantile(all, 1.0 - args().top_entropy_quantile()).item<double>();
  return ((entropies.detach() * mask) >= threshold).logical_and(mask.to(torch::kBool));
}

void GRPOTrainer::record_loss_metrics(const grpo::PerTokenLoss& loss, const Tensor& entropies,
                                      const Tensor& advantages, const Tensor& mask,
                                      const grpo::LossSettings& s, bool training) {
  torch::NoGradGuard no_grad;
  Accelerator& acc = accelerator();
  // Token-weighted over every process (a sequence-level value: over the rows).
  auto global_masked_mean = [&](const Tensor& x) {
    Tensor sum, count;
    if (x.size(1) == 1) {
      sum = x.sum().to(torch::kDouble);
      count = torch::tensor(static_cast<double>(x.size(0)), torch::kDouble).to(x.device());
    } else {
      sum = (x * mask).sum().to(torch::kDouble);
      count = mask.sum().to(torch::kDouble);
    }
    const Tensor totals = process_sum(torch::stack({sum, count}));
    return (totals[0] / totals[1].clamp_min(1.0)).item<double>();
  };
  // Each sequence's mean over every process, NaN for an empty one; then its min or max.
  auto extreme = [&](const Tensor& x, bool minimum) {
    Tensor seq =
        (x.size(1) == 1 ? x.squeeze(1) : (x * mask).sum(-1) / mask.sum(-1)).to(torch::kFloat);
    if (acc.num_processes() > 1) seq = acc.gather(seq.to(device()));
    const Tensor valid = seq.cpu().masked_select(seq.cpu().isnan().logical_not());
    if (valid.numel() == 0) return static_cast<double>(NAN);
    return (minimum ? valid.min() : valid.max()).item<double>();
  };
  const std::string& type = s.loss_type;
  if (s.beta != 0.0) metrics_.add(training, "kl", global_masked_mean(loss.kl.detach()));
  metrics_.add(training, "entropy", global_masked_mean(entropies.detach()));
  const Tensor c1 = loss.coef_1.detach();
  if (type == "grpo" || type == "bnpo" || type == "dr_grpo" || type == "dapo" || type == "luspo") {
    const Tensor low = ((c1 < 1 - s.epsilon_low).logical_and(advantages < 0)).to(torch::kFloat);
    const Tensor high = ((c1 > 1 + s.epsilon_high).logical_and(advantages > 0)).to(torch::kFloat);
    metrics_.add(training, "clip_ratio/low_mean", global_masked_mean(low));
    metrics_.add(training, "clip_ratio/high_mean", global_masked_mean(high));
    metrics_.add(training, "clip_ratio/region_mean",
                 global_masked_mean(low.logical_or(high).to(torch::kFloat)));
    metrics_.add(training, "clip_ratio/low_min", extreme(low, true));
    metrics_.add(training, "clip_ratio/high_max", extreme(high, false));
  } else if (type == "cispo") {
    metrics_.add(
        training, "cispo_clip_ratio",
        global_masked_mean(((c1 > s.epsilon_high).logical_and(advantages > 0)).to(torch::kFloat)));
  } else if (type == "vespo") {
    metrics_.add(training, "vespo/phi_seq_mean", global_masked_mean(loss.phi_seq));
  }
}

LossOutput GRPOTrainer::compute_loss(models::Model& model, const data::Batch& inputs,
                                     bool return_outputs, const torch::Tensor&) {
  if (return_outputs) throw InputError("The GRPOTrainer does not support returning outputs");
  const bool training = model.is_training();
  const grpo::LossSettings s = loss_settings();
  auto [logps, entropies] = token_logps(model, inputs, 0);
  const Tensor mask = inputs.at("completion_mask").to(torch::kFloat);
  const Tensor entropy_mask =
      args().top_entropy_quantile() < 1.0 ? high_entropy_mask(entropies, mask) : Tensor();
  const Tensor advantages = inputs.at("advantages").to(torch::kFloat).unsqueeze(1);
  const Tensor old =
      inputs.contains("old_per_token_logps") ? inputs.at("old_per_token_logps") : logps.detach();
  const Tensor ref =
      inputs.contains("ref_per_token_logps") ? inputs.at("ref_per_token_logps") : Tensor();
  const grpo::PerTokenLoss loss =
      grpo::per_token_loss(logps, old, ref, advantages, mask, entropy_mask, s);
  // dapo, cispo, vespo: the generation batch's tokens over the processes, and in training over
  // the accumulation's share of the generation.
  const double ga = training ? static_cast<double>(current_gradient_accumulation_steps()) : 1.0;
  Tensor normalizer = inputs.num_items_in_batch.defined()
                          ? inputs.num_items_in_batch.to(torch::kFloat).clamp_min(1.0) /
                                static_cast<double>(accelerator().num_processes())
                          : Tensor();
  if (training && normalizer.defined())
    normalizer = normalizer * ga / static_cast<double>(plan_.steps_per_generation);
  LossOutput out;
  out.loss = grpo::aggregate_loss(loss.loss, mask, s, ga, normalizer);
  record_loss_metrics(loss, entropies, advantages, mask, s, training);
  return out;
}

}  // namespace trainer::trl
