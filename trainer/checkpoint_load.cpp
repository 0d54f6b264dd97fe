// The Trainer's checkpoints, loaded (the one to resume from is found and checked in
// checkpoint_find.cpp): the saved state read, the weights and optimizer loaded, the state and the
// random generators restored, so that the run continues bit for bit.
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <limits>

#include <unistd.h>

#include <fmt/format.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"
#include "lib/base/warn.h"
#include "lib/io/safetensors.h"
#include "lib/report/curve.h"
#include "trainer/checkpoint_layout.h"
#include "trainer/checkpoint_manifest.h"
#include "trainer/trainer.h"

namespace trainer {

using json = nlohmann::ordered_json;
using namespace checkpoint;

namespace {

// reduce_lr_on_plateau's part of scheduler.json (checkpoint.cpp writes it): its state and the
// rates it had set (best NaN where it is null: still mode_worse). InputError for a checkpoint of
// another schedule or a part that does not read.
void read_plateau_state(const std::string& dir, const json& scheduler,
                        std::optional<optim::PlateauState>& plateau, std::vector<double>& last_lrs,
                        size_t groups) {
  if (!scheduler.contains("reduce_lr_on_plateau")) {
    throw InputError(fmt::format(
        "checkpoint {}: {} has no reduce_lr_on_plateau state (it was saved by a run with another "
        "lr_scheduler_type): resume with that lr_scheduler_type, or start a new run",
        dir, kSchedulerFile));
  }
  const json& part = scheduler["reduce_lr_on_plateau"];
  const json& lrs = scheduler.contains("last_lr") ? scheduler["last_lr"] : json();
  bool ok = part.is_object() && part.contains("best") &&
            (part["best"].is_null() || part["best"].is_number()) &&
            part.contains("num_bad_epochs") && part["num_bad_epochs"].is_number_integer() &&
            part.contains("cooldown_counter") && part["cooldown_counter"].is_number() &&
            part.contains("last_epoch") && part["last_epoch"].is_number_integer() &&
            lrs.is_array() && lrs.size() == groups;
  std::vector<double> rates;
  for (size_t i = 0; ok && i < lrs.size(); ++i) {
    ok = lrs[i].is_number() && std::isfinite(lrs[i].get<double>()) && lrs[i].get<double>() >= 0;
    if (ok) rates.push_back(lrs[i].get<double>());
  }
  if (!ok) {
    throw InputError(fmt::format(
        "checkpoint {}: {} has no readable reduce_lr_on_plateau state (best, num_bad_epochs, "
        "cooldown_counter, last_epoch) and last_lr (one rate >= 0 per parameter group)",
        dir, kSchedulerFile));
  }
  optim::PlateauState state;
  state.best = part["best"].is_null() ? std::numeric_limits<double>::quiet_NaN()
                                      : part["best"].get<double>();
  state.num_bad_epochs = part["num_bad_epochs"].get<int64_t>();
  state.cooldown_counter = part["cooldown_counter"].get<double>();
  state.last_epoch = part["last_epoch"].get<int64_t>();
  plateau = state;
  last_lrs = std::move(rates);
}

}  // namespace

Trainer::SavedState Trainer::read_saved_state(const Resumable& checkpoint) const {
  const std::string& dir = checkpoint.dir;
  const Manifest& manifest = checkpoint.manifest;
  auto source = [&](const char* file) { return base::join_path(dir, file); };
  TrainerState saved =
      TrainerState::from_json(base::read_json(source(kStateFile)), source(kStateFile));
  if (saved.global_step != manifest.global_step) {
    throw InputError(fmt::format("checkpoint {}: {} says global step {}, its manifest {}", dir,
                                 kStateFile, saved.global_step, manifest.global_step));
  }
  if (base::starts_with(base::base_name(dir), "checkpoint-") &&
      checkpoint_step(dir) != manifest.global_step) {
    throw InputError(fmt::format("checkpoint {} holds global step {}, not the step its name says",
                                 dir, manifest.global_step));
  }
  json scheduler = base::read_json_object(source(kSchedulerFile));
  if (!scheduler.contains("last_step") || !scheduler["last_step"].is_number_integer() ||
      scheduler["last_step"].get<int64_t>() < 0 ||
      scheduler["last_step"].get<int64_t>() > saved.global_step) {
    throw InputError(fmt::format("checkpoint {}: {} has no last_step in 0..{} (the global step)",
                                 dir, kSchedulerFile, saved.global_step));
  }
  std::vector<double> base_lrs;
  if (scheduler.contains("base_lrs")) {
    const json& lrs = scheduler["base_lrs"];
    bool ok = lrs.is_array() && lrs.size() == optimizer_->param_groups().size();
    for (size_t i = 0; ok && i < lrs.size(); ++i) {
      ok = lrs[i].is_number() && std::isfinite(lrs[i].get<double>()) && lrs[i].get<double>() >= 0;
      if (ok) base_lrs.push_back(lrs[i].get<double>());
    }
    if (!ok) {
      throw InputError(fmt::format(
          "checkpoint {}: {} has no base_lrs, one learning rate >= 0 per parameter group", dir,
          kSchedulerFile));
    }
  }
  SavedState result{std::move(saved), scheduler["last_step"].get<int64_t>(), std::move(base_lrs)};
  if (lr_scheduler_->steps_with_metric()) {
    read_plateau_state(dir, scheduler, result.plateau, result.last_lrs,
                       optimizer_->param_groups().size());
  }
  return result;
}

void Trainer::load_weights_and_optimizer(const Resumable& checkpoint, const SavedState& saved) {
  const std::string& dir = checkpoint.dir;
  if (accelerator_->sharded_model()) {
    // Each process its slices of the weights and the moments, from the files that hold them.
    load_sharded_state(dir, checkpoint.manifest, /*with_optimizer=*/true);
  } else if (checkpoint.manifest.sharded) {
    throw InputError(fmt::format(
        "checkpoint {} was saved by a sharded run (fsdp); resume it with fsdp (any strategy and "
        "number of processes)",
        dir));
  } else {
    load_model_and_optimizer(dir);
  }
  // The schedule continues from the saved base rates, as PyTorch's scheduler state does.
  if (!saved.base_lrs.empty()) lr_scheduler_->set_base_lrs(saved.base_lrs);
  lr_scheduler_->set_last_step(saved.scheduler_last_step);
  // ReduceLROnPlateau's rates are its own (its counters and best with them), not a step's.
  if (auto* plateau = dynamic_cast<optim::ReduceLROnPlateau*>(lr_scheduler_.get())) {
    if (saved.plateau) plateau->restore(*saved.plateau, saved.last_lrs);
  }
}

void Trainer::load_model_and_optimizer(const std::string& dir) {
  auto source = [&](const char* file) { return base::join_path(dir, file); };
  // The model: names and shapes must match exactly, and the weights be finite.
  model_->load_weights(dir);
  if (auto name = nonfinite_parameter(*model_)) {
    throw InputError(fmt::format("checkpoint {}: {} holds weights that are not finite ({})", dir,
                                 model_->weights_file(), *name));
  }
  // The optimizer (LibTorch's archive of its state and options).
  try {
    std::string bytes = base::read_file(source(kOptimizerFile), SIZE_MAX, "", false);
    torch::serialize::InputArchive archive;
    archive.load_from(bytes.data(), bytes.size());
    optimizer_->load(archive);
  } catch (const c10::Error& e) {
    const std::string what = base::first_line(e.what_without_backtrace());
    // The zip reader's own words ("PytorchStreamReader failed reading zip archive: ...") mean
    // the file is no archive at all.
    if (what.find("PytorchStreamReader") != std::string::npos) {
      throw InputError(fmt::format(
          "checkpoint {}: {} is damaged (not an archive LibTorch can read); resume from another "
          "checkpoint",
          dir, kOptimizerFile));
    }
    throw InputError(fmt::format("checkpoint {}: {} does not fit this optimizer ({})", dir,
                                 kOptimizerFile, what));
  }
}

void Trainer::restore_state(const std::string& dir, const TrainerState& saved) {
  auto source = [&](const char* file) { return base::join_path(dir, file); };
  // The state, with this run's step counts (a resumed run may train longer).
  const TrainerState current = state_;
  state_ = saved;
  state_.max_steps = current.max_steps;
  state_.num_train_epochs = current.num_train_epochs;
  state_.logging_steps = current.logging_steps;
  state_.eval_steps = current.eval_steps;
  state_.save_steps = current.save_steps;
  state_.train_batch_size = current.train_batch_size;
  state_.is_world_process_zero = current.is_world_process_zero;
  state_.is_local_process_zero = current.is_local_process_zero;
  state_.read_last_step_loss = current.read_last_step_loss;
  state_.best_model_checkpoint = reroot(saved.best_model_checkpoint, args_.output_dir());
  // Transformers' restore_callback_states_from_checkpoint: the callbacks' saved states (early
  // stopping's count, the control's stop) only when asked for.
  if (args_.restore_callback_states_from_checkpoint()) restore_callback_states(saved, source);
  if (state_.global_step >= state_.max_steps) control_.should_training_stop = true;
}

void Trainer::restore_callback_states(const TrainerState& saved,
                                      const std::function<std::string(const char*)>& source) {
  for (auto& callback : callbacks_) {
    std::string name = callback->state_name();
    if (name.empty()) continue;
    if (saved.stateful_callbacks.contains(name)) {
      try {
        callback->load_state(saved.stateful_callbacks[name]);
      } catch (const InputError& e) {
        throw InputError(fmt::format("{}: {}", source(kStateFile), e.what()));
      }
    }
  }
  // A callback's stop (early stopping) holds; a stop at the old max_steps does not when this run
  // trains longer.
  if (saved.stateful_callbacks.contains("TrainerControl")) {
    const json& control = saved.stateful_callbacks["TrainerControl"];
    const json flags = control.is_object() && control.contains("args") ? control["args"] : json();
    auto flag = [&](const char* key) {
      return flags.is_object() && flags.contains(key) && flags[key].is_boolean() &&
             flags[key].get<bool>();
    };
    control_.should_epoch_stop = flag("should_epoch_stop");
    control_.should_training_stop =
        flag("should_training_stop") &&
        (saved.global_step < saved.max_steps || saved.global_step >= state_.max_steps);
  }
}

void Trainer::restore_rank_state(const Resumable& checkpoint, const TrainerState& saved,
                                 int64_t steps_per_epoch) {
  const std::string& dir = checkpoint.dir;
  const Manifest& manifest = checkpoint.manifest;
  auto source = [&](const char* file) { return base::join_path(dir, file); };
  const int64_t processes = accelerator_->num_processes();
  // This process's random state and the loop's position: its own file at the same world size;
  // at another, rank 0's random state, and the process-mean of the losses since the last log.
  const int rank = accelerator_->process_index();
  const bool same_world = manifest.world_size == processes;
  const std::string own = source(rank_state_name(same_world ? rank : 0).c_str());
  io::MappedSafetensors rank_state = io::map_safetensors(own);
  const torch::Tensor& cpu_state = named_tensor(rank_state.tensors, "cpu_rng_state", own);
  {
    at::Generator generator = default_generator(torch::kCPU);
    std::lock_guard<std::mutex> lock(generator.mutex());
    try {
      generator.set_state(cpu_state.clone());
    } catch (const c10::Error& e) {
      throw InputError(fmt::format("{}: cpu_rng_state is not a generator state ({})", own,
                                   base::first_line(e.what_without_backtrace())));
    }
  }
  if (device().is_cuda()) {
    for (const auto& [name, value] : rank_state.tensors) {
      if (name != "cuda_rng_state") continue;
      at::Generator generator = default_generator(device());
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(value.clone());
    }
  }
  // The position, within what this run's data and step count allow.
  auto bounded = [&](const char* key, int64_t high) {
    int64_t value = metadata_integer(rank_state.metadata, key, own);
    if (value > high) {
      throw InputError(fmt::format("{}: {} {} is past {} (the data or the global step {})", own,
                                   key, value, high, saved.global_step));
    }
    return value;
  };
  position_.epoch = bounded("epoch", saved.global_step);
  position_.steps_in_epoch = bounded("steps_in_epoch", steps_per_epoch);
  position_.inside_epoch = bounded("inside_epoch", 1) != 0;
  last_logged_step_ = bounded("last_logged_step", saved.global_step);
  nonfinite_in_a_row_ = bounded("nonfinite_in_a_row", saved.global_step);
  total_loss_scalar_ = scalar_value(rank_state.tensors, "total_loss", own);
  if (same_world) {
    tr_loss_.fill_(scalar_value(rank_state.tensors, "tr_loss", own));
    load_rank_extras(rank_state, own);
  } else {
    double sum = 0;
    for (int64_t r = 0; r < manifest.world_size; ++r) {
      std::string path = source(rank_state_name(r).c_str());
      sum += scalar_value(io::map_safetensors(path).tensors, "tr_loss", path);
    }
    tr_loss_.fill_(sum / static_cast<double>(manifest.world_size));
  }
}

void Trainer::load_checkpoint(const Resumable& checkpoint, int64_t steps_per_epoch) {
  check_resumable(checkpoint);
  // The state first: its numbers must agree with the manifest and the folder's name before
  // anything is loaded into the model or the optimizer.
  const SavedState saved = read_saved_state(checkpoint);
  load_weights_and_optimizer(checkpoint, saved);
  restore_state(checkpoint.dir, saved.state);
  restore_rank_state(checkpoint, saved.state, steps_per_epoch);
  last_saved_step_ = state_.global_step;
  // The per-step curve up to the checkpoint's step, where it kept one: the run's curve stays whole.
  const std::string curve = base::join_path(checkpoint.dir, report::kStepCurveFile);
  if (::access(curve.c_str(), F_OK) == 0) {
    step_curve_ = report::read_step_curve(curve);
    step_curve_.keep_until(static_cast<double>(state_.global_step));
  }
}

}  // namespace trainer
