// The Trainer's steps under the loop, following Transformers' Trainer: construction (the
// Accelerator, the callbacks), compute_loss, training_step and prediction_step, the checks every
// process agrees on after a step, and log().
#include "trainer/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/base/text.h"
#include "lib/base/warn.h"
#include "lib/models/hf_causal_lm.h"
#include "lib/runtime/allocator.h"
#include "lib/runtime/cuda.h"
#include "lib/runtime/signals.h"
#include "lib/runtime/torch_logs.h"
#include "trainer/callbacks.h"
#include "trainer/integrations.h"

namespace trainer {

using json = nlohmann::ordered_json;

namespace {

// Transformers' enable_full_determinism: deterministic algorithms only (an operation without one
// is an error), cuBLAS's deterministic workspace, cuDNN deterministic and not benchmarking.
void enable_full_determinism() {
  ::setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8", 1);
  at::globalContext().setDeterministicAlgorithms(true, false);
  at::globalContext().setDeterministicCuDNN(true);
  at::globalContext().setBenchmarkCuDNN(false);
}

}  // namespace

Trainer::Trainer(std::shared_ptr<models::Model> model, TrainingArguments args,
                 std::shared_ptr<const data::Dataset> train_dataset,
                 std::shared_ptr<const data::Dataset> eval_dataset,
                 data::DataCollator data_collator, ComputeMetrics compute_metrics,
                 std::vector<std::shared_ptr<TrainerCallback>> callbacks)
    : model_(std::move(model)),
      args_(std::move(args)),
      train_dataset_(std::move(train_dataset)),
      eval_dataset_(std::move(eval_dataset)),
      data_collator_(std::move(data_collator)),
      compute_metrics_(std::move(compute_metrics)) {
  if (!model_) throw std::invalid_argument("Trainer: model is null");
  runtime::configure_allocator();
  runtime::route_torch_logs();
  args_.validate();
  torch::manual_seed(static_cast<uint64_t>(args_.seed()));
  if (args_.full_determinism()) enable_full_determinism();
  // accelerator_config's gradient_accumulation_kwargs num_steps, as Transformers takes it.
  args_.gradient_accumulation_steps(args_.effective_accumulation_steps());
  // An elastic run on fewer nodes than its most: more accumulation, the same total batch.
  const int64_t asked_accumulation = args_.gradient_accumulation_steps();
  args_.gradient_accumulation_steps(Accelerator::elastic_accumulation(asked_accumulation));
  accelerator_ = std::make_shared<Accelerator>(accelerator_options(args_));
  base::set_log_level(args_.process_log_level(accelerator_->is_local_main_process(),
                                              accelerator_->is_main_process()));
  // skip_memory_metrics false: the rest of the construction is the "init" stage (Transformers').
  memory_tracker_ = TrainerMemoryTracker(args_.skip_memory_metrics(), device_memory_counters());
  memory_tracker_.start("init");
  if (args_.gradient_accumulation_steps() != asked_accumulation) {
    accelerator_->print(fmt::format(
        "Elastic run on {} processes: gradient_accumulation_steps {} -> {} keeps the total batch "
        "size",
        accelerator_->num_processes(), asked_accumulation, args_.gradient_accumulation_steps()));
  }
  if (args_.tf32()) {
    // As Transformers: tf32 true without a CUDA device is an error; null leaves LibTorch's default.
    if (*args_.tf32() && !device().is_cuda()) {
      throw InputError(
          "argument tf32: true is not supported on CPU (it needs a CUDA device; use null or "
          "false)");
    }
    if (device().is_cuda()) cuda::set_tf32(*args_.tf32());
  }
  state_.is_world_process_zero = accelerator_->is_main_process();
  state_.is_local_process_zero = accelerator_->is_local_main_process();
  add_callbacks(std::move(callbacks));
  configure_model();
  model_->to(accelerator_->device());
  memory_tracker_.stop("init");
}

void Trainer::add_callbacks(std::vector<std::shared_ptr<TrainerCallback>> callbacks) {
  callbacks_.push_back(std::make_shared<DefaultFlowCallback>());
  // report_to's integrations, after the flow callback as in Transformers.
  for (auto& callback : make_report_callbacks(args_)) callbacks_.push_back(std::move(callback));
  if (state_.is_world_process_zero) callbacks_.push_back(make_console_callback(args_));
  if (args_.early_stopping_patience()) {
    callbacks_.push_back(std::make_shared<EarlyStoppingCallback>(*args_.early_stopping_patience(),
                                                                 args_.early_stopping_threshold()));
  }
  for (auto& callback : callbacks) callbacks_.push_back(std::move(callback));
}

void Trainer::configure_model() {
  // What the memory arguments ask of the model (Transformers calls
  // activation_checkpointing_enable here; Liger's kernels are applied to the model likewise).
  const CheckpointingPlan checkpointing = args_.checkpointing_plan();
  if (checkpointing.offload && device().is_cuda()) {
    throw InputError(
        "argument activation_checkpointing_kwargs: offload true is not supported on CUDA (the "
        "recomputed blocks' inputs stay on the device; on CPU they are in host memory already)");
  }
  models::set_activation_checkpointing(*model_,
                                       checkpointing.enabled ? checkpointing.every_n_layers : 0);
  models::set_chunked_loss(*model_, args_.chunked_loss());
  const auto& debug = args_.debug();
  detect_overflow_ = std::find(debug.begin(), debug.end(), "underflow_overflow") != debug.end();
  models::set_detect_overflow(*model_, detect_overflow_);
  auto* hf = models::find_wrapped<models::HfCausalLM>(*model_);
  if (hf) hf->set_use_cache(args_.use_cache());
  if (args_.neftune_noise_alpha()) {
    if (!hf) {
      throw InputError(fmt::format(
          "argument neftune_noise_alpha: {} needs a model with input embeddings (a Hugging Face "
          "model folder, model_type or config_name), not {}",
          base::python_float(*args_.neftune_noise_alpha()), args_.model_name()));
    }
    hf->set_neftune_noise_alpha(*args_.neftune_noise_alpha());
  }
}

void Trainer::add_callback(std::shared_ptr<TrainerCallback> callback) {
  callbacks_.push_back(std::move(callback));
}

LossOutput Trainer::compute_loss(models::Model& model, const data::Batch& inputs,
                                 bool return_outputs, const torch::Tensor& num_items_in_batch) {
  const data::Batch* batch = &inputs;
  data::Batch with_count;
  const double smoothing = args_.label_smoothing_factor();
  if ((num_items_in_batch.defined() && !inputs.num_items_in_batch.defined()) ||
      (smoothing > 0 && inputs.contains("labels"))) {
    with_count = inputs;
    if (!inputs.num_items_in_batch.defined()) with_count.num_items_in_batch = num_items_in_batch;
    // Transformers' LabelSmoother: a model computing its own loss smooths it by this epsilon.
    with_count.label_smoothing = smoothing;
    batch = &with_count;
  }
  models::ModelOutput out = model.forward(*batch);
  torch::Tensor loss;
  if (out.loss.defined()) {
    loss = out.loss;
  } else if (smoothing > 0) {
    // The smoothed loss of the task in place of the model's own, as the LabelSmoother replaces
    // it.
    loss = models::task_loss(model.task(), out.logits, inputs.at("labels"), num_items_in_batch,
                             smoothing);
  } else {
    loss = model.loss(out.logits, inputs.at("labels"), num_items_in_batch);
  }
  return {loss, return_outputs ? out.logits : torch::Tensor()};
}

torch::Tensor Trainer::count_label_tokens(const std::vector<data::Batch>& batches) {
  torch::Tensor count = torch::zeros({}, torch::TensorOptions(torch::kLong).device(device()));
  // Causal LMs predict each label from the tokens before it: the first label of a row is never
  // predicted, so it is not counted (the loss's shift drops it).
  const bool shifted = model_->task().kind == data::TaskKind::kCausalLM;
  for (const auto& batch : batches) {
    if (!batch.contains("labels")) continue;
    torch::Tensor labels = batch.at("labels");
    if (shifted && labels.dim() >= 2) labels = labels.slice(1, 1);
    count = count + labels.ne(-100).sum().to(count.device());
  }
  // average_tokens_across_devices: every process's tokens (false: this process's own).
  if (accelerator_->num_processes() > 1 && args_.average_tokens_across_devices()) {
    count = accelerator_->reduce(count, Reduction::kSum);
  }
  return count;
}

torch::Tensor Trainer::count_input_tokens(const data::Batch& batch) const {
  // The main input: a language model's input_ids, else the features x.
  const torch::Tensor& input = batch.contains("input_ids") ? batch.at("input_ids") : batch.at("x");
  const auto options = torch::TensorOptions(torch::kLong).device(device());
  if (args_.include_num_input_tokens_seen() == "non_padding" && batch.contains("attention_mask")) {
    return batch.at("attention_mask").sum().to(options);
  }
  // all; or non_padding without an attention mask (a padding-free row has no padding).
  return torch::scalar_tensor(input.numel(), options);
}

std::vector<double> Trainer::max_over_processes(std::vector<double> values) {
  Accelerator& accelerator = *accelerator_;
  if (accelerator.num_processes() == 1) return values;
  torch::Tensor flags = torch::tensor(values, torch::kDouble).to(accelerator.device());
  torch::Tensor most = accelerator.reduce(flags, Reduction::kMax).to(torch::kCPU).contiguous();
  const double* p = most.data_ptr<double>();
  return std::vector<double>(p, p + most.numel());
}

Trainer::StepChecks Trainer::check_step(const torch::Tensor& loss, const torch::Tensor& grad_norm) {
  const bool fp16 = args_.fp16();
  double bad_loss = std::isfinite(loss.item<double>()) ? 0 : 1;
  double bad_norm = fp16 || std::isfinite(grad_norm.item<double>()) ? 0 : 1;
  double signal = runtime::interrupt_signal();
  std::vector<double> most = max_over_processes({bad_loss, bad_norm, signal});
  bad_loss = most[0];
  bad_norm = most[1];
  signal = most[2];
  StepChecks checks;
  checks.nonfinite = bad_loss > 0 || bad_norm > 0;
  checks.what = bad_loss > 0 ? "the loss" : "the gradient norm";
  checks.signal = static_cast<int>(signal);
  return checks;
}

torch::Tensor Trainer::forward_backward(int64_t window,
                                        const std::function<data::Batch(int64_t)>& batch_at) {
  Accelerator& accelerator = *accelerator_;
  // A token-level loss weighs every label token of the window once (Transformers'
  // num_items_in_batch): the window's batches are read first to count them.
  std::vector<data::Batch> batches;
  torch::Tensor num_items;
  if (model_->task().kind == data::TaskKind::kCausalLM || model_->task().loss_kwargs) {
    for (int64_t k = 0; k < window; ++k) batches.push_back(batch_at(k));
    // Batches without labels (DPO's pairs) have a loss of their own, a mean per micro-batch.
    if (batches.front().contains("labels")) num_items = count_label_tokens(batches);
  }
  torch::Tensor step_loss;
  torch::Tensor tokens;  // include_num_input_tokens_seen
  for (int64_t k = 0; k < window; ++k) {
    data::Batch batch = batches.empty() ? batch_at(k) : std::move(batches[k]);
    if (args_.include_num_input_tokens_seen() != "no") {
      torch::Tensor count = count_input_tokens(batch);
      tokens = tokens.defined() ? tokens + count : count;
    }
    current_flos_ += floating_point_ops(batch);
    const bool sync = k + 1 == window;
    accelerator.set_sync_gradients(sync);
    torch::Tensor loss;
    if (sync) {
      loss = training_step(*model_wrapped_, batch, num_items);
    } else {
      auto no_sync = accelerator.no_sync(*model_wrapped_);
      loss = training_step(*model_wrapped_, batch, num_items);
    }
    step_loss = step_loss.defined() ? step_loss + loss : loss;
  }
  if (tokens.defined()) {
    // Transformers gathers each micro-batch's count; one sum over the window's is the same.
    if (accelerator.num_processes() > 1) tokens = accelerator.reduce(tokens, Reduction::kSum);
    state_.num_input_tokens_seen += tokens.item<int64_t>();
  }
  return step_loss;
}

double Trainer::floating_point_ops(const data::Batch& inputs) {
  if (!inputs.contains("input_ids") || !models::find_wrapped<models::HfCausalLM>(*model_)) return 0;
  if (non_embedding_parameters_ < 0) {
    // Transformers' num_parameters(exclude_embeddings=True): every parameter but the embeddings'
    // weights (a tied head is the embedding's, so left out too).
    non_embedding_parameters_ = 0;
    for (const auto& item : model_->named_parameters()) {
      const std::string& name = item.key();
      const bool embedding = base::ends_with(name, "embed_tokens.weight") ||
                             base::ends_with(name, "transformer.wte.weight") ||
                             base::ends_with(name, "transformer.wpe.weight");
      if (!embedding) non_embedding_parameters_ += item.value().numel();
    }
  }
  return 6.0 * static_cast<double>(inputs.at("input_ids").numel()) *
         static_cast<double>(non_embedding_parameters_);
}

void Trainer::store_flos() {
  double flos = current_flos_;
  if (accelerator_->num_processes() > 1) {
    torch::Tensor all = torch::tensor({flos}, torch::kDouble).to(device());
    flos = accelerator_->reduce(all, Reduction::kSum).cpu().item<double>();
  }
  state_.total_flos += flos;
  current_flos_ = 0;
}

torch::Tensor Trainer::clip_gradients() {
  // The gradient norm (of the synchronised gradients: the same on every process); clipped only
  // with max_grad_norm > 0.
  return accelerator_->clip_grad_norm_(
      model_->parameters(),
      args_.max_grad_norm() > 0 ? args_.max_grad_norm() : std::numeric_limits<double>::infinity());
}

torch::Tensor Trainer::training_step(models::Model& model, const data::Batch& inputs,
                                     const torch::Tensor& num_items_in_batch) {
  torch::Tensor loss = compute_loss(model, inputs, false, num_items_in_batch).loss;
  if (!loss.defined() || loss.numel() != 1) {
    throw std::runtime_error("compute_loss must return a scalar loss");
  }
  if (detect_overflow_ && !std::isfinite(loss.item<double>())) {
    throw std::runtime_error(fmt::format("debug underflow_overflow: the loss at step {} is {}",
                                         state_.global_step + 1,
                                         base::python_float(loss.item<double>())));
  }
  if (num_items_in_batch.defined()) {
    // A sum over this micro-batch's tokens divided by the window's tokens on every process: the
    // window's micro-batches add up to this process's share of the global token mean, which DDP's
    // averaging over processes would divide again (Transformers' average_tokens_across_devices).
    // The logged loss is the mean over processes, so it is the global token mean.
    // With average_tokens_across_devices false each process divides by its own tokens, and DDP
    // averages those means.
    const int64_t processes = accelerator_->num_processes();
    if (processes > 1 && args_.average_tokens_across_devices()) {
      loss = loss * static_cast<double>(processes);
    }
  } else {
    // Divided by the window's micro-batch count, so that k accumulated batches of b make the
    // update of one batch of k*b (Transformers divides by the count of the window, shorter at the
    // end of an epoch, too).
    loss = loss / static_cast<double>(current_gradient_accumulation_steps_);
  }
  // Transformers' torch_empty_cache_steps: the caching allocator's free blocks handed back.
  if (args_.torch_empty_cache_steps() && device().is_cuda() &&
      state_.global_step % *args_.torch_empty_cache_steps() == 0) {
    cuda::empty_cache();
  }
  accelerator_->backward(loss);
  return loss.detach();
}

PredictionOutput Trainer::prediction_step(models::Model& model, const data::Batch& inputs,
                                          bool prediction_loss_only) {
  torch::NoGradGuard no_grad;
  PredictionOutput out;
  if (inputs.contains("labels")) {
    // Only the loss is read: a language model may compute it without the whole logits.
    data::Batch loss_only;
    if (prediction_loss_only) {
      loss_only = inputs;
      loss_only.loss_only = true;
    }
    LossOutput result = compute_loss(model, prediction_loss_only ? loss_only : inputs, true);
    out.loss = result.loss.detach();
    out.logits = result.outputs;
    out.labels = inputs.at("labels");
  } else {
    out.logits = model.forward(inputs).logits;
  }
  if (prediction_loss_only) return {out.loss, {}, {}};
  return out;
}

std::string Trainer::banner(int64_t num_examples, int64_t num_epochs) const {
  int64_t total_batch = process_batch_size(train_batch_size_, "per_device_train_batch_size") *
                        accelerator_->num_processes() * args_.gradient_accumulation_steps();
  return fmt::format(
      "***** Running training *****\n"
      "  Num examples = {}\n"
      "  Num Epochs = {}\n"
      "  Instantaneous batch size per device = {}\n"
      "  Total train batch size (w. parallel, distributed & accumulation) = {}\n"
      "  Gradient Accumulation steps = {}\n"
      "  Total optimization steps = {}\n"
      "  Number of trainable parameters = {}\n",
      base::thousands(num_examples), base::thousands(num_epochs),
      base::thousands(train_batch_size_), base::thousands(total_batch),
      base::thousands(args_.gradient_accumulation_steps()), base::thousands(state_.max_steps),
      base::thousands(models::num_trainable_parameters(*model_)));
}

void Trainer::log(json logs) {
  logs["epoch"] = state_.epoch;
  if (args_.include_num_input_tokens_seen() != "no") {
    logs["num_input_tokens_seen"] = state_.num_input_tokens_seen;
  }
  logs["step"] = state_.global_step;
  state_.log_history.push_back(logs);
  fire([&](TrainerCallback& c) { c.on_log(args_, state_, control_, logs); });
  control_.should_log = false;
}

}  // namespace trainer
