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

// What an evaluation keeps and computes, from the arguments (Transformers' evaluation_loop).
struct EvalPlan {
  bool wants_predictions = false;  // outputs and labels gathered at all
  bool batch_metrics = false;      // batch_eval_metrics: compute_metrics after every batch
  bool keep_outputs = false;       // kept to the end (predict's, or compute_metrics' at the end)
  bool with_inputs = false, with_losses = false;  // include_for_metrics
  int64_t accumulation = 0;                       // eval_accumulation_steps
};

EvalPlan eval_plan(const TrainingArguments& args, bool keep_predictions, bool has_metrics) {
  EvalPlan plan;
  const bool loss_only = args.prediction_loss_only();
  plan.wants_predictions = !loss_only && (keep_predictions || has_metrics);
  plan.batch_metrics = args.batch_eval_metrics() && has_metrics && !loss_only;
  // With batch_eval_metrics evaluate keeps nothing; predict keeps the outputs it returns.
  plan.keep_outputs = plan.wants_predictions && (!plan.batch_metrics || keep_predictions);
  const auto& include = args.include_for_metrics();
  plan.with_inputs = plan.wants_predictions &&
                     std::find(include.begin(), include.end(), "inputs") != include.end();
  plan.with_losses =
      plan.wants_predictions && std::find(include.begin(), include.end(), "loss") != include.end();
  plan.accumulation = args.eval_accumulation_steps().value_or(0);
  return plan;
}

// Per example, in the single-process order: each batch's loss repeated over its rows (as
// Transformers does), outputs and labels. gather_for_metrics drops the repeats that even out the
// processes, so every number made of them is the same on any number of processes.
struct EvalGathered {
  Gathered losses, predictions, labels, inputs;
  std::optional<Metrics> batch_result;  // batch_eval_metrics' last compute_metrics
  bool token_loss = false;              // a language model's loss over its labels (not DPO's)
};

// One batch's outputs gathered over the processes into `g`, and compute_metrics run on them with
// batch_eval_metrics (`last`: the summary's batch); whether it ran.
bool gather_batch(Accelerator& accelerator, const data::Batch& batch, const PredictionOutput& out,
                  const EvalPlan& plan, const ComputeMetrics& compute_metrics, bool last,
                  EvalGathered& g) {
  torch::Tensor batch_losses, batch_predictions, batch_labels, batch_inputs;
  if (out.loss.defined()) {
    torch::Tensor per_example = out.loss.reshape({1}).expand({batch.size()}).contiguous();
    batch_losses = accelerator.gather_for_metrics(per_example);
    g.losses.add(batch_losses);
  }
  if (plan.with_inputs) {
    const std::string name = batch.contains("input_ids") ? "input_ids" : "x";
    if (batch.contains(name)) batch_inputs = accelerator.gather_for_metrics(batch.at(name));
  }
  if (plan.wants_predictions && out.logits.defined()) {
    batch_predictions = accelerator.gather_for_metrics(out.logits.detach());
  }
  if (plan.wants_predictions && out.labels.defined()) {
    batch_labels = accelerator.gather_for_metrics(out.labels);
  }
  if (plan.keep_outputs) {
    if (batch_predictions.defined()) g.predictions.add(batch_predictions);
    if (batch_labels.defined()) g.labels.add(batch_labels);
    if (batch_inputs.defined()) g.inputs.add(batch_inputs);
  }
  if (plan.batch_metrics && batch_predictions.defined() && batch_labels.defined()) {
    // Transformers' batch_eval_metrics: compute_metrics after every batch, the summary on the
    // last (compute_result true).
    EvalPrediction prediction{batch_predictions, batch_labels};
    if (plan.with_inputs) prediction.inputs = batch_inputs;
    if (plan.with_losses) prediction.losses = batch_losses;
    prediction.compute_result = last;
    g.batch_result = compute_metrics(prediction);
    return true;
  }
  return false;
}

// compute_metrics on what was gathered (concatenated, or batch by batch with
// eval_do_concat_batches false), or batch_eval_metrics' summary; the outputs into `result`.
Metrics computed_metrics(EvalGathered& g, const EvalPlan& plan, bool concat,
                         const ComputeMetrics& compute_metrics, PredictionResult& result) {
  if (concat) {
    result.predictions = g.predictions.all();
    result.label_ids = g.labels.all();
  } else {
    result.prediction_batches = g.predictions.batches();
    result.label_id_batches = g.labels.batches();
  }
  if (g.batch_result) return *g.batch_result;
  if (!compute_metrics || plan.batch_metrics || g.predictions.batches().empty() ||
      g.labels.batches().empty()) {
    return {};
  }
  EvalPrediction prediction;
  if (concat) {
    prediction.predictions = result.predictions;
    prediction.label_ids = result.label_ids;
    if (plan.with_inputs) prediction.inputs = g.inputs.all();
    if (plan.with_losses) prediction.losses = g.losses.all();
  } else {
    prediction.prediction_batches = result.prediction_batches;
    prediction.label_id_batches = result.label_id_batches;
    if (plan.with_inputs) prediction.input_batches = g.inputs.batches();
    if (plan.with_losses) prediction.loss_batches = g.losses.batches();
  }
  return compute_metrics(prediction);
}

// <prefix>_loss, the mean of the gathered per-example losses (and a language model's perplexity).
void add_loss(Metrics& metrics, Gathered& losses, const std::string& prefix, bool perplexity) {
  if (losses.batches().empty()) return;
  torch::Tensor all = losses.all().to(torch::kDouble).contiguous();
  const double* values = all.data_ptr<double>();
  double sum = 0;
  for (int64_t k = 0; k < all.numel(); ++k) sum += values[k];
  metrics[prefix + "_loss"] = sum / static_cast<double>(std::max<int64_t>(1, all.numel()));
  // A language model's loss is also read as perplexity (Transformers' run_clm adds it).
  if (perplexity) metrics[prefix + "_perplexity"] = std::exp(metrics[prefix + "_loss"]);
}

// Transformers' speed_metrics: runtime, samples and steps per second.
void add_speed(Metrics& metrics, const std::string& prefix, double runtime, int64_t num_samples,
               int64_t total_batch) {
  const int64_t num_steps = (num_samples + total_batch - 1) / total_batch;
  metrics[prefix + "_runtime"] = base::round_to(runtime, 4);
  metrics[prefix + "_samples_per_second"] =
      base::round_to(static_cast<double>(num_samples) / runtime, 3);
  metrics[prefix + "_steps_per_second"] =
      base::round_to(static_cast<double>(num_steps) / runtime, 3);
}

// Transformers' _get_eval_sampler: in order, or grouped by length (the same order each time).
std::shared_ptr<const data::Sampler> eval_sampler(const data::Dataset& dataset, int64_t batch_size,
                                                  const TrainingArguments& args) {
  if (args.train_sampling_strategy() == "group_by_length") {
    return std::make_shared<data::LengthGroupedSampler>(data::example_lengths(dataset), batch_size,
                                                        static_cast<uint64_t>(args.sampler_seed()),
                                                        /*per_epoch=*/false);
  }
  return std::make_shared<data::SequentialSampler>(dataset.size());
}

}  // namespace

std::shared_ptr<const data::Sampler> Trainer::make_eval_sampler(const data::Dataset& dataset,
                                                                int64_t batch_size) {
  return eval_sampler(dataset, batch_size, args_);
}

PredictionResult Trainer::evaluation_loop(const std::shared_ptr<const data::Dataset>& dataset,
                                          const std::string& prefix, bool keep_predictions) {
  Accelerator& accelerator = *accelerator_;
  const base::Stopwatch stopwatch;
  const int64_t batch_size =
      process_batch_size(args_.per_device_eval_batch_size(), "per_device_eval_batch_size");
  auto loader =
      accelerator.prepare(data::DataLoader(dataset, make_eval_sampler(*dataset, batch_size),
                                           loader_options(batch_size, false), data_collator_));
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
  const EvalPlan plan = eval_plan(args_, keep_predictions, compute_metrics_ != nullptr);
  EvalGathered g;
  for (int64_t i = 0; i < loader->size(); ++i) {
    // While training, a signal waits for the step boundary after this evaluation.
    if (int sig = in_training_loop_ ? 0 : runtime::interrupt_signal()) {
      throw Interrupted(sig, fmt::format("interrupted by {} during evaluation (at step {}); "
                                         "nothing was saved",
                                         runtime::signal_name(sig), state_.global_step));
    }
    data::Batch batch = loader->batch(i);
    if (full_eval) batch = cast_inputs(batch, *full_eval);
    g.token_loss = g.token_loss || batch.contains("labels");
    const PredictionOutput out = prediction_step(*model, batch, !plan.wants_predictions);
    const bool computed =
        gather_batch(accelerator, batch, out, plan, compute_metrics_, i + 1 == loader->size(), g);
    if (!computed && plan.accumulation > 0 && (i + 1) % plan.accumulation == 0) {
      // eval_accumulation_steps: what was gathered so far goes to the host.
      for (Gathered* gathered : {&g.losses, &g.predictions, &g.labels, &g.inputs}) {
        gathered->to_cpu();
      }
    }
  }
  loader->end_iteration();
  cast.reset();
  PredictionResult result;
  const Metrics computed =
      computed_metrics(g, plan, args_.eval_do_concat_batches(), compute_metrics_, result);
  Metrics& metrics = result.metrics;
  add_loss(metrics, g.losses, prefix,
           model_->task().kind == data::TaskKind::kCausalLM && g.token_loss);
  for (const auto& [key, value] : computed) {
    metrics[key.rfind(prefix + "_", 0) == 0 ? key : prefix + "_" + key] = value;
  }
  add_speed(metrics, prefix, stopwatch.seconds(), dataset->size(),
            batch_size * accelerator.num_processes());
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
