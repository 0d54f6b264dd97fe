// Evaluation and prediction: Transformers' evaluation_loop over the eval data, each process its
// share, the outputs gathered without the repeats that even out the processes, so that the
// metrics are the same on any number of processes; with skip_memory_metrics false, the memory
// each took (the "eval" and "test" stages).
#include <cmath>

#include <fmt/format.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/base/stopwatch.h"
#include "lib/base/text.h"
#include "lib/runtime/signals.h"
#include "trainer/trainer.h"

namespace trainer {

using json = nlohmann::ordered_json;

PredictionResult Trainer::evaluation_loop(const std::shared_ptr<const data::Dataset>& dataset,
                                          const std::string& prefix, bool keep_predictions) {
  Accelerator& accelerator = *accelerator_;
  const base::Stopwatch stopwatch;
  auto loader = accelerator.prepare(
      data::DataLoader(dataset, std::make_shared<data::SequentialSampler>(dataset->size()),
                       {args_.per_device_eval_batch_size(), false}, data_collator_));
  std::shared_ptr<models::Model> model = model_wrapped_;
  if (!model) {
    if (!model_eval_) model_eval_ = accelerator.prepare_model(model_, /*evaluation_mode=*/true);
    model = model_eval_;
  }
  model->eval();
  torch::NoGradGuard no_grad;
  const bool wants_predictions = keep_predictions || compute_metrics_ != nullptr;
  // Per example, in the single-process order: each batch's loss repeated over its rows (as
  // Transformers does), outputs and labels. gather_for_metrics drops the repeats that even out
  // the processes, so every number below is the same on any number of processes.
  std::vector<torch::Tensor> losses, predictions, labels;
  bool token_loss = false;  // a language model's loss over its labels (not DPO's pairs')
  for (int64_t i = 0; i < loader->size(); ++i) {
    // While training, a signal waits for the step boundary after this evaluation.
    if (int sig = in_training_loop_ ? 0 : runtime::interrupt_signal()) {
      throw Interrupted(sig, fmt::format("interrupted by {} during evaluation (at step {}); "
                                         "nothing was saved",
                                         runtime::signal_name(sig), state_.global_step));
    }
    data::Batch batch = loader->batch(i);
    token_loss = token_loss || batch.contains("labels");
    PredictionOutput out = prediction_step(*model, batch, !wants_predictions);
    if (out.loss.defined()) {
      torch::Tensor per_example = out.loss.reshape({1}).expand({batch.size()}).contiguous();
      losses.push_back(accelerator.gather_for_metrics(per_example).to(torch::kCPU));
    }
    if (wants_predictions && out.logits.defined()) {
      predictions.push_back(accelerator.gather_for_metrics(out.logits.detach()).to(torch::kCPU));
    }
    if (wants_predictions && out.labels.defined()) {
      labels.push_back(accelerator.gather_for_metrics(out.labels).to(torch::kCPU));
    }
  }
  loader->end_iteration();
  PredictionResult result;
  if (!predictions.empty()) result.predictions = torch::cat(predictions);
  if (!labels.empty()) result.label_ids = torch::cat(labels);
  const int64_t num_samples = dataset->size();
  Metrics& metrics = result.metrics;
  if (!losses.empty()) {
    torch::Tensor all = torch::cat(losses).to(torch::kDouble).contiguous();
    const double* values = all.data_ptr<double>();
    double sum = 0;
    for (int64_t k = 0; k < all.numel(); ++k) sum += values[k];
    metrics[prefix + "_loss"] = sum / static_cast<double>(std::max<int64_t>(1, all.numel()));
    // A language model's loss is also read as perplexity (Transformers' run_clm adds it).
    if (model_->task().kind == data::TaskKind::kCausalLM && token_loss) {
      metrics[prefix + "_perplexity"] = std::exp(metrics[prefix + "_loss"]);
    }
  }
  if (compute_metrics_ && result.predictions.defined() && result.label_ids.defined()) {
    for (const auto& [key, value] : compute_metrics_({result.predictions, result.label_ids})) {
      metrics[key.rfind(prefix + "_", 0) == 0 ? key : prefix + "_" + key] = value;
    }
  }
  const double runtime = stopwatch.seconds();
  const int64_t total_batch = args_.per_device_eval_batch_size() * accelerator.num_processes();
  const int64_t num_steps = (num_samples + total_batch - 1) / total_batch;
  metrics[prefix + "_runtime"] = base::round_to(runtime, 4);
  metrics[prefix + "_samples_per_second"] =
      base::round_to(static_cast<double>(num_samples) / runtime, 3);
  metrics[prefix + "_steps_per_second"] =
      base::round_to(static_cast<double>(num_steps) / runtime, 3);
  return result;
}

Metrics Trainer::evaluate(const std::string& prefix) {
  if (!eval_dataset_) throw InputError("Trainer: evaluation needs an eval dataset");
  // Memory metrics (skip_memory_metrics false): stage "eval" whatever the prefix, as in
  // Transformers; inside train() the training stage counts it instead.
  const MemoryStage memory_stage(memory_tracker_, "eval");
  Metrics metrics = evaluation_loop(eval_dataset_, prefix, false).metrics;
  json logs;
  for (const auto& [key, value] : metrics) logs[key] = value;
  add_logged_metrics(logs, prefix);
  for (const auto& [key, value] : logs.items()) {
    if (value.is_number()) metrics[key] = value.get<double>();
  }
  if (state_.global_step > 0) {
    metrics["epoch"] = state_.epoch;
    log(logs);
  }
  fire([&](TrainerCallback& c) { c.on_evaluate(args_, state_, control_, metrics); });
  // After the log and on_evaluate, as Transformers adds them: in the result only.
  for (const auto& [key, bytes] : memory_tracker_.stop("eval")) {
    metrics[key] = static_cast<double>(bytes);
  }
  control_.should_evaluate = false;
  last_eval_metrics_ = metrics;
  last_eval_step_ = state_.global_step;
  return metrics;
}

PredictionResult Trainer::predict(const std::shared_ptr<const data::Dataset>& dataset,
                                  const std::string& prefix) {
  if (!dataset) throw InputError("Trainer: predict needs a dataset");
  const MemoryStage memory_stage(memory_tracker_, "test");
  PredictionResult result = evaluation_loop(dataset, prefix, true);
  for (const auto& [key, bytes] : memory_tracker_.stop("test")) {
    result.metrics[key] = static_cast<double>(bytes);
  }
  return result;
}

}  // namespace trainer
