// What Trainer::train sets up before its first step: the plan (batches, steps, epochs) as
// Transformers' set_initial_training_values computes it, a fresh state, the batch sizes on each
// process and their loaders, and the optimizer and schedule (create_optimizer_and_scheduler).
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

namespace {

// logging_steps / eval_steps below 1 are fractions of the total steps, as in Transformers.
int64_t resolve_steps(double steps, int64_t max_steps) {
  if (steps < 1) return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(steps * max_steps)));
  return static_cast<int64_t>(steps);
}

}  // namespace

void check_auto_find_batch_size(const TrainingArguments& args, int64_t num_processes) {
  if (!args.auto_find_batch_size()) return;
  runtime::max_allocation_bytes_from_env();  // the tests' limit, read before anything is written
  if (num_processes <= 1) return;
  throw InputError(fmt::format(
      "argument auto_find_batch_size: true needs a run of one process (this one has {}): a "
      "process that ran out of memory would start again at half its batch while the others wait "
      "for it; set per_device_train_batch_size instead",
      num_processes));
}

std::optional<TrainerMemoryTracker::DeviceCounters> Trainer::device_memory_counters() const {
  if (!device().is_cuda()) return std::nullopt;
  const torch::Device gpu = device();
  return TrainerMemoryTracker::DeviceCounters{
      [gpu] { cuda::reset_peak_memory(gpu); }, [] { cuda::empty_cache(); },
      [gpu] {
        const cuda::AllocatedMemory memory = cuda::allocated_memory(gpu);
        return std::make_pair(memory.now, memory.peak);
      }};
}

int64_t Trainer::process_batch_size(int64_t batch, const char* key) const {
  const int processes = accelerator_->num_processes();
  if (!args_.accelerator_config_plan().split_batches || processes == 1) return batch;
  if (batch % processes != 0) {
    throw InputError(fmt::format(
        "argument {}: {} is not allowed with accelerator_config split_batches (the batch is "
        "split over {} processes: a multiple of {})",
        key, batch, processes, processes));
  }
  return batch / processes;
}

data::DataLoaderOptions Trainer::loader_options(int64_t batch_size, bool drop_last) const {
  data::DataLoaderOptions options;
  options.batch_size = batch_size;
  options.drop_last = drop_last;
  options.num_workers = args_.dataloader_num_workers();
  options.prefetch_factor = args_.dataloader_prefetch_factor().value_or(2);
  options.persistent_workers = args_.dataloader_persistent_workers();
  // Page-locked memory only means something for a copy to a CUDA device.
  options.pin_memory = args_.dataloader_pin_memory() && accelerator_->device().is_cuda();
  return options;
}

std::shared_ptr<const data::Sampler> Trainer::make_train_sampler(int64_t batch_size) {
  // Every process draws the same order (same seed) and runs its share of its batches: Transformers'
  // _get_train_sampler by train_sampling_strategy.
  const auto seed = static_cast<uint64_t>(args_.sampler_seed());
  if (args_.train_sampling_strategy() == "sequential") {
    return std::make_shared<data::SequentialSampler>(train_dataset_->size());
  }
  if (args_.train_sampling_strategy() == "group_by_length") {
    // Batches of train_batch_size x gradient_accumulation_steps, as Transformers groups them.
    return std::make_shared<data::LengthGroupedSampler>(
        data::example_lengths(*train_dataset_), batch_size * args_.gradient_accumulation_steps(),
        seed);
  }
  return std::make_shared<data::RandomSampler>(train_dataset_->size(), seed);
}

Trainer::TrainingPlan Trainer::set_initial_training_values() {
  if (!train_dataset_ || train_dataset_->size() == 0) {
    throw InputError("Trainer: the training dataset is empty");
  }
  Accelerator& accelerator = *accelerator_;
  TrainingPlan plan;
  const int64_t batch_size = process_batch_size(train_batch_size_, "per_device_train_batch_size");
  plan.loader = accelerator.prepare(data::DataLoader(
      train_dataset_, make_train_sampler(batch_size),
      loader_options(train_loader_batch_size(batch_size), args_.dataloader_drop_last()),
      data_collator_));
  plan.num_batches = plan.loader->size();
  if (plan.num_batches == 0) {
    throw InputError(
        fmt::format("Trainer: {} training examples make no batch of {}{} with dataloader_drop_last",
                    train_dataset_->size(), batch_size,
                    accelerator.num_processes() > 1
                        ? fmt::format(" for each of {} processes", accelerator.num_processes())
                        : ""));
  }
  plan.accumulation = args_.gradient_accumulation_steps();
  plan.steps_per_epoch =
      std::max<int64_t>(1, (plan.num_batches + plan.accumulation - 1) / plan.accumulation);
  if (__builtin_mul_overflow(batch_size, accelerator.num_processes() * plan.accumulation,
                             &plan.total_batch_size)) {
    throw InputError(fmt::format(
        "argument per_device_train_batch_size: {} x {} processes x gradient_accumulation_steps {} "
        "overflows the total batch size",
        batch_size, accelerator.num_processes(), plan.accumulation));
  }
  if (args_.max_steps() > 0) {
    plan.max_steps = args_.max_steps();
    plan.num_epochs = (plan.max_steps + plan.steps_per_epoch - 1) / plan.steps_per_epoch;
    plan.num_train_samples =
        static_cast<double>(plan.max_steps) * static_cast<double>(plan.total_batch_size);
  } else {
    double steps = std::ceil(args_.num_train_epochs() * static_cast<double>(plan.steps_per_epoch));
    if (steps > 9007199254740992.0) {
      throw InputError(fmt::format(
          "argument num_train_epochs: {} epochs of {} steps make {:.3g} optimization steps (at "
          "most 2^53 are allowed)",
          base::python_float(args_.num_train_epochs()), plan.steps_per_epoch, steps));
    }
    plan.max_steps = static_cast<int64_t>(steps);
    plan.num_epochs = static_cast<int64_t>(std::ceil(args_.num_train_epochs()));
    plan.num_train_samples =
        static_cast<double>(plan.loader->num_examples()) * args_.num_train_epochs();
  }
  return plan;
}

void Trainer::reset_training_state(const TrainingPlan& plan) {
  state_ = TrainerState{};
  control_ = TrainerControl{};
  all_results_ = json::object();  // a new run's results replace an earlier run's
  state_.is_world_process_zero = accelerator_->is_main_process();
  state_.is_local_process_zero = accelerator_->is_local_main_process();
  state_.max_steps = plan.max_steps;
  state_.num_train_epochs = plan.num_epochs;
  state_.logging_steps = resolve_steps(args_.logging_steps(), plan.max_steps);
  state_.eval_steps = resolve_steps(args_.effective_eval_steps(), plan.max_steps);
  state_.save_steps = resolve_steps(args_.save_steps(), plan.max_steps);
  state_.train_batch_size = train_batch_size_;
  last_step_loss_ = torch::Tensor();
  state_.read_last_step_loss = [this] {
    return last_step_loss_.defined() ? last_step_loss_.item<double>() : 0.0;
  };
  total_batch_size_ = plan.total_batch_size;
  position_ = Position{};
  // The losses stay on the device (summed in float64) until a log reads them: no host sync per
  // step, which on a GPU costs more than a small model's step.
  tr_loss_ = torch::zeros({}, torch::TensorOptions(torch::kDouble).device(device()));
  grad_norm_ = torch::Tensor();
  total_loss_scalar_ = 0;
  last_logged_step_ = 0;
  nonfinite_in_a_row_ = 0;
  last_saved_step_ = -1;
  cuda_graph_replays_ = 0;
  pending_losses_.clear();
  pending_norms_.clear();
  pending_steps_.clear();
  pending_lrs_.clear();
  step_curve_ = {};
}

std::shared_ptr<AcceleratedOptimizer> Trainer::create_optimizer_and_scheduler(
    int64_t num_training_steps, bool keep_optimizer) {
  // What the (possibly overridden) steps return is what trains, whether or not they set the
  // members themselves.
  std::vector<double> base_lrs;
  if (keep_optimizer && optimizer_ && lr_scheduler_) {
    // A new schedule over the optimizer as it is: from the first schedule's initial rates (as
    // PyTorch's schedulers read a group's initial_lr), not the rates it last set.
    base_lrs = lr_scheduler_->base_lrs();
  } else {
    optimizer_ = create_optimizer();
  }
  if (!optimizer_) throw std::logic_error("Trainer: create_optimizer returned no optimizer");
  // A sharded run's checkpoints hold AdamW's moments per slice (checkpoint_sharded.cpp).
  if (accelerator_->sharded_model() && !dynamic_cast<torch::optim::AdamW*>(optimizer_.get())) {
    throw std::logic_error(
        "Trainer: with fsdp, create_optimizer must return an AdamW (a sharded run's state is "
        "AdamW's moments)");
  }
  lr_scheduler_ = create_scheduler(num_training_steps, *optimizer_);
  if (!lr_scheduler_) throw std::logic_error("Trainer: create_scheduler returned no scheduler");
  if (!base_lrs.empty()) {
    lr_scheduler_->set_base_lrs(base_lrs);
    lr_scheduler_->set_last_step(0);
  }
  return accelerator_->prepare(optimizer_);
}

void Trainer::print_banner(const TrainingPlan& plan,
                           const std::optional<Resumable>& checkpoint) const {
  if (!state_.is_world_process_zero) return;
  std::string text = banner(train_dataset_->size(), plan.num_epochs);
  if (checkpoint) {
    text += fmt::format(
        "  Continuing training from checkpoint {} (global step {}, epoch {}): skipping the "
        "first {} batches of epoch {}\n",
        checkpoint->dir, state_.global_step, position_.epoch,
        args_.ignore_data_skip() ? 0 : position_.steps_in_epoch * plan.accumulation,
        position_.epoch);
  }
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace trainer
