// The Trainer's loop, evaluation and outputs, following Transformers' Trainer step by step.
#include "trainer/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/text.h"
#include "lib/base/warn.h"
#include "lib/io/safetensors.h"
#include "lib/models/torchscript.h"
#include "lib/optim/adamw.h"
#include "lib/optim/schedules.h"
#include "lib/runtime/allocator.h"
#include "lib/runtime/cuda.h"
#include "lib/runtime/signals.h"
#include "trainer/callbacks.h"
#include "trainer/checkpoint_manifest.h"
#include "trainer/integrations.h"

namespace trainer {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double round_to(double value, int digits) {
  double scale = std::pow(10.0, digits);
  return std::round(value * scale) / scale;
}

// logging_steps / eval_steps below 1 are fractions of the total steps, as in Transformers.
int64_t resolve_steps(double steps, int64_t max_steps) {
  if (steps < 1) return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(steps * max_steps)));
  return static_cast<int64_t>(steps);
}

// Transformers' weight-decay grouping: no decay on biases (and norm layers' weights, which
// LibTorch names *.weight under a norm module; BasicNet has none).
std::vector<torch::optim::OptimizerParamGroup> parameter_groups(const torch::nn::Module& model,
                                                                const TrainingArguments& args) {
  std::vector<torch::Tensor> decay, no_decay;
  // Transformers leaves out the parameters of layer norms (found by their type), besides biases
  // and names that say norm.
  std::set<const void*> layer_norm;
  for (const auto& module : model.modules(/*include_self=*/true)) {
    if (!module->as<torch::nn::LayerNorm>() && !module->as<torch::nn::GroupNorm>()) continue;
    for (const auto& p : module->parameters(/*recurse=*/false))
      layer_norm.insert(p.unsafeGetTensorImpl());
  }
  for (const auto& item : model.named_parameters()) {
    if (!item.value().requires_grad()) continue;
    const std::string& name = item.key();
    bool is_bias = base::ends_with(name, "bias");
    // GPT-2's names for its layer norms: ln_1, ln_2, ln_f.
    bool is_ln = name.rfind("ln_", 0) == 0 || name.find(".ln_") != std::string::npos;
    bool is_norm = name.find("norm") != std::string::npos || is_ln ||
                   layer_norm.count(item.value().unsafeGetTensorImpl()) > 0;
    (is_bias || is_norm ? no_decay : decay).push_back(item.value());
  }
  auto options = [&](double weight_decay) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(args.learning_rate())
            .betas({args.adam_beta1(), args.adam_beta2()})
            .eps(args.adam_epsilon())
            .weight_decay(weight_decay));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  if (!decay.empty()) groups.emplace_back(decay, options(args.weight_decay()));
  if (!no_decay.empty()) groups.emplace_back(no_decay, options(0.0));
  return groups;
}

}  // namespace

Metrics compute_accuracy(const EvalPrediction& prediction) {
  torch::Tensor predicted = prediction.predictions.argmax(1);
  double correct = predicted.eq(prediction.label_ids).sum().item<double>();
  return {{"accuracy",
           correct / static_cast<double>(std::max<int64_t>(1, prediction.label_ids.numel()))}};
}

Metrics compute_regression_metrics(const EvalPrediction& prediction) {
  torch::Tensor labels = prediction.label_ids.to(torch::kDouble);
  torch::Tensor error = prediction.predictions.to(torch::kDouble).reshape(labels.sizes()) - labels;
  return {{"rmse", error.square().mean().sqrt().item<double>()},
          {"mae", error.abs().mean().item<double>()}};
}

ComputeMetrics metrics_for_task(data::TaskKind task) {
  switch (task) {
    case data::TaskKind::kClassification:
      return compute_accuracy;
    case data::TaskKind::kRegression:
      return compute_regression_metrics;
    case data::TaskKind::kCausalLM:
      return nullptr;
  }
  return nullptr;
}

AcceleratorOptions accelerator_options(const TrainingArguments& args) {
  DistributedDataParallelKwargs ddp;
  if (args.ddp_bucket_cap_mb()) ddp.bucket_cap_mb = static_cast<double>(*args.ddp_bucket_cap_mb());
  ddp.find_unused_parameters = args.ddp_find_unused_parameters();
  ddp.broadcast_buffers = args.ddp_broadcast_buffers();
  return AcceleratorOptions()
      .mixed_precision(args.mixed_precision())
      .cpu(args.use_cpu())
      .backend(args.ddp_backend().value_or(""))
      .timeout(std::chrono::seconds(args.ddp_timeout()))
      .ddp_kwargs(ddp)
      .data_on_device(args.data_on_device());
}

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
  args_.validate();
  torch::manual_seed(static_cast<uint64_t>(args_.seed()));
  accelerator_ = std::make_shared<Accelerator>(accelerator_options(args_));
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
  callbacks_.push_back(std::make_shared<DefaultFlowCallback>());
  // report_to's integrations, after the flow callback as in Transformers.
  for (auto& callback : make_report_callbacks(args_)) callbacks_.push_back(std::move(callback));
  if (state_.is_world_process_zero) callbacks_.push_back(make_console_callback(args_));
  if (args_.early_stopping_patience()) {
    callbacks_.push_back(std::make_shared<EarlyStoppingCallback>(*args_.early_stopping_patience(),
                                                                 args_.early_stopping_threshold()));
  }
  for (auto& callback : callbacks) callbacks_.push_back(std::move(callback));
  model_->to(accelerator_->device());
}

void Trainer::add_callback(std::shared_ptr<TrainerCallback> callback) {
  callbacks_.push_back(std::move(callback));
}

template <typename Event>
void Trainer::fire(Event event) {
  for (auto& callback : callbacks_) event(*callback);
}

LossOutput Trainer::compute_loss(models::Model& model, const data::Batch& inputs,
                                 bool return_outputs, const torch::Tensor& num_items_in_batch) {
  const data::Batch* batch = &inputs;
  data::Batch with_count;
  if (num_items_in_batch.defined() && !inputs.num_items_in_batch.defined()) {
    with_count = inputs;
    with_count.num_items_in_batch = num_items_in_batch;
    batch = &with_count;
  }
  models::ModelOutput out = model.forward(*batch);
  torch::Tensor loss = out.loss.defined()
                           ? out.loss
                           : model.loss(out.logits, inputs.at("labels"), num_items_in_batch);
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
  if (accelerator_->num_processes() > 1) count = accelerator_->reduce(count, Reduction::kSum);
  return count;
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
  if (model_->task().kind == data::TaskKind::kCausalLM) {
    for (int64_t k = 0; k < window; ++k) batches.push_back(batch_at(k));
    num_items = count_label_tokens(batches);
  }
  torch::Tensor step_loss;
  for (int64_t k = 0; k < window; ++k) {
    data::Batch batch = batches.empty() ? batch_at(k) : std::move(batches[k]);
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
  return step_loss;
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
  if (num_items_in_batch.defined()) {
    // A sum over this micro-batch's tokens divided by the window's tokens on every process: the
    // window's micro-batches add up to this process's share of the global token mean, which DDP's
    // averaging over processes would divide again (Transformers' average_tokens_across_devices).
    // The logged loss is the mean over processes, so it is the global token mean.
    const int64_t processes = accelerator_->num_processes();
    if (processes > 1) loss = loss * static_cast<double>(processes);
  } else {
    // Divided by the window's micro-batch count, so that k accumulated batches of b make the
    // update of one batch of k*b (Transformers divides by the count of the window, shorter at the
    // end of an epoch, too).
    loss = loss / static_cast<double>(current_gradient_accumulation_steps_);
  }
  accelerator_->backward(loss);
  return loss.detach();
}

PredictionOutput Trainer::prediction_step(models::Model& model, const data::Batch& inputs,
                                          bool prediction_loss_only) {
  torch::NoGradGuard no_grad;
  PredictionOutput out;
  if (inputs.contains("labels")) {
    LossOutput result = compute_loss(model, inputs, true);
    out.loss = result.loss.detach();
    out.logits = result.outputs;
    out.labels = inputs.at("labels");
  } else {
    out.logits = model.forward(inputs).logits;
  }
  if (prediction_loss_only) return {out.loss, {}, {}};
  return out;
}

std::shared_ptr<torch::optim::Optimizer> Trainer::create_optimizer() {
  optimizer_ = std::make_shared<optim::AdamW>(parameter_groups(*model_, args_));
  return optimizer_;
}

std::shared_ptr<optim::LambdaLR> Trainer::create_scheduler(int64_t num_training_steps,
                                                           torch::optim::Optimizer& optimizer) {
  const int64_t warmup = args_.get_warmup_steps(num_training_steps);
  lr_scheduler_ = std::make_shared<optim::LambdaLR>(
      optimizer, [type = args_.lr_scheduler_type(), warmup, num_training_steps](int64_t step) {
        return optim::lr_lambda(type, step, warmup, num_training_steps);
      });
  return lr_scheduler_;
}

std::string Trainer::banner(int64_t num_examples, int64_t num_epochs) const {
  int64_t total_batch = args_.per_device_train_batch_size() * accelerator_->num_processes() *
                        args_.gradient_accumulation_steps();
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
      base::thousands(args_.per_device_train_batch_size()), base::thousands(total_batch),
      base::thousands(args_.gradient_accumulation_steps()), base::thousands(state_.max_steps),
      base::thousands(models::num_trainable_parameters(*model_)));
}

void Trainer::log(json logs) {
  logs["epoch"] = state_.epoch;
  logs["step"] = state_.global_step;
  state_.log_history.push_back(logs);
  fire([&](TrainerCallback& c) { c.on_log(args_, state_, control_, logs); });
  control_.should_log = false;
}

TrainOutput Trainer::train(const std::optional<std::string>& resume_from_checkpoint) {
  if (!train_dataset_ || train_dataset_->size() == 0) {
    throw InputError("Trainer: the training dataset is empty");
  }
  Accelerator& accelerator = *accelerator_;
  const int64_t batch_size = args_.per_device_train_batch_size();
  // Every process draws the same permutation (same seed) and runs its share of its batches.
  auto loader = accelerator.prepare(data::DataLoader(
      train_dataset_,
      std::make_shared<data::RandomSampler>(train_dataset_->size(), args_.sampler_seed()),
      {batch_size, args_.dataloader_drop_last()}, data_collator_));
  const int64_t num_batches = loader->size();
  if (num_batches == 0) {
    throw InputError(
        fmt::format("Trainer: {} training examples make no batch of {}{} with dataloader_drop_last",
                    train_dataset_->size(), batch_size,
                    accelerator.num_processes() > 1
                        ? fmt::format(" for each of {} processes", accelerator.num_processes())
                        : ""));
  }
  const int64_t accumulation = args_.gradient_accumulation_steps();
  const int64_t steps_per_epoch =
      std::max<int64_t>(1, (num_batches + accumulation - 1) / accumulation);
  int64_t total_batch_size = 0;
  if (__builtin_mul_overflow(batch_size, accelerator.num_processes() * accumulation,
                             &total_batch_size)) {
    throw InputError(fmt::format(
        "argument per_device_train_batch_size: {} x {} processes x gradient_accumulation_steps {} "
        "overflows the total batch size",
        batch_size, accelerator.num_processes(), accumulation));
  }
  int64_t max_steps, num_epochs;
  double num_train_samples;
  if (args_.max_steps() > 0) {
    max_steps = args_.max_steps();
    num_epochs = (max_steps + steps_per_epoch - 1) / steps_per_epoch;
    num_train_samples = static_cast<double>(max_steps) * static_cast<double>(total_batch_size);
  } else {
    double steps = std::ceil(args_.num_train_epochs() * static_cast<double>(steps_per_epoch));
    if (steps > 9007199254740992.0) {
      throw InputError(fmt::format(
          "argument num_train_epochs: {} epochs of {} steps make {:.3g} optimization steps (at "
          "most 2^53 are allowed)",
          base::python_float(args_.num_train_epochs()), steps_per_epoch, steps));
    }
    max_steps = static_cast<int64_t>(steps);
    num_epochs = static_cast<int64_t>(std::ceil(args_.num_train_epochs()));
    num_train_samples = static_cast<double>(loader->num_examples()) * args_.num_train_epochs();
  }

  state_ = TrainerState{};
  control_ = TrainerControl{};
  all_results_ = json::object();  // a new run's results replace an earlier run's
  state_.is_world_process_zero = accelerator.is_main_process();
  state_.is_local_process_zero = accelerator.is_local_main_process();
  state_.max_steps = max_steps;
  state_.num_train_epochs = num_epochs;
  state_.logging_steps = resolve_steps(args_.logging_steps(), max_steps);
  state_.eval_steps = resolve_steps(args_.effective_eval_steps(), max_steps);
  state_.save_steps = resolve_steps(args_.save_steps(), max_steps);
  state_.train_batch_size = batch_size;
  last_step_loss_ = torch::Tensor();
  state_.read_last_step_loss = [this] {
    return last_step_loss_.defined() ? last_step_loss_.item<double>() : 0.0;
  };
  total_batch_size_ = total_batch_size;
  position_ = Position{};
  // The losses stay on the device (summed in float64) until a log reads them: no host sync per
  // step, which on a GPU costs more than a small model's step.
  tr_loss_ = torch::zeros({}, torch::TensorOptions(torch::kDouble).device(device()));
  total_loss_scalar_ = 0;
  last_logged_step_ = 0;
  nonfinite_in_a_row_ = 0;
  last_saved_step_ = -1;
  cuda_graph_replays_ = 0;
  earlier_checkpoints_.clear();

  const std::optional<Resumable> checkpoint = checkpoint_to_resume(resume_from_checkpoint);
  if (!checkpoint && args_.overwrite_output_dir() && state_.is_world_process_zero) {
    for (const auto& earlier : list_checkpoints(args_.output_dir()))
      earlier_checkpoints_.push_back(earlier.path);
  }

  if (!model_wrapped_) model_wrapped_ = accelerator.prepare(model_);
  // What the (possibly overridden) steps return is what trains, whether or not they set the
  // members themselves.
  optimizer_ = create_optimizer();
  if (!optimizer_) throw std::logic_error("Trainer: create_optimizer returned no optimizer");
  lr_scheduler_ = create_scheduler(max_steps, *optimizer_);
  if (!lr_scheduler_) throw std::logic_error("Trainer: create_scheduler returned no scheduler");
  auto optimizer = accelerator.prepare(optimizer_);
  if (checkpoint) load_checkpoint(*checkpoint, steps_per_epoch);
  // CUDA: steps without a host read, replayed as a CUDA graph with cuda_graphs (null on CPU).
  const std::shared_ptr<DeviceLoop> device_loop = make_device_loop();

  if (state_.is_world_process_zero) {
    std::string text = banner(train_dataset_->size(), num_epochs);
    if (checkpoint) {
      text += fmt::format(
          "  Continuing training from checkpoint {} (global step {}, epoch {}): skipping the "
          "first {} batches of epoch {}\n",
          checkpoint->dir, state_.global_step, position_.epoch,
          args_.ignore_data_skip() ? 0 : position_.steps_in_epoch * accumulation, position_.epoch);
    }
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
  }

  const auto start = Clock::now();
  fire([&](TrainerCallback& c) { c.on_train_begin(args_, state_, control_); });
  torch::Tensor grad_norm;
  model_wrapped_->train();
  model_->zero_grad();
  in_training_loop_ = true;
  struct LoopGuard {
    bool& flag;
    ~LoopGuard() { flag = false; }
  } loop_guard{in_training_loop_};

  // Transformers' _maybe_log_save_evaluate: log, evaluate (tracking the best metric), save.
  auto maybe_log_save_evaluate = [&]() {
    if (control_.should_log && state_.global_step > last_logged_step_) {
      // Every process takes part: the logged loss is the mean over processes.
      double tr_loss_scalar = accelerator.reduce(tr_loss_, Reduction::kMean).item<double>();
      tr_loss_.zero_();
      json logs;
      logs["loss"] =
          round_to(tr_loss_scalar / static_cast<double>(state_.global_step - last_logged_step_), 4);
      if (grad_norm.defined() && args_.max_grad_norm() > 0) {
        logs["grad_norm"] = grad_norm.item<double>();
      }
      logs["learning_rate"] = lr_scheduler_->get_last_lr().at(0);
      total_loss_scalar_ += tr_loss_scalar;
      last_logged_step_ = state_.global_step;
      log(std::move(logs));
    }
    control_.should_log = false;
    if (control_.should_evaluate) {
      Metrics metrics = evaluate();
      model_wrapped_->train();
      bool new_best = update_best_metric(metrics);
      if (args_.save_strategy() == "best") control_.should_save = new_best;
    }
    if (control_.should_save) {
      save_checkpoint();
      fire([&](TrainerCallback& c) { c.on_save(args_, state_, control_); });
    }
    control_.should_save = false;
  };

  // A checkpoint saved inside an epoch continues it (its on_epoch_begin has run); one saved at an
  // epoch's end starts the next.
  const Position resumed = position_;
  const int64_t skipped_steps = args_.ignore_data_skip() ? 0 : resumed.steps_in_epoch;
  for (int64_t epoch = resumed.epoch; epoch < num_epochs; ++epoch) {
    const bool continued = epoch == resumed.epoch && resumed.inside_epoch;
    if (control_.should_training_stop && !continued) break;
    loader->set_epoch(epoch);
    position_ = {epoch, 0, true};
    if (!continued) fire([&](TrainerCallback& c) { c.on_epoch_begin(args_, state_, control_); });
    // A resumed epoch starts at the saved position: the batches before it are not read.
    const int64_t first_batch = continued ? std::min(num_batches, skipped_steps * accumulation) : 0;
    if (continued) position_.steps_in_epoch = skipped_steps;
    for (int64_t first = first_batch; first < num_batches; first += accumulation) {
      if (control_.should_training_stop || control_.should_epoch_stop) break;
      // One optimization step: `window` micro-batches, gradients synchronised on the last.
      const int64_t window = std::min(accumulation, num_batches - first);
      current_gradient_accumulation_steps_ = window;
      fire([&](TrainerCallback& c) { c.on_step_begin(args_, state_, control_); });
      torch::Tensor step_loss;
      StepChecks checks;
      if (device_loop) {
        // On CUDA the step, its non-finite skip and the loss sum stay on the device; the host
        // looks every few steps (device_step.cpp).
        const bool last = first + window >= num_batches || state_.global_step + 1 == max_steps;
        step_loss = device_step(*device_loop, *loader, *optimizer, first, window, grad_norm);
        checks = device_checks(*device_loop, last);
      } else {
        step_loss = forward_backward(window, [&](int64_t k) { return loader->batch(first + k); });
        grad_norm = clip_gradients();
        // One decision for every process: whether a loss or the norm is not finite, and whether
        // a process was asked to stop (the launcher forwards SIGTERM to each, at slightly
        // different moments).
        checks = check_step(step_loss, grad_norm);
        if (checks.nonfinite) {
          ++nonfinite_in_a_row_;
          optimizer->zero_grad();
          // As Transformers' logging_nan_inf_filter: the log averages the finite losses.
          tr_loss_.add_(tr_loss_ / static_cast<double>(1 + state_.global_step - last_logged_step_));
          if (state_.is_world_process_zero) {
            base::warn("step {}: {} is not finite; its update was skipped ({} in a row)",
                       state_.global_step + 1, checks.what, nonfinite_in_a_row_);
          }
        } else {
          nonfinite_in_a_row_ = 0;
          tr_loss_.add_(step_loss);
          optimizer->step();
          optimizer->zero_grad();
        }
      }
      // A skipped update still counts as a step for the schedule, as a scheduler sees it.
      if (checks.nonfinite || !optimizer->step_was_skipped()) lr_scheduler_->step();
      ++state_.global_step;
      position_.steps_in_epoch += 1;
      state_.epoch = static_cast<double>(epoch) +
                     static_cast<double>(first + window) / static_cast<double>(num_batches);
      last_step_loss_ = step_loss;
      if (args_.max_nonfinite_steps() > 0 && nonfinite_in_a_row_ >= args_.max_nonfinite_steps()) {
        std::vector<CheckpointDir> saved;
        if (state_.is_world_process_zero) saved = list_checkpoints(args_.output_dir());
        throw std::runtime_error(fmt::format(
            "training stopped at step {}: the loss or gradient norm was not finite for {} steps "
            "in a row (max_nonfinite_steps); {}",
            state_.global_step, nonfinite_in_a_row_,
            saved.empty() ? std::string("no checkpoint was saved")
                          : fmt::format("the last checkpoint is {}", saved.back().path)));
      }
      fire([&](TrainerCallback& c) { c.on_step_end(args_, state_, control_); });
      maybe_log_save_evaluate();
      if (checks.signal) {
        // A preemption: save here, at the step boundary, and stop.
        std::string saved = last_saved_step_ == state_.global_step
                                ? checkpoint_path(args_.output_dir(), state_.global_step)
                                : save_checkpoint();
        throw Interrupted(
            checks.signal,
            fmt::format("interrupted by {} at step {} of {}; saved {} (resume with "
                        "--resume_from_checkpoint true)",
                        runtime::signal_name(checks.signal), state_.global_step, max_steps, saved));
      }
    }
    loader->end_iteration();
    position_ = {epoch + 1, 0, false};
    fire([&](TrainerCallback& c) { c.on_epoch_end(args_, state_, control_); });
    maybe_log_save_evaluate();
    control_.should_epoch_stop = false;
  }

  if (args_.load_best_model_at_end()) load_best_model();

  total_loss_scalar_ += accelerator.reduce(tr_loss_, Reduction::kMean).item<double>();
  double runtime = seconds_since(start);
  TrainOutput output;
  output.global_step = state_.global_step;
  output.training_loss =
      total_loss_scalar_ / static_cast<double>(std::max<int64_t>(1, state_.global_step));
  json logs;
  logs["train_runtime"] = round_to(runtime, 4);
  logs["train_samples_per_second"] = round_to(num_train_samples / runtime, 3);
  logs["train_steps_per_second"] = round_to(static_cast<double>(max_steps) / runtime, 3);
  logs["total_flos"] = state_.total_flos;
  logs["train_loss"] = output.training_loss;
  log(logs);
  for (const auto& [key, value] : state_.log_history.back().items()) {
    if (key != "step") output.metrics[key] = value.get<double>();
  }
  fire([&](TrainerCallback& c) { c.on_train_end(args_, state_, control_); });
  return output;
}

PredictionResult Trainer::evaluation_loop(const std::shared_ptr<const data::Dataset>& dataset,
                                          const std::string& prefix, bool keep_predictions) {
  Accelerator& accelerator = *accelerator_;
  auto start = Clock::now();
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
  for (int64_t i = 0; i < loader->size(); ++i) {
    // While training, a signal waits for the step boundary after this evaluation.
    if (int sig = in_training_loop_ ? 0 : runtime::interrupt_signal()) {
      throw Interrupted(sig, fmt::format("interrupted by {} during evaluation (at step {}); "
                                         "nothing was saved",
                                         runtime::signal_name(sig), state_.global_step));
    }
    data::Batch batch = loader->batch(i);
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
    if (model_->task().kind == data::TaskKind::kCausalLM) {
      metrics[prefix + "_perplexity"] = std::exp(metrics[prefix + "_loss"]);
    }
  }
  if (compute_metrics_ && result.predictions.defined() && result.label_ids.defined()) {
    for (const auto& [key, value] : compute_metrics_({result.predictions, result.label_ids})) {
      metrics[key.rfind(prefix + "_", 0) == 0 ? key : prefix + "_" + key] = value;
    }
  }
  double runtime = seconds_since(start);
  const int64_t total_batch = args_.per_device_eval_batch_size() * accelerator.num_processes();
  const int64_t num_steps = (num_samples + total_batch - 1) / total_batch;
  metrics[prefix + "_runtime"] = round_to(runtime, 4);
  metrics[prefix + "_samples_per_second"] = round_to(static_cast<double>(num_samples) / runtime, 3);
  metrics[prefix + "_steps_per_second"] = round_to(static_cast<double>(num_steps) / runtime, 3);
  return result;
}

Metrics Trainer::evaluate(const std::string& prefix) {
  if (!eval_dataset_) throw InputError("Trainer: evaluation needs an eval dataset");
  Metrics metrics = evaluation_loop(eval_dataset_, prefix, false).metrics;
  json logs;
  for (const auto& [key, value] : metrics) logs[key] = value;
  if (state_.global_step > 0) {
    metrics["epoch"] = state_.epoch;
    log(logs);
  }
  fire([&](TrainerCallback& c) { c.on_evaluate(args_, state_, control_, metrics); });
  control_.should_evaluate = false;
  last_eval_metrics_ = metrics;
  last_eval_step_ = state_.global_step;
  return metrics;
}

PredictionResult Trainer::predict(const std::shared_ptr<const data::Dataset>& dataset,
                                  const std::string& prefix) {
  if (!dataset) throw InputError("Trainer: predict needs a dataset");
  return evaluation_loop(dataset, prefix, true);
}

void Trainer::save_model(const std::string& dir) const {
  if (!accelerator_->is_main_process()) return;
  std::string target = dir.empty() ? args_.output_dir() : dir;
  io::save_safetensors(base::join_path(target, "model.safetensors"), io::state_dict(*model_));
  // A model from Python goes back as it came, with the trained weights: model.pt.
  if (auto* script = dynamic_cast<const models::TorchScriptModel*>(model_.get())) {
    script->save(base::join_path(target, "model.pt"));
  }
}

void Trainer::remove_earlier_checkpoints() {
  for (const std::string& earlier : earlier_checkpoints_) base::remove_tree(earlier);
  earlier_checkpoints_.clear();
}

void Trainer::save_state() const {
  if (!accelerator_->is_main_process()) return;
  state_.save_to_json(base::join_path(args_.output_dir(), "trainer_state.json"));
}

void Trainer::log_metrics(const std::string& split, const Metrics& metrics) const {
  if (!accelerator_->is_main_process()) return;
  std::fputs(format_metrics(split, metrics).c_str(), stdout);
  std::fflush(stdout);
}

void Trainer::save_metrics(const std::string& split, const Metrics& metrics) const {
  if (!accelerator_->is_main_process()) return;
  json values;
  for (const auto& [key, value] : metrics) values[key] = value;
  base::write_json(base::join_path(args_.output_dir(), split + "_results.json"), values);
  std::string all_path = base::join_path(args_.output_dir(), "all_results.json");
  if (!all_results_) {
    all_results_ = json::object();
    if (std::filesystem::exists(all_path)) {
      all_results_ = base::read_json_object(all_path);  // a damaged file is not replaced
    }
  }
  for (const auto& [key, value] : metrics) (*all_results_)[key] = value;
  base::write_json(all_path, *all_results_);
}

}  // namespace trainer
