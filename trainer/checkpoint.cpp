// The Trainer's checkpoints, saved: checkpoint-<step> written atomically from every process (each
// its own random state and position, the main process the rest and the manifest), the best
// metric, rotation by save_total_limit, and load_best_model_at_end.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <unistd.h>
#include <sstream>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/text.h"
#include "lib/base/warn.h"
#include "lib/io/safetensors.h"
#include "lib/report/curve.h"
#include "trainer/checkpoint_layout.h"
#include "trainer/checkpoint_manifest.h"
#include "trainer/trainer.h"

namespace trainer {
namespace checkpoint {

at::Generator default_generator(const torch::Device& device) {
  if (device.is_cuda()) return at::globalContext().defaultGenerator(device);
  return at::detail::getDefaultCPUGenerator();
}

std::optional<std::string> nonfinite_parameter(const torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  for (const auto& item : model.named_parameters()) {
    if (!io::all_finite(item.value())) return item.key();
  }
  return std::nullopt;
}

}  // namespace checkpoint

using json = nlohmann::ordered_json;
using namespace checkpoint;

namespace {

// Rethrows the exception in flight from a failed save, a file's error prefixed with the
// checkpoint it was for (InputError and anything else as they are).
[[noreturn]] void rethrow_save_error(const std::string& target) {
  try {
    throw;
  } catch (const InputError&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(fmt::format("cannot save checkpoint {}: {}", target, e.what()));
  }
}

// Transformers' stateful_callbacks: each callback's saved state, and TrainerControl's flags.
json stateful_callbacks(const std::vector<std::shared_ptr<TrainerCallback>>& callbacks,
                        const TrainerControl& control) {
  json out = json::object();
  for (const auto& callback : callbacks) {
    std::string name = callback->state_name();
    if (!name.empty()) out[name] = callback->save_state();
  }
  out["TrainerControl"] = {{"args",
                            {{"should_training_stop", control.should_training_stop},
                             {"should_epoch_stop", control.should_epoch_stop},
                             {"should_save", false},
                             {"should_evaluate", false},
                             {"should_log", false}}},
                           {"attributes", json::object()}};
  return out;
}

// The schedule's state (scheduler.json): its step and rates, and ReduceLROnPlateau's own.
json scheduler_state(const optim::LRScheduler& scheduler) {
  json state = {{"last_step", scheduler.last_step()},
                {"base_lrs", scheduler.base_lrs()},
                {"last_lr", scheduler.get_last_lr()}};
  if (const auto* plateau = dynamic_cast<const optim::ReduceLROnPlateau*>(&scheduler)) {
    // ReduceLROnPlateau's state; best is null while it is still mode_worse (+-inf).
    const optim::PlateauState& s = plateau->plateau().state();
    state["reduce_lr_on_plateau"] = {{"best", std::isinf(s.best) ? json() : json(s.best)},
                                     {"num_bad_epochs", s.num_bad_epochs},
                                     {"cooldown_counter", s.cooldown_counter},
                                     {"last_epoch", s.last_epoch}};
  }
  return state;
}

}  // namespace

void Trainer::write_rank_state(const std::string& staging) const {
  Accelerator& accelerator = *accelerator_;
  io::NamedTensors tensors;
  {
    at::Generator generator = default_generator(torch::kCPU);
    std::lock_guard<std::mutex> lock(generator.mutex());
    tensors.emplace_back("cpu_rng_state", generator.get_state());
  }
  if (device().is_cuda()) {
    at::Generator generator = default_generator(device());
    std::lock_guard<std::mutex> lock(generator.mutex());
    tensors.emplace_back("cuda_rng_state", generator.get_state());
  }
  tensors.emplace_back("tr_loss", tr_loss_.detach().to(torch::kCPU).clone());
  tensors.emplace_back("total_loss", torch::tensor({total_loss_scalar_}, torch::kDouble));
  io::Metadata metadata = {{"rank", std::to_string(accelerator.process_index())},
                           {"world_size", std::to_string(accelerator.num_processes())},
                           {"epoch", std::to_string(position_.epoch)},
                           {"steps_in_epoch", std::to_string(position_.steps_in_epoch)},
                           {"inside_epoch", position_.inside_epoch ? "1" : "0"},
                           {"last_logged_step", std::to_string(last_logged_step_)},
                           {"nonfinite_in_a_row", std::to_string(nonfinite_in_a_row_)}};
  save_rank_extras(tensors, metadata);
  io::save_safetensors(base::join_path(staging, rank_state_name(accelerator.process_index())),
                       tensors, metadata);
}

bool Trainer::saves_here() const {
  return args_.save_on_each_node() ? accelerator_->is_local_main_process()
                                   : accelerator_->is_main_process();
}

void Trainer::share_rank_states(const std::string& staging) const {
  Accelerator& accelerator = *accelerator_;
  const std::string own = base::join_path(staging, rank_state_name(accelerator.process_index()));
  std::string bytes = base::read_file(own);
  torch::Tensor mine =
      torch::from_blob(bytes.data(), {static_cast<int64_t>(bytes.size())}, torch::kUInt8)
          .clone()
          .to(device());
  torch::Tensor sizes =
      accelerator.gather(torch::tensor({static_cast<int64_t>(bytes.size())}).to(device())).cpu();
  torch::Tensor all = accelerator.gather(accelerator.pad_across_processes(mine)).cpu();
  if (!accelerator.is_local_main_process()) return;
  const int64_t processes = accelerator.num_processes();
  const int64_t width = all.numel() / processes;
  for (int64_t r = 0; r < processes; ++r) {
    const std::string path = base::join_path(staging, rank_state_name(r));
    if (base::is_regular_file(path)) continue;  // this node's own ranks wrote theirs
    const auto* start = all.data_ptr<uint8_t>() + r * width;
    base::write_file_atomic(path, std::string(reinterpret_cast<const char*>(start),
                                              static_cast<size_t>(sizes[r].item<int64_t>())));
  }
}

void Trainer::write_checkpoint_files(const std::string& staging, const std::string& target) {
  Accelerator& accelerator = *accelerator_;
  const int64_t step = state_.global_step;
  if (state_.best_global_step && *state_.best_global_step == step) {
    state_.best_model_checkpoint = target;
  }
  state_.stateful_callbacks = stateful_callbacks(callbacks_, control_);

  Manifest manifest;
  manifest.global_step = step;
  manifest.model_name = args_.model_name();
  manifest.world_size = accelerator.num_processes();
  manifest.total_batch_size = total_batch_size_;
  manifest.save_only_model = args_.save_only_model();
  const auto plan = args_.fsdp_plan();
  manifest.sharded = accelerator.sharded_model() != nullptr;
  std::vector<std::string> files;
  // A sharded run's weights are in its ranks' files; with FULL_STATE_DICT also whole, gathered
  // on this process (see save_checkpoint).
  if (!manifest.sharded || (plan && !plan->sharded_state_dict)) {
    files = model_->save_weights(staging,
                                 io::parse_file_size(args_.save_safetensors_max_shard_size(),
                                                     "argument save_safetensors_max_shard_size:"));
  }
  if (manifest.sharded) {
    for (int64_t r = 0; r < manifest.world_size; ++r)
      files.push_back(sharded_state_name(r, manifest.world_size));
  }
  files.push_back(kStateFile);
  files.push_back(kArgsFile);
  // A Hugging Face model's config and tokenizer: the checkpoint is itself a model folder.
  for (const auto& [name, contents] : model_->pretrained_files) {
    base::write_file_atomic(base::join_path(staging, name), contents);
    files.push_back(name);
  }
  if (!args_.save_only_model()) {
    if (!manifest.sharded) {
      torch::serialize::OutputArchive archive;
      optimizer_->save(archive);
      std::ostringstream bytes;
      archive.save_to(bytes);
      base::write_file_atomic(base::join_path(staging, kOptimizerFile), bytes.str());
      files.push_back(kOptimizerFile);
    }
    base::write_json(base::join_path(staging, kSchedulerFile), scheduler_state(*lr_scheduler_));
    files.push_back(kSchedulerFile);
    for (int64_t r = 0; r < manifest.world_size; ++r) files.push_back(rank_state_name(r));
  }
  state_.save_to_json(base::join_path(staging, kStateFile));
  base::write_file_atomic(base::join_path(staging, kArgsFile), args_.to_json());
  // The per-step curve so far, so that a resumed run's curve is whole (listed, not required:
  // checkpoints from before it resume too).
  base::write_file_atomic(base::join_path(staging, report::kStepCurveFile),
                          report::step_curve_npy(step_curve_));
  files.push_back(report::kStepCurveFile);
  for (const std::string& name : files) manifest.files.push_back(describe_file(staging, name));
  base::write_json(base::join_path(staging, kManifestName), manifest.to_json());
  base::sync_path(staging);
  base::move_into_place(staging, target);
}

std::string Trainer::save_checkpoint() {
  flush_step_curve();  // every process: the curve's pending steps are reduced together
  store_flos();        // every process: its flos summed into trainer_state's total_flos
  Accelerator& accelerator = *accelerator_;
  const int64_t step = state_.global_step;
  const std::string output_dir = args_.output_dir();
  const std::string target = checkpoint_path(output_dir, step);
  const std::string staging = base::join_path(output_dir, fmt::format(".tmp-checkpoint-{}", step));
  const bool main = saves_here();
  refuse_nonfinite_weights();
  if (main) {
    base::info("Saving model checkpoint to {}", target);
    base::remove_tree(staging);
    base::make_directories(staging, "checkpoint folder");
  }
  accelerator.wait_for_everyone();
  // Each process's random state and position (and a sharded run's slices), written by itself
  // into the shared folder; every process learns whether all of them did, so that none waits for
  // one that failed.
  std::exception_ptr error;
  try {
    if (!args_.save_only_model()) write_rank_state(staging);
    if (accelerator.sharded_model()) write_sharded_state(staging);
  } catch (...) {
    error = std::current_exception();
  }
  const bool failed =
      accelerator
          .reduce(torch::tensor({error ? 1.0 : 0.0}, torch::kDouble).to(device()), Reduction::kMax)
          .item<double>() > 0;
  if (failed) {
    if (main) base::remove_tree(staging);
    if (!error) {
      throw std::runtime_error(fmt::format(
          "cannot save checkpoint {}: another process could not write its files (its error says "
          "why)",
          target));
    }
    try {
      std::rethrow_exception(error);
    } catch (...) {
      rethrow_save_error(target);
    }
  }
  // Nodes that share no file system: each node's checkpoint holds every rank's state.
  if (args_.save_on_each_node() && accelerator.num_processes() > 1 && !args_.save_only_model())
    share_rank_states(staging);
  // The main process writes the rest; a sharded run's full weights (FULL_STATE_DICT) are
  // gathered there for it, every process taking part.
  auto write = [&] {
    if (!main) return;
    try {
      write_checkpoint_files(staging, target);
    } catch (...) {
      base::remove_tree(staging);
      rethrow_save_error(target);
    }
    rotate_checkpoints(target);
  };
  const auto plan = args_.fsdp_plan();
  if (accelerator.sharded_model() && plan && !plan->sharded_state_dict) {
    accelerator.with_full_params(write, /*rank0_only=*/true);
  } else {
    write();
  }
  last_saved_step_ = step;
  return target;
}

double Trainer::best_metric_value(const Metrics& metrics) const {
  auto it = metrics.find(args_.best_metric_key());
  if (it == metrics.end()) {
    std::vector<std::string> known;
    for (const auto& [key, value] : metrics) known.push_back(key);
    throw InputError(
        fmt::format("argument metric_for_best_model: {} is not among the evaluation's metrics ({})",
                    args_.best_metric_name(), fmt::join(known, ", ")));
  }
  return it->second;
}

bool Trainer::update_best_metric(const Metrics& metrics) {
  if (args_.best_metric_name().empty()) return false;
  const double value = best_metric_value(metrics);
  const bool greater = args_.best_metric_greater_is_better();
  if (state_.best_metric && !(greater ? value > *state_.best_metric : value < *state_.best_metric))
    return false;
  state_.best_metric = value;
  state_.best_global_step = state_.global_step;
  return true;
}

namespace {

// Which results an earlier-checkpoints folder belongs to: the CRC-32 of output_dir's
// trainer_state.json ("none" without one), kept in the folder as kStampName.
constexpr const char* kStampName = ".results";
std::string results_stamp(const std::string& output_dir) {
  if (!base::is_regular_file(base::join_path(output_dir, kStateFile))) return "none";
  return fmt::format("{:08x}", describe_file(output_dir, kStateFile).crc32);
}

}  // namespace

void Trainer::set_aside_earlier_checkpoints() const {
  const std::string& output_dir = args_.output_dir();
  const std::string aside = base::join_path(output_dir, kEarlierCheckpointsDir);
  const std::string staging = aside + ".partial";
  // A set-aside a crash cut short: what it had moved goes back first.
  if (base::is_directory(staging)) {
    for (const std::string& name : base::list_directory(staging)) {
      const std::string back = base::join_path(output_dir, name);
      if (checkpoint_step(name) && ::access(back.c_str(), F_OK) != 0) {
        std::rename(base::join_path(staging, name).c_str(), back.c_str());
      }
    }
    base::remove_tree(staging);
  }
  const std::vector<CheckpointDir> found = list_checkpoints(output_dir);
  const std::string stamp = results_stamp(output_dir);
  if (base::is_directory(aside)) {
    std::string kept;
    try {
      kept = base::read_file(base::join_path(aside, kStampName), 64);
    } catch (const InputError&) {
    }
    if (kept == stamp) {
      // The results are still those of the set-aside checkpoints: an overwriting run before this
      // one never finished, and its own checkpoints are replaced by this one's.
      for (const CheckpointDir& unfinished : found) base::remove_tree(unfinished.path);
      return;
    }
    // Results saved since (a run that finished, and whose clean-up did not happen): the folder
    // belongs to no result any more.
    base::remove_tree(aside);
  }
  if (found.empty()) return;
  // Gathered in a staging folder and renamed at once: a crash midway leaves every checkpoint
  // either where it was or in the staging folder, which the next run moves back.
  base::make_directories(staging);
  base::write_file_atomic(base::join_path(staging, kStampName), stamp);
  std::vector<std::pair<std::string, std::string>> moved;
  for (const CheckpointDir& earlier : found) {
    const std::string to = base::join_path(staging, base::base_name(earlier.path));
    if (std::rename(earlier.path.c_str(), to.c_str()) != 0) {
      const int error = errno;
      for (const auto& [from, into] : moved) std::rename(into.c_str(), from.c_str());
      base::remove_tree(staging);
      throw std::runtime_error(
          fmt::format("cannot move {} into {}: {}", earlier.path, staging, std::strerror(error)));
    }
    moved.emplace_back(earlier.path, to);
  }
  base::move_into_place(staging, aside);
  std::fprintf(stderr,
               "trainer: overwrite_output_dir: the earlier run's %zu %s in %s until this run's "
               "results are saved\n",
               found.size(), found.size() == 1 ? "checkpoint waits" : "checkpoints wait",
               aside.c_str());
  std::fflush(stderr);
}

void Trainer::rotate_checkpoints(const std::string& just_saved) const {
  if (!args_.save_total_limit()) return;
  std::vector<CheckpointDir> found = list_checkpoints(args_.output_dir());
  std::vector<std::string> sorted;
  for (const auto& c : found) {
    if (c.path != just_saved) sorted.push_back(c.path);
  }
  // The one just saved counts as the newest (a resumed run may find later steps of an abandoned
  // continuation): it is never the one removed.
  sorted.push_back(just_saved);
  // As Transformers: the best moves to the second-newest place, so that it is never deleted.
  if (state_.best_model_checkpoint) {
    auto best = std::find(sorted.begin(), sorted.end(), *state_.best_model_checkpoint);
    if (best != sorted.end()) {
      for (auto i = static_cast<size_t>(best - sorted.begin()); i + 2 < sorted.size(); ++i) {
        std::swap(sorted[i], sorted[i + 1]);
      }
    }
  }
  int64_t limit = *args_.save_total_limit();
  if (state_.best_model_checkpoint && limit == 1 && !sorted.empty() &&
      sorted.back() != *state_.best_model_checkpoint) {
    limit = 2;
  }
  const int64_t excess = static_cast<int64_t>(sorted.size()) - limit;
  for (int64_t i = 0; i < excess; ++i) base::remove_tree(sorted[static_cast<size_t>(i)]);
}

void Trainer::load_best_model() {
  if (!state_.best_model_checkpoint) return;
  const std::string dir = *state_.best_model_checkpoint;
  try {
    verify_checkpoint(dir);
  } catch (const InputError& e) {
    // As Transformers: the run's own model stays, with a warning (the results are still saved).
    if (state_.is_world_process_zero) {
      base::warn("cannot load the best model: {}; keeping the last", e.what());
    }
    return;
  }
  if (accelerator_->sharded_model()) {
    load_sharded_state(dir, verify_checkpoint(dir), /*with_optimizer=*/false);
  } else {
    model_->load_weights(dir);
  }
  if (state_.is_world_process_zero) {
    std::printf("Loading best model from %s (score: %s).\n", dir.c_str(),
                base::python_float(state_.best_metric.value_or(0)).c_str());
    std::fflush(stdout);
  }
}

}  // namespace trainer
