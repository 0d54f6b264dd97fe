// TRL 1.16's DPOTrainer: the reference (a frozen copy, LoRA's base, or log-probabilities
// precomputed), compute_loss with its losses, and the metrics it logs.
#include "trl/dpo_trainer.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/base/warn.h"
#include "lib/models/hf_causal_lm.h"
#include "lib/models/linear.h"
#include "lib/models/lora.h"

namespace trainer::trl {
namespace {

using torch::Tensor;
namespace F = torch::nn::functional;

// The metrics TRL logs, in the order its _compute_loss first records them.
const std::vector<std::string>& metric_names() {
  static const std::vector<std::string> names = {
      "entropy",          "num_tokens",          "logits/chosen",
      "logits/rejected",  "mean_token_accuracy", "rewards/chosen",
      "rewards/rejected", "rewards/accuracies",  "rewards/margins",
      "logps/chosen",     "logps/rejected"};
  return names;
}

}  // namespace

namespace {

// The pair's log-ratios (policy over reference) and their scores under f_divergence_type.
struct Scores {
  Tensor chosen_logratios, rejected_logratios, chosen, rejected;
};

Scores divergence_scores(const DpoLossInputs& in, const TrainingArguments& args) {
  Scores s;
  s.chosen_logratios = in.chosen_logps - in.ref_chosen_logps;
  s.rejected_logratios = in.rejected_logps - in.ref_rejected_logps;
  s.chosen = s.chosen_logratios, s.rejected = s.rejected_logratios;
  const std::string& f = args.f_divergence_type();
  if (f == "forward_kl") {
    s.chosen = 1 - torch::exp(-s.chosen_logratios);
    s.rejected = 1 - torch::exp(-s.rejected_logratios);
  } else if (f == "js_divergence") {
    s.chosen = std::log(2.0) + F::logsigmoid(s.chosen_logratios);
    s.rejected = std::log(2.0) + F::logsigmoid(s.rejected_logratios);
  } else if (f == "alpha_divergence" && std::abs(args.f_alpha_divergence_coef() - 1.0) >= 1e-6) {
    const double a = args.f_alpha_divergence_coef() - 1.0;
    const double clamp = s.chosen_logratios.scalar_type() == torch::kHalf ? 11.0 : 80.0;
    auto score = [&](const Tensor& r) {
      return (torch::exp(torch::clamp((r * a).to(torch::kFloat), std::nullopt, clamp)) - 1.0)
                 .to(r.scalar_type()) *
             (1.0 / a);
    };
    s.chosen = score(s.chosen_logratios);
    s.rejected = score(s.rejected_logratios);
  }
  return s;
}

// One loss_type's loss of each pair ([B]).
Tensor pair_loss(const std::string& type, const DpoLossInputs& in, const Scores& sc,
                 const TrainingArguments& args) {
  const double beta = args.beta(), eps = args.label_smoothing();
  const Tensor delta = sc.chosen - sc.rejected;
  const Tensor& cl = sc.chosen_logratios;
  const Tensor& rl = sc.rejected_logratios;
  if (type == "sigmoid") return -F::logsigmoid(beta * delta);
  if (type == "hinge") return torch::relu(1 - beta * delta);
  if (type == "ipo" || type == "sigmoid_norm") {
    // Normalised by each completion's length (the IPO authors' choice, as TRL).
    const Tensor d = sc.chosen / in.chosen_tokens.clamp_min(1.0) -
                     sc.rejected / in.rejected_tokens.clamp_min(1.0);
    return type == "ipo" ? (d - 1 / (2 * beta)).square() : -F::logsigmoid(beta * d);
  }
  if (type == "exo_pair") {
    const Tensor z = beta * delta;
    return torch::sigmoid(z) * (F::logsigmoid(z) - std::log1p(-eps)) +
           torch::sigmoid(-z) * (F::logsigmoid(-z) - std::log(eps));
  }
  if (type == "nca_pair") {
    const Tensor c = beta * cl, r = beta * rl;
    return -F::logsigmoid(c) - 0.5 * F::logsigmoid(-c) - 0.5 * F::logsigmoid(-r);
  }
  if (type == "robust") {
    return (-(1 - eps) * F::logsigmoid(beta * delta) + eps * F::logsigmoid(-beta * delta)) /
           (1 - 2 * eps);
  }
  if (type == "bco_pair") return -F::logsigmoid(beta * cl) - F::logsigmoid(-beta * rl);
  if (type == "sppo_hard") return (cl - 0.5 / beta).square() + (rl + 0.5 / beta).square();
  if (type == "aot" || type == "aot_unpaired") {
    const Tensor d =
        type == "aot" ? std::get<0>(torch::sort(in.chosen_logps - in.rejected_logps, 0)) -
                            std::get<0>(torch::sort(in.ref_chosen_logps - in.ref_rejected_logps, 0))
                      : std::get<0>(torch::sort(cl, 0)) - std::get<0>(torch::sort(rl, 0));
    return -F::logsigmoid(beta * d) * (1 - eps) - F::logsigmoid(-beta * d) * eps;
  }
  if (type == "apo_zero") return (1 - torch::sigmoid(beta * cl)) + torch::sigmoid(beta * rl);
  if (type == "apo_down") {
    return torch::sigmoid(beta * cl) + (1 - torch::sigmoid(beta * (cl - rl)));
  }
  if (type == "discopop") {
    const Tensor logits = delta * beta;
    const Tensor modulation = torch::sigmoid(logits / args.discopop_tau());
    return -F::logsigmoid(logits) * (1 - modulation) + torch::exp(-logits) * modulation;
  }
  if (type == "sft") return in.sft_loss.expand({in.chosen_logps.size(0)});
  throw InputError(fmt::format("argument loss_type: \"{}\" is not a DPO loss", type));
}

}  // namespace

Tensor dpo_loss(const DpoLossInputs& in, const TrainingArguments& args) {
  const Scores scores = divergence_scores(in, args);
  const std::vector<std::string>& types = args.loss_type();
  Tensor loss = torch::zeros({}, scores.chosen.options());
  for (size_t k = 0; k < types.size(); ++k) {
    const double weight = args.loss_weights().empty() ? 1.0 : args.loss_weights()[k];
    Tensor per = pair_loss(types[k], in, scores, args);
    if (in.weights.defined()) per = per * in.weights;
    loss = loss + per.mean() * weight;
  }
  return loss;
}

DPOTrainer::DPOTrainer(std::shared_ptr<models::Model> model, TrainingArguments args,
                       std::shared_ptr<const data::Dataset> train_dataset,
                       std::shared_ptr<const data::Dataset> eval_dataset,
                       data::DataCollator collator, std::shared_ptr<models::Model> ref_model)
    : TrlTrainer(model, std::move(args), train_dataset, eval_dataset, collator),
      collator_(std::move(collator)) {
  aux_ = resolve_router_aux_loss(this->args(), this->model(), /*write_config=*/false);
  if (this->args().disable_dropout()) disable_dropout(this->model());
  set_reference_model(std::move(ref_model), this->args().disable_dropout());
  if (this->args().precompute_ref_log_probs()) {
    const auto& a = this->args();
    // The model as training starts (before a checkpoint is resumed), under the run's autocast.
    auto prepared =
        reference_model() ? reference_model() : accelerator().prepare_model(model, true);
    precompute(*prepared, train_dataset,
               a.precompute_ref_batch_size().value_or(a.per_device_train_batch_size()));
    if (eval_dataset) {
      precompute(*prepared, eval_dataset,
                 a.precompute_ref_batch_size().value_or(a.per_device_eval_batch_size()));
    }
  }
}

DPOTrainer::Scored DPOTrainer::score(models::Model& model, const data::Batch& inputs,
                                     bool weighting, bool router_aux_loss) {
  data::Batch batch;
  batch["input_ids"] = inputs.at("input_ids");
  batch["attention_mask"] = inputs.at("attention_mask");
  batch["labels"] = inputs.at("input_ids").masked_fill(inputs.at("completion_mask").eq(0), -100);
  batch.token_sum_sq = weighting;
  batch.router_aux_loss = router_aux_loss;
  const models::ModelOutput out = score_tokens(model, std::move(batch));
  Scored scored;
  scored.scores = out.token_scores;
  scored.aux_loss = out.aux_loss;
  const Tensor& lp = out.token_scores.log_probs;
  if (!args().ld_alpha()) {
    scored.logps = lp.sum(1);
  } else {
    // LD-DPO: the tokens past the shorter completion's length weigh ld_alpha.
    const Tensor mask = inputs.at("completion_mask").slice(1, 1).to(lp.device());
    const Tensor position = mask.cumsum(1);
    const Tensor lengths = mask.sum(1);
    const int64_t B = lengths.size(0) / 2;
    const Tensor shared = torch::minimum(lengths.slice(0, 0, B), lengths.slice(0, B)).repeat({2});
    const Tensor shared_mask = position.gt(0).logical_and(position.le(shared.unsqueeze(1)));
    const Tensor tail_mask = position.gt(shared.unsqueeze(1));
    scored.logps = (lp * shared_mask).sum(1) + *args().ld_alpha() * (lp * tail_mask).sum(1);
  }
  return scored;
}

Tensor DPOTrainer::reference_logps(models::Model& model, const data::Batch& inputs) {
  return with_reference(model, [&](models::Model& ref) { return score(ref, inputs, false).logps; });
}

void DPOTrainer::precompute(models::Model& model,
                            const std::shared_ptr<const data::Dataset>& dataset,
                            int64_t batch_size) {
  auto* pairs = dynamic_cast<const DpoDataset*>(dataset.get());
  if (!pairs) throw std::logic_error("DPOTrainer: precompute_ref_log_probs needs a DpoDataset");
  Accelerator& accelerator = this->accelerator();
  const int64_t n = pairs->size(), world = accelerator.num_processes();
  const int64_t rank = accelerator.process_index();
  // Each process a contiguous share, every process the same number of batches (a sharded model
  // needs every process in each forward): a short share repeats its first pair.
  const int64_t share = (n + world - 1) / world;
  const int64_t batches = (share + batch_size - 1) / batch_size;
  Tensor result = torch::zeros({n, 2}, torch::TensorOptions(torch::kDouble).device(device()));
  const bool training = model.is_training();
  model.eval();
  for (int64_t b = 0; b < batches; ++b) {
    std::vector<data::Example> examples;
    std::vector<int64_t> indices;
    for (int64_t k = 0; k < batch_size; ++k) {
      const int64_t i = rank * share + b * batch_size + k;
      if (i < std::min(n, (rank + 1) * share)) indices.push_back(i);
    }
    for (int64_t i : indices) examples.push_back(pairs->get(i));
    if (examples.empty()) examples.push_back(pairs->get(0));
    const data::Batch batch = collator_(examples).to(device());
    // `model` is the frozen copy when there is one: reference_logps scores that one alike.
    const Tensor logps = reference_logps(model, batch).to(torch::kDouble);
    const int64_t B = static_cast<int64_t>(examples.size());
    for (size_t k = 0; k < indices.size(); ++k) {
      result[indices[k]][0] = logps[static_cast<int64_t>(k)];
      result[indices[k]][1] = logps[B + static_cast<int64_t>(k)];
    }
  }
  model.train(training);
  if (world > 1) result = accelerator.reduce(result, Reduction::kSum);
  // The dataset is the trainer's own from here on: it carries what the collator reads.
  std::const_pointer_cast<DpoDataset>(std::static_pointer_cast<const DpoDataset>(dataset))
      ->set_reference(result.to(torch::kCPU));
}

// TRL's metrics of one micro-batch (entropy, num_tokens, logits, mean_token_accuracy, rewards,
// logps; aux_loss), summed over the processes in one reduction.
void DPOTrainer::record_metrics(const DpoLossInputs& in, const Scored& policy,
                                const data::Batch& inputs, const Tensor& shift_mask,
                                bool training) {
  torch::NoGradGuard no_grad;
  const double beta = args().beta();
  const int64_t B = shift_mask.size(0) / 2;
  const Tensor chosen_mask = shift_mask.slice(0, 0, B), rejected_mask = shift_mask.slice(0, B);
  const models::TokenScores& s = policy.scores;
  const Tensor chosen_rewards = beta * (in.chosen_logps - in.ref_chosen_logps).detach();
  const Tensor rejected_rewards = beta * (in.rejected_logps - in.ref_rejected_logps).detach();
  const Tensor mean_logits = s.mean_logits;
  Tensor sums =
      torch::stack({(s.entropy * shift_mask).sum(),                       // 0 entropy
                    shift_mask.sum(),                                     // 1 completion tokens
                    inputs.at("attention_mask").sum().to(torch::kFloat),  // 2 tokens
                    (mean_logits.slice(0, 0, B) * chosen_mask).sum(),     // 3 chosen logits
                    chosen_mask.sum(),                                    // 4 chosen tokens
                    (mean_logits.slice(0, B) * rejected_mask).sum(),      // 5 rejected logits
                    rejected_mask.sum(),                                  // 6 rejected tokens
                    (s.is_top1.slice(0, 0, B) * chosen_mask).sum(),       // 7 chosen top-1 hits
                    chosen_rewards.sum().to(torch::kFloat),               // 8
                    rejected_rewards.sum().to(torch::kFloat),             // 9
                    chosen_rewards.gt(rejected_rewards).sum().to(torch::kFloat),    // 10
                    (chosen_rewards - rejected_rewards).sum().to(torch::kFloat),    // 11
                    in.chosen_logps.detach().sum().to(torch::kFloat),               // 12
                    in.rejected_logps.detach().sum().to(torch::kFloat),             // 13
                    torch::scalar_tensor(static_cast<double>(B), torch::kFloat)});  // 14 pairs
  sums = process_sum(sums);
  const double* v = sums.data_ptr<double>();
  auto ratio = [](double x, double y) { return y > 0 ? x / y : 0.0; };
  const double num_tokens =
      training ? count_train_tokens(v[2], /*count_on_after_resume=*/true) : train_tokens();
  const double values[] = {ratio(v[0], v[1]), num_tokens,    ratio(v[3], v[4]), ratio(v[5], v[6]),
                           ratio(v[7], v[4]), v[8] / v[14],  v[9] / v[14],      v[10] / v[14],
                           v[11] / v[14],     v[12] / v[14], v[13] / v[14]};
  for (size_t k = 0; k < metric_names().size(); ++k) {
    // num_tokens is the running total, not a mean (TRL replaces its list).
    if (metric_names()[k] == "num_tokens") {
      metrics_.set(training, metric_names()[k], values[k]);
    } else {
      metrics_.add(training, metric_names()[k], values[k]);
    }
  }
  if (aux_.enabled && policy.aux_loss.defined()) {
    metrics_.add(training, "aux_loss", process_mean(policy.aux_loss));
  }
}

LossOutput DPOTrainer::compute_loss(models::Model& model, const data::Batch& inputs,
                                    bool return_outputs, const Tensor& num_items_in_batch) {
  const TrainingArguments& a = args();
  // The reference first: a sharded model's forward without gradients reshards every unit, which
  // the policy's backward would then find freed.
  Tensor ref;
  if (!inputs.contains("ref_chosen_logps")) ref = reference_logps(model, inputs);
  const Scored policy = score(model, inputs, a.use_weighting(), aux_.enabled);
  const Tensor completion = inputs.at("completion_mask");
  const Tensor shift_mask = completion.slice(1, 1).to(torch::kFloat);
  const int64_t B = completion.size(0) / 2;
  DpoLossInputs in;
  in.chosen_logps = policy.logps.slice(0, 0, B);
  in.rejected_logps = policy.logps.slice(0, B);
  if (inputs.contains("ref_chosen_logps")) {
    in.ref_chosen_logps = inputs.at("ref_chosen_logps").to(in.chosen_logps.dtype());
    in.ref_rejected_logps = inputs.at("ref_rejected_logps").to(in.chosen_logps.dtype());
  } else {
    in.ref_chosen_logps = ref.slice(0, 0, B);
    in.ref_rejected_logps = ref.slice(0, B);
  }
  const Tensor tokens = completion.sum(1).to(torch::kFloat);
  in.chosen_tokens = tokens.slice(0, 0, B);
  in.rejected_tokens = tokens.slice(0, B);
  const Tensor chosen_mask = shift_mask.slice(0, 0, B), rejected_mask = shift_mask.slice(0, B);
  const models::TokenScores& s = policy.scores;
  if (std::find(a.loss_type().begin(), a.loss_type().end(), "sft") != a.loss_type().end()) {
    in.sft_loss = -(s.log_probs.slice(0, 0, B) * chosen_mask).sum() / chosen_mask.sum();
  }
  if (a.use_weighting()) {
    torch::NoGradGuard no_grad;
    const Tensor aligned = (s.log_probs - s.log_sum_sq_probs) * shift_mask;
    const Tensor mean = aligned.sum(1) / shift_mask.sum(1).clamp_min(1);
    const Tensor w = torch::exp(mean);
    in.weights = w.slice(0, 0, B) * w.slice(0, B);
  }
  Tensor loss = dpo_loss(in, a);
  // TRL: the policy's router load-balancing loss over the chosen and rejected rows, weighted.
  const bool aux = aux_.enabled && policy.aux_loss.defined();
  if (aux) loss = loss + aux_.coef * policy.aux_loss;

  record_metrics(in, policy, inputs, shift_mask, model.is_training());
  (void)num_items_in_batch;
  (void)return_outputs;
  return {loss, Tensor()};
}

PredictionOutput DPOTrainer::prediction_step(models::Model& model, const data::Batch& inputs,
                                             bool prediction_loss_only) {
  torch::NoGradGuard no_grad;
  PredictionOutput out;
  out.loss = compute_loss(model, inputs).loss.detach();
  (void)prediction_loss_only;
  return out;
}

}  // namespace trainer::trl
