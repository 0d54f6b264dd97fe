// Evaluation and prediction: Transformers' evaluation_loop over the eval data, each process its
// share, the outputs gathered without the repeats that even out the processes, so that the
// metrics are the same on any number of processes; with skip_memory_metrics false, the memory
// each took (the "eval" and "test" stages).
#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/base/stopwatch.h"
#include "lib/base/text.h"
#include "lib/runtime/signals.h"
#include "trainer/trainer.h"

namespace trainer {

using json = nlohmann::ordered_json;

namespace {

// Transformers' EvalLoopContainer: what the loop gathers, batch by batch, kept where it was made
// until to_cpu() (every eval_accumulation_steps batches, and at the end) moves it to the host.
struct Gathered {
  std::vector<torch::Tensor> on_device, on_host;
  void add(torch::Tensor tensor) { on_device.push_back(std::move(tensor)); }
  void to_cpu() {
    for (torch::Tensor& t : on_device) on_host.push_back(t.to(torch::kCPU));
    on_device.clear();
  }
  const std::vector<torch::Tensor>& batches() {
    to_cpu();
    return on_host;
  }
  torch::Tensor all() { return batches().empty() ? torch::Tensor() : torch::cat(on_host); }
};

// bf16_full_eval / fp16_full_eval: the model's floating parameters and buffers cast to `dtype`
// (not autocast) while it lives; the original tensors put back after, unchanged.
class FullEvalCast {
 public:
  FullEvalCast(torch::nn::Module& model, torch::Dtype dtype) {
    auto cast = [&](torch::Tensor& t) {
      if (!t.defined() || !t.is_floating_point() || t.scalar_type() == dtype) return;
      torch::Tensor original = t.data();
      t.set_data(original.to(dtype));
      saved_.emplace_back(t, original);
    };
    for (torch::Tensor& p : model.parameters()) cast(p);
    for (torch::Tensor& b : model.buffers()) cast(b);
  }
  ~FullEvalCast() {
    for (auto& [tensor, original] : saved_) tensor.set_data(original);
  }
  FullEvalCast(const FullEvalCast&) = delete;
  FullEvalCast& operator=(const FullEvalCast&) = delete;

 private:
  std::vector<std::pair<torch::Tensor, torch::Tensor>> saved_;
};

// The batch's floating inputs (not its labels) in the full-eval dtype, as the model's weights.
data::Batch cast_inputs(const data::Batch& batch, torch::Dtype dtype) {
  data::Batch out = batch;
  for (const auto& [name, tensor] : batch.items()) {
    if (name != "labels" && tensor.defined() && tensor.is_floating_point()) {
      out[name] = tensor.to(dtype);
    }
  }
  return out;
}

}  // namespace

PredictionResult Trainer::evaluation_loop(const std::shared_ptr<const data::Dataset>& dataset,
                                          const std::string& prefix, bool keep_predictions) {
  Accelerator& accelerator = *accelerator_;
  const base::Stopwatch stopwatch;
  const int64_t batch_size =
      process_batch_size(args_.per_device_eval_batch_size(), "per_device_eval_batch_size");
  // Transformers' _get_eval_sampler: in order, or grouped by length (the same order each time).
  std::shared_ptr<const data::Sampler> sampler =
      std::make_shared<data::SequentialSampler>(dataset->size());
  if (args_.train_sampling_strategy() == "group_by_length") {
    sampler = std::make_shared<data::LengthGroupedSampler>(
        data::example_lengths(*dataset), batch_size, static_cast<uint64_t>(args_.sampler_seed()),
        /*per_epoch=*/false);
  }
  auto loader = accelerator.prepare(
      data::DataLoader(dataset, sampler, loader_options(batch_size, false), data_collator_));
  std::shared_ptr<models::Model> model = model_wrapped_;
  if (!model) {
    if (!model_eval_) model_eval_ = accelerator.prepare_model(model_, /*evaluation_mode=*/true);
    model = model_eval_;
  }
  // Full bf16 / fp16 evaluation outside train(), as Transformers casts the model only when it is
  // not training.
  std::optional<torch::Dtype> full_eval;
  if (!in_training_loop_ && args_.bf16_full_eval()) full_eval = torch::kBFloat16;
  if (!in_training_loop_ && args_.fp16_full_eval()) full_eval = torch::kHalf;
  std::optional<FullEvalCast> cast;
  if (full_eval) cast.emplace(*model_, *full_eval);
  model->eval();
  torch::NoGradGuard no_grad;
  const bool loss_only = args_.prediction_loss_only();
  const bool wants_predictions = !loss_only && (keep_predictions || compute_metrics_ != nullptr);
  const bool batch_metrics = args_.batch_eval_metrics() && compute_metrics_ && !loss_only;
  // With batch_eval_metrics evaluate keeps nothing; predict keeps the outputs it returns.
  const bool keep_outputs = wants_predictions && (!batch_metrics || keep_predictions);
  const auto& include = args_.include_for_metrics();
  const bool with_inputs =
      wants_predictions && std::find(include.begin(), include.end(), "inputs") != include.end();
  const bool with_losses =
      wants_predictions && std::find(include.begin(), include.end(), "loss") != include.end();
  const int64_t accumulation = args_.eval_accumulation_steps().value_or(0);
  // Per example, in the single-process order: each batch's loss repeated over its rows (as
  // Transformers does), outputs and labels. gather_for_metrics drops the repeats that even out
  // the processes, so every number below is the same on any number of processes.
  Gathered losses, predictions, labels, inputs;
  std::optional<Metrics> batch_result;
  bool token_loss = false;  // a language model's loss over its labels (not DPO's pairs')
  for (int64_t i = 0; i < loader->size(); ++i) {
    // While training, a signal waits for the step boundary after this evaluation.
    if (int sig = in_training_loop_ ? 0 : runtime::interrupt_signal()) {
      throw Interrupted(sig, fmt::format("interrupted by {} during evaluation (at step {}); "
                                         "nothing was saved",
                                         runtime::signal_name(sig), state_.global_step));
    }
    data::Batch batch = loader->batch(i);
    if (full_eval) batch = cast_inputs(batch, *full_eval);
    token_loss = token_loss || batch.contains("labels");
    PredictionOutput out = prediction_step(*model, batch, !wants_predictions);
    torch::Tensor batch_losses, batch_predictions, batch_labels, batch_inputs;
    if (out.loss.defined()) {
      torch::Tensor per_example = out.loss.reshape({1}).expand({batch.size()}).contiguous();
      batch_losses = accelerator.gather_for_metrics(per_example);
      losses.add(batch_losses);
    }
    if (with_inputs) {
      const std::string name = batch.contains("input_ids") ? "input_ids" : "x";
      if (batch.contains(name)) batch_inputs = accelerator.gather_for_metrics(batch.at(name));
    }
    if (wants_predictions && out.logits.defined()) {
      batch_predictions = accelerator.gather_for_metrics(out.logits.detach());
    }
    if (wants_predictions && out.labels.defined()) {
      batch_labels = accelerator.gather_for_metrics(out.labels);
    }
    if (keep_outputs) {
      if (batch_predictions.defined()) predictions.add(batch_predictions);
      if (batch_labels.defined()) labels.add(batch_labels);
      if (batch_inputs.defined()) inputs.add(batch_inputs);
    }
    if (batch_metrics && batch_predictions.defined() && batch_labels.defined()) {
      // Transformers' batch_eval_metrics: compute_metrics after every batch, the summary on the
      // last (compute_result true).
      EvalPrediction prediction{batch_predictions, batch_labels};
      if (with_inputs) prediction.inputs = batch_inputs;
      if (with_losses) prediction.losses = batch_losses;
      prediction.compute_result = i + 1 == loader->size();
      batch_result = compute_metrics_(prediction);
    } else if (accumulation > 0 && (i + 1) % accumulation == 0) {
      // eval_accumulation_steps: what was gathered so far goes to the host.
      losses.to_cpu();
      predictions.to_cpu();
      labels.to_cpu();
      inputs.to_cpu();
    }
  }
  loader->end_iteration();
  cast.reset();
  PredictionResult result;
  const bool concat = args_.eval_do_concat_batches();
  if (concat) {
    result.predictions = predictions.all();
    result.label_ids = labels.all();
  } else {
    result.prediction_batches = predictions.batches();
    result.label_id_batches = labels.batches();
  }
  const int64_t num_samples = dataset->size();
  Metrics& metrics = result.metrics;
  Metrics computed;
  if (batch_result) {
    computed = *batch_result;
  } else if (compute_metrics_ && !batch_metrics && !predictions.batches().empty() &&
             !labels.batches().empty()) {
    EvalPrediction prediction;
    if (concat) {
      prediction.predictions = result.predictions;
      prediction.label_ids = result.label_ids;
      if (with_inputs) prediction.inputs = inputs.all();
      if (with_losses) prediction.losses = losses.all();
    } else {
      prediction.prediction_batches = result.prediction_batches;
      prediction.label_id_batches = result.label_id_batches;
      if (with_inputs) prediction.input_batches = inputs.batches();
      if (with_losses) prediction.loss_batches = losses.batches();
    }
    computed = compute_metrics_(prediction);
  }
  if (!losses.batches().empty()) {
    torch::Tensor all = losses.all().to(torch::kDouble).contiguous();
    const double* values = all.data_ptr<double>();
    double sum = 0;
    for (int64_t k = 0; k < all.numel(); ++k) sum += values[k];
    metrics[prefix + "_loss"] = sum / static_cast<double>(std::max<int64_t>(1, all.numel()));
    // A language model's loss is also read as perplexity (Transformers' run_clm adds it).
    if (model_->task().kind == data::TaskKind::kCausalLM && token_loss) {
      metrics[prefix + "_perplexity"] = std::exp(metrics[prefix + "_loss"]);
    }
  }
  for (const auto& [key, value] : computed) {
    metrics[key.rfind(prefix + "_", 0) == 0 ? key : prefix + "_" + key] = value;
  }
  const double runtime = stopwatch.seconds();
  const int64_t total_batch = batch_size * accelerator.num_processes();
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
  // Inside train() every evaluation is logged, eval_on_start's at step 0 too.
  if (state_.global_step > 0 || in_training_loop_) {
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
