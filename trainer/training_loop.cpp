// Trainer::train: Transformers' _inner_training_loop in named steps. The plan, a fresh state and
// the optimizer (training_plan.cpp), the checkpoint to resume, the banner, then epochs of
// optimization steps, each followed by _maybe_log_save_evaluate, and the speed (and
// memory) metrics; with auto_find_batch_size, the loop again at half the batch size after each
// out-of-memory error (Accelerate's find_executable_batch_size).
#include <cmath>

#include <fmt/format.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/stopwatch.h"
#include "lib/base/text.h"
#include "lib/base/warn.h"
#include "lib/runtime/allocation_check.h"
#include "lib/runtime/cuda.h"
#include "lib/runtime/error_text.h"
#include "lib/runtime/signals.h"
#include "trainer/checkpoint_layout.h"
#include "trainer/trainer.h"

namespace trainer {

using json = nlohmann::ordered_json;

TrainOutput Trainer::train(const std::optional<std::string>& resume_from_checkpoint) {
  // Memory metrics: every attempt of auto_find_batch_size counts, up to the final log.
  const MemoryStage memory_stage(memory_tracker_, "train");
  check_auto_find_batch_size(args_, accelerator_->num_processes());
  train_batch_size_ = args_.per_device_train_batch_size();
  const std::optional<Resumable> checkpoint = checkpoint_to_resume(resume_from_checkpoint);
  if (checkpoint && args_.auto_find_batch_size()) {
    // As Transformers: the batch size the checkpoint's run had found (its total batch is checked
    // against this run's when it loads).
    const nlohmann::ordered_json saved =
        base::read_json_object(base::join_path(checkpoint->dir, checkpoint::kStateFile));
    if (saved.contains("train_batch_size") && saved["train_batch_size"].is_number_integer() &&
        saved["train_batch_size"].get<int64_t>() > 0) {
      train_batch_size_ = saved["train_batch_size"].get<int64_t>();
    }
  }
  if (!checkpoint && args_.overwrite_output_dir() && accelerator_->restart_count() == 0 &&
      state_.is_world_process_zero) {
    set_aside_earlier_checkpoints();
  }
  if (!model_wrapped_) model_wrapped_ = accelerator_->prepare(model_);
  if (args_.auto_find_batch_size()) return find_executable_batch_size(checkpoint);
  return inner_training_loop(checkpoint, /*keep_optimizer=*/false);
}

TrainOutput Trainer::find_executable_batch_size(const std::optional<Resumable>& checkpoint) {
  // On the CPU the kernel would kill the process rather than fail an allocation: a request that
  // does not fit is refused with LibTorch's out-of-memory error instead.
  const runtime::AllocationCheck allocation_check;
  // Only an optimizer an earlier attempt of this call made is kept, not one of an earlier train().
  lr_scheduler_.reset();
  optimizer_.reset();
  for (bool again = false;; again = true) {
    try {
      return inner_training_loop(checkpoint, /*keep_optimizer=*/again);
    } catch (const std::exception& e) {
      if (!runtime::is_out_of_memory(e)) throw;
      const int64_t smaller = train_batch_size_ / 2;
      // What the attempt left goes before the next one starts (its activations went with the
      // exception); the optimizer's state stays, as in Transformers.
      model_->zero_grad();
      if (device().is_cuda()) cuda::empty_cache();
      if (smaller == 0) {
        throw std::runtime_error(fmt::format(
            "No executable batch size found, reached zero. (auto_find_batch_size: a batch of 1 "
            "ran out of memory too: {})",
            runtime::error_line(e)));
      }
      if (accelerator_->is_main_process()) {
        base::warn(
            "auto_find_batch_size: a training batch of {} ran out of memory ({}); starting the "
            "training loop again with per_device_train_batch_size {}",
            train_batch_size_, runtime::error_line(e), smaller);
      }
      train_batch_size_ = smaller;
    }
  }
}

TrainOutput Trainer::inner_training_loop(const std::optional<Resumable>& checkpoint,
                                         bool keep_optimizer) {
  const TrainingPlan plan = set_initial_training_values();
  reset_training_state(plan);
  auto optimizer = create_optimizer_and_scheduler(plan.max_steps, keep_optimizer);
  if (checkpoint) load_checkpoint(*checkpoint, plan.steps_per_epoch);
  // CUDA: steps without a host read, replayed as a CUDA graph with cuda_graphs (null on CPU).
  const std::shared_ptr<DeviceLoop> device_loop = make_device_loop();
  print_banner(plan, checkpoint);

  const base::Stopwatch stopwatch;
  train_start_ = std::chrono::steady_clock::now();
  initial_tokens_seen_ = state_.num_input_tokens_seen;
  fire([&](TrainerCallback& c) { c.on_train_begin(args_, state_, control_); });
  model_wrapped_->train();
  model_->zero_grad();
  in_training_loop_ = true;
  struct LoopGuard {
    bool& flag;
    ~LoopGuard() { flag = false; }
  } loop_guard{in_training_loop_};
  // eval_on_start: one evaluation before the first step, a sanity check of the evaluation (logged
  // at the step the run starts from), as Transformers' _inner_training_loop runs it.
  if (args_.eval_on_start()) {
    evaluate_in_training();
    model_wrapped_->train();
  }

  // A checkpoint saved inside an epoch continues it (its on_epoch_begin has run); one saved at an
  // epoch's end starts the next.
  const Position resumed = position_;
  for (int64_t epoch = resumed.epoch; epoch < plan.num_epochs; ++epoch) {
    const bool continued = epoch == resumed.epoch && resumed.inside_epoch;
    if (control_.should_training_stop && !continued) break;
    run_epoch(plan, epoch, continued ? resumed.steps_in_epoch : -1, *optimizer, device_loop.get());
  }
  if (args_.load_best_model_at_end()) load_best_model();
  return finish_training(plan, stopwatch);
}

void Trainer::run_epoch(const TrainingPlan& plan, int64_t epoch, int64_t resumed_steps,
                        AcceleratedOptimizer& optimizer, DeviceLoop* device_loop) {
  DataLoaderShard& loader = *plan.loader;
  const bool continued = resumed_steps >= 0;
  loader.set_epoch(epoch);
  position_ = {epoch, 0, true};
  if (!continued) fire([&](TrainerCallback& c) { c.on_epoch_begin(args_, state_, control_); });
  // A resumed epoch starts at the saved position: the batches before it are not read.
  const int64_t skipped = continued && !args_.ignore_data_skip() ? resumed_steps : 0;
  const int64_t first_batch = std::min(plan.num_batches, skipped * plan.accumulation);
  position_.steps_in_epoch = skipped;
  for (int64_t first = first_batch; first < plan.num_batches; first += plan.accumulation) {
    if (control_.should_training_stop || control_.should_epoch_stop) break;
    // One optimization step: `window` micro-batches, gradients synchronised on the last.
    const int64_t window = std::min(plan.accumulation, plan.num_batches - first);
    current_gradient_accumulation_steps_ = window;
    fire([&](TrainerCallback& c) { c.on_step_begin(args_, state_, control_); });
    const StepChecks checks = optimization_step(plan, first, window, optimizer, device_loop);
    ++state_.global_step;
    record_step();
    position_.steps_in_epoch += 1;
    state_.epoch = static_cast<double>(epoch) +
                   static_cast<double>(first + window) / static_cast<double>(plan.num_batches);
    stop_on_nonfinite_steps();
    fire([&](TrainerCallback& c) { c.on_step_end(args_, state_, control_); });
    maybe_log_save_evaluate();
    if (checks.signal) stop_at_step_boundary(checks.signal, plan.max_steps);
  }
  loader.end_iteration();
  position_ = {epoch + 1, 0, false};
  fire([&](TrainerCallback& c) { c.on_epoch_end(args_, state_, control_); });
  maybe_log_save_evaluate();
  control_.should_epoch_stop = false;
}

Trainer::StepChecks Trainer::optimization_step(const TrainingPlan& plan, int64_t first,
                                               int64_t window, AcceleratedOptimizer& optimizer,
                                               DeviceLoop* device_loop) {
  DataLoaderShard& loader = *plan.loader;
  torch::Tensor step_loss;
  StepChecks checks;
  if (device_loop) {
    // On CUDA the step, its non-finite skip and the loss sum stay on the device; the host looks
    // every few steps (device_step.cpp).
    const bool last =
        first + window >= plan.num_batches || state_.global_step + 1 == plan.max_steps;
    step_loss = device_step(*device_loop, loader, optimizer, first, window, grad_norm_);
    checks = device_checks(*device_loop, last);
  } else {
    step_loss = forward_backward(window, [&](int64_t k) { return loader.batch(first + k); });
    grad_norm_ = clip_gradients();
    // One decision for every process: whether a loss or the norm is not finite, and whether a
    // process was asked to stop (the launcher forwards SIGTERM to each, at slightly different
    // moments).
    checks = check_step(step_loss, grad_norm_);
    if (checks.nonfinite) {
      ++nonfinite_in_a_row_;
      optimizer.zero_grad();
      // Transformers' logging_nan_inf_filter: the log averages the finite losses (false: a
      // non-finite loss is logged as it is).
      if (args_.logging_nan_inf_filter()) {
        tr_loss_.add_(tr_loss_ / static_cast<double>(1 + state_.global_step - last_logged_step_));
      } else {
        tr_loss_.add_(step_loss);
      }
      if (state_.is_world_process_zero) {
        base::warn("step {}: {} is not finite; its update was skipped ({} in a row)",
                   state_.global_step + 1, checks.what, nonfinite_in_a_row_);
      }
    } else {
      nonfinite_in_a_row_ = 0;
      tr_loss_.add_(step_loss);
      optimizer.step();
      optimizer.zero_grad();
    }
  }
  // The rate this step trained with, which Transformers 5 logs (read before the schedule steps).
  step_lr_ = lr_scheduler_->get_last_lr().at(0);
  // A skipped update still counts as a step for the schedule, as a scheduler sees it. A
  // scheduler stepped by a metric (reduce_lr_on_plateau) waits for the evaluations instead.
  if ((checks.nonfinite || !optimizer.step_was_skipped()) && !lr_scheduler_->steps_with_metric())
    lr_scheduler_->step();
  last_step_loss_ = step_loss;
  return checks;
}

void Trainer::stop_on_nonfinite_steps() {
  if (args_.max_nonfinite_steps() <= 0 || nonfinite_in_a_row_ < args_.max_nonfinite_steps()) return;
  std::vector<CheckpointDir> saved;
  if (state_.is_world_process_zero) saved = list_checkpoints(args_.output_dir());
  throw std::runtime_error(fmt::format(
      "training stopped at step {}: the loss or gradient norm was not finite for {} steps in a "
      "row (max_nonfinite_steps); {}",
      state_.global_step, nonfinite_in_a_row_,
      saved.empty() ? std::string("no checkpoint was saved")
                    : fmt::format("the last checkpoint is {}", saved.back().path)));
}

void Trainer::stop_at_step_boundary(int signal, int64_t max_steps) {
  // A preemption: save here, at the step boundary, and stop.
  std::string saved = last_saved_step_ == state_.global_step
                          ? checkpoint_path(args_.output_dir(), state_.global_step)
                          : save_checkpoint();
  throw Interrupted(
      signal, fmt::format("interrupted by {} at step {} of {}; saved {} (resume with "
                          "--resume_from_checkpoint true)",
                          runtime::signal_name(signal), state_.global_step, max_steps, saved));
}

void Trainer::maybe_log_save_evaluate() {
  if (control_.should_log && state_.global_step > last_logged_step_) {
    // Every process takes part: the logged loss is the mean over processes.
    double tr_loss_scalar = accelerator_->reduce(tr_loss_, Reduction::kMean).item<double>();
    flush_step_curve();
    tr_loss_.zero_();
    json logs;
    // Transformers 5: the mean loss of the steps since the last log, unrounded.
    logs["loss"] = tr_loss_scalar / static_cast<double>(state_.global_step - last_logged_step_);
    if (grad_norm_.defined() && args_.max_grad_norm() > 0) {
      logs["grad_norm"] = grad_norm_.item<double>();
    }
    logs["learning_rate"] = step_lr_;
    total_loss_scalar_ += tr_loss_scalar;
    last_logged_step_ = state_.global_step;
    if (args_.include_num_input_tokens_seen() != "no") {
      // Transformers' log(logs, start_time): this session's tokens per second so far.
      const double runtime =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - train_start_).count();
      logs["train_runtime"] = base::round_to(runtime, 4);
      logs["train_tokens_per_second"] = base::round_to(
          static_cast<double>(state_.num_input_tokens_seen - initial_tokens_seen_) / runtime, 4);
    }
    add_logged_metrics(logs, "");
    log(std::move(logs));
  }
  control_.should_log = false;
  if (control_.should_evaluate) {
    Metrics metrics = evaluate_in_training();
    model_wrapped_->train();
    // As Transformers' _evaluate: reduce_lr_on_plateau steps with metric_for_best_model.
    if (lr_scheduler_->steps_with_metric()) {
      lr_scheduler_->step_with_metric(best_metric_value(metrics));
    }
    bool new_best = update_best_metric(metrics);
    if (args_.save_strategy() == "best") control_.should_save = new_best;
  }
  if (control_.should_save) {
    save_checkpoint();
    fire([&](TrainerCallback& c) { c.on_save(args_, state_, control_); });
  }
  control_.should_save = false;
}

Metrics Trainer::evaluate_in_training() {
  if (!args_.auto_find_batch_size()) return evaluate();
  try {
    return evaluate();
  } catch (const std::exception& e) {
    // Not the training batch's doing: halving it would only repeat this until zero.
    if (!runtime::is_out_of_memory(e)) throw;
    throw std::runtime_error(fmt::format(
        "evaluation at step {} ran out of memory ({}): auto_find_batch_size only adjusts the "
        "training batch size; reduce per_device_eval_batch_size ({}) instead",
        state_.global_step, runtime::error_line(e), args_.per_device_eval_batch_size()));
  }
}

void Trainer::record_step() {
  // A copy: on CUDA the step's loss and norm may live in buffers the next step reuses.
  pending_losses_.push_back(last_step_loss_.detach().reshape({}).clone());
  pending_norms_.push_back(grad_norm_.defined() ? grad_norm_.detach().reshape({}).clone()
                                                : torch::Tensor());
  pending_steps_.push_back(static_cast<double>(state_.global_step));
  pending_lrs_.push_back(step_lr_);
}

void Trainer::flush_step_curve() {
  if (pending_steps_.empty()) return;
  // One small collective for the window's losses: each step's mean over processes.
  const torch::Tensor losses =
      accelerator_->reduce(torch::stack(pending_losses_).to(torch::kDouble), Reduction::kMean)
          .to(torch::kCPU)
          .contiguous();
  const double* loss = losses.data_ptr<double>();
  // The norms are the same on every process (of the synchronised gradients): read, not reduced.
  bool norms_defined = true;
  for (const torch::Tensor& norm : pending_norms_) norms_defined = norms_defined && norm.defined();
  const torch::Tensor norms =
      norms_defined ? torch::stack(pending_norms_).to(torch::kDouble).to(torch::kCPU).contiguous()
                    : torch::Tensor();
  for (size_t i = 0; i < pending_steps_.size(); ++i) {
    step_curve_.append(pending_steps_[i], loss[i], pending_lrs_[i],
                       norms_defined ? norms.data_ptr<double>()[i] : std::nan(""));
  }
  pending_losses_.clear();
  pending_norms_.clear();
  pending_steps_.clear();
  pending_lrs_.clear();
}

TrainOutput Trainer::finish_training(const TrainingPlan& plan, const base::Stopwatch& stopwatch) {
  total_loss_scalar_ += accelerator_->reduce(tr_loss_, Reduction::kMean).item<double>();
  flush_step_curve();
  const double runtime = stopwatch.seconds();
  TrainOutput output;
  output.global_step = state_.global_step;
  output.training_loss =
      total_loss_scalar_ / static_cast<double>(std::max<int64_t>(1, state_.global_step));
  json logs;
  logs["train_runtime"] = base::round_to(runtime, 4);
  logs["train_samples_per_second"] = base::round_to(plan.num_train_samples / runtime, 3);
  logs["train_steps_per_second"] = base::round_to(static_cast<double>(plan.max_steps) / runtime, 3);
  store_flos();
  logs["total_flos"] = state_.total_flos;
  logs["train_loss"] = output.training_loss;
  // skip_memory_metrics false: init's (the first time) and train's memory, before the log as in
  // Transformers' _finalize_training, so that the last log_history entry holds them too.
  for (const auto& [key, bytes] : memory_tracker_.stop("train")) logs[key] = bytes;
  add_logged_metrics(logs, "");
  log(logs);
  for (const auto& [key, value] : state_.log_history.back().items()) {
    if (key != "step") output.metrics[key] = value.get<double>();
  }
  fire([&](TrainerCallback& c) { c.on_train_end(args_, state_, control_); });
  return output;
}

}  // namespace trainer
