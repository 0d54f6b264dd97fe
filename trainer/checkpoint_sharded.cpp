// A sharded run's checkpoints (fsdp): each rank writes its slices of the parameters and of AdamW's
// moments, with where each slice starts; a run at any world size reads back the slices it owns
// from whichever files hold them (resharding on load).
#include <fmt/format.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/json_text.h"
#include "lib/io/safetensors.h"
#include "lib/optim/adamw.h"
#include "trainer/checkpoint_manifest.h"
#include "trainer/trainer.h"

namespace trainer {

using json = nlohmann::ordered_json;

namespace {

constexpr const char* kExpAvg = ":exp_avg";
constexpr const char* kExpAvgSq = ":exp_avg_sq";

// One saved file: its tensors by name and each parameter's slice (first element, shape).
struct SavedSlices {
  std::string path;
  io::MappedSafetensors file;
  std::map<std::string, const torch::Tensor*> tensors;
  std::map<std::string, std::pair<int64_t, std::vector<int64_t>>> slices;
};

SavedSlices read_slices(const std::string& path) {
  SavedSlices saved;
  saved.path = path;
  saved.file = io::map_safetensors(path);
  for (const auto& [name, tensor] : saved.file.tensors) saved.tensors[name] = &tensor;
  auto it = saved.file.metadata.find("slices");
  json slices = it == saved.file.metadata.end()
                    ? json()
                    : base::parse_json(it->second, fmt::format("{}: its metadata's slices", path));
  if (!slices.is_object()) throw InputError(fmt::format("{}: its metadata has no slices", path));
  for (const auto& [name, entry] : slices.items()) {
    if (!entry.is_array() || entry.size() != 2 || !entry[0].is_number_integer() ||
        !entry[1].is_array() || saved.tensors.count(name) == 0) {
      throw InputError(fmt::format("{}: the slice of {} is not [begin, shape]", path, name));
    }
    std::vector<int64_t> shape;
    for (const auto& d : entry[1]) {
      if (!d.is_number_integer()) throw InputError(fmt::format("{}: {}'s shape", path, name));
      shape.push_back(d.get<int64_t>());
    }
    saved.slices[name] = {entry[0].get<int64_t>(), shape};
  }
  return saved;
}

// The optimizer's step count: the largest any rank saved (a rank whose slices are all frozen
// saves none).
int64_t saved_step(const std::vector<SavedSlices>& files) {
  int64_t step = 0;
  for (const SavedSlices& saved : files) {
    auto it = saved.file.metadata.find("step");
    if (it != saved.file.metadata.end())
      step = std::max<int64_t>(step, std::atoll(it->second.c_str()));
  }
  return step;
}

// Copies the part of `slice` that `saved` holds into it, and with `moments` into its AdamW
// moments; returns how many elements that was.
int64_t load_part(const SavedSlices& saved, const ShardedSlice& slice, bool moments,
                  torch::Tensor& exp_avg, torch::Tensor& exp_avg_sq) {
  auto found = saved.slices.find(slice.name);
  if (found == saved.slices.end()) return 0;
  // Named apart, not bound as a structure: the lambda below captures saved_begin (C++17).
  const int64_t saved_begin = found->second.first;
  const auto& shape = found->second.second;
  if (shape != slice.shape) {
    throw InputError(fmt::format("{}: {} has shape {}, this model's is {}", saved.path, slice.name,
                                 fmt::join(shape, "x"), fmt::join(slice.shape, "x")));
  }
  const torch::Tensor& values = *saved.tensors.at(slice.name);
  const int64_t begin = slice.begin, end = begin + slice.view.numel();
  const int64_t lo = std::max(begin, saved_begin);
  const int64_t hi = std::min(end, saved_begin + values.numel());
  if (lo >= hi) return 0;
  auto place = [&](torch::Tensor& target, const torch::Tensor& source) {
    target.narrow(0, lo - begin, hi - lo)
        .copy_(source.reshape({-1}).narrow(0, lo - saved_begin, hi - lo));
  };
  torch::Tensor view = slice.view;
  place(view, values);
  if (moments) {
    auto a = saved.tensors.find(slice.name + kExpAvg);
    auto b = saved.tensors.find(slice.name + kExpAvgSq);
    if (a == saved.tensors.end() || b == saved.tensors.end()) {
      throw InputError(fmt::format("{}: it has no AdamW moments of {}", saved.path, slice.name));
    }
    place(exp_avg, *a->second);
    place(exp_avg_sq, *b->second);
  }
  return hi - lo;
}

}  // namespace

void Trainer::write_sharded_state(const std::string& staging) const {
  auto sharded = accelerator_->sharded_model();
  io::NamedTensors tensors;
  json slices = json::object();
  int64_t step = 0;
  const bool moments = !args_.save_only_model();
  // On CUDA the step counts live on the device.
  if (auto* adamw = dynamic_cast<const optim::AdamW*>(optimizer_.get())) adamw->read_device_steps();
  for (const ShardedSlice& slice : sharded->local_slices()) {
    tensors.emplace_back(slice.name, slice.view.detach());
    slices[slice.name] = {slice.begin, slice.shape};
    if (!moments || !slice.trainable) continue;
    auto it = optimizer_->state().find(slice.view.unsafeGetTensorImpl());
    if (it == optimizer_->state().end()) continue;  // no step yet
    auto& state = static_cast<torch::optim::AdamWParamState&>(*it->second);
    tensors.emplace_back(slice.name + kExpAvg, state.exp_avg());
    tensors.emplace_back(slice.name + kExpAvgSq, state.exp_avg_sq());
    step = std::max<int64_t>(step, state.step());
  }
  const int rank = accelerator_->process_index();
  const int world = accelerator_->num_processes();
  io::save_safetensors(base::join_path(staging, sharded_state_name(rank, world)), tensors,
                       {{"slices", slices.dump()},
                        {"step", std::to_string(step)},
                        {"rank", std::to_string(rank)},
                        {"world_size", std::to_string(world)}});
}

void Trainer::load_sharded_state(const std::string& dir, const Manifest& manifest,
                                 bool with_optimizer) {
  // A slice that does not load fails on the rank that owns it; every rank learns of it before
  // the next collective, so none waits for the others.
  std::exception_ptr error;
  try {
    load_own_slices(dir, manifest, with_optimizer);
  } catch (...) {
    error = std::current_exception();
  }
  const bool failed =
      accelerator_
          ->reduce(torch::tensor({error ? 1.0 : 0.0}, torch::kDouble).to(device()), Reduction::kMax)
          .item<double>() > 0;
  if (error) std::rethrow_exception(error);
  if (failed) {
    // A PeerFailure (exit code 3): the launcher names the rank that failed, not this echo of it.
    throw PeerFailure(fmt::format(
        "checkpoint {}: another process could not load its slices (its error says why)", dir));
  }
  accelerator_->sharded_model()->after_optimizer_step();
}

void Trainer::load_own_slices(const std::string& dir, const Manifest& manifest,
                              bool with_optimizer) {
  auto sharded = accelerator_->sharded_model();
  if (!manifest.sharded) {
    throw InputError(fmt::format(
        "checkpoint {} was saved without fsdp; this run shards (fsdp {}): resume it without fsdp, "
        "or start a new run",
        dir, args_.fsdp()));
  }
  std::vector<SavedSlices> files;
  for (int64_t r = 0; r < manifest.world_size; ++r) {
    files.push_back(read_slices(base::join_path(dir, sharded_state_name(r, manifest.world_size))));
  }
  const int64_t step = with_optimizer ? saved_step(files) : 0;
  torch::NoGradGuard no_grad;
  for (const ShardedSlice& slice : sharded->local_slices()) {
    torch::Tensor exp_avg, exp_avg_sq;
    const bool moments = with_optimizer && slice.trainable && step > 0;
    if (moments) {
      exp_avg = torch::zeros_like(slice.view);
      exp_avg_sq = torch::zeros_like(slice.view);
    }
    int64_t covered = 0;
    for (const SavedSlices& saved : files)
      covered += load_part(saved, slice, moments, exp_avg, exp_avg_sq);
    if (covered != slice.view.numel()) {
      throw InputError(fmt::format(
          "checkpoint {}: its sharded state holds {} of the {} elements {} needs from {}", dir,
          covered, slice.view.numel(), accelerator_->process_index() == 0 ? "rank 0" : "this rank",
          slice.name));
    }
    if (!io::all_finite(slice.view)) {
      throw InputError(
          fmt::format("checkpoint {}: its weights are not finite ({})", dir, slice.name));
    }
    if (moments) {
      auto state = std::make_unique<torch::optim::AdamWParamState>();
      state->step(step);
      state->exp_avg(exp_avg);
      state->exp_avg_sq(exp_avg_sq);
      optimizer_->state()[slice.view.unsafeGetTensorImpl()] = std::move(state);
    }
  }
}

void Trainer::refuse_nonfinite_weights() const {
  const auto name = nonfinite_weights();
  if (!name) return;
  // A run that ends so fails, whatever its logged losses say (logging_nan_inf_filter shows a
  // non-finite step's loss as the mean of the ones before).
  throw std::runtime_error(fmt::format(
      "training diverged: the weights are not finite at step {} ({} holds NaN or infinite "
      "values); they were not saved ({})",
      state_.global_step, *name,
      args_.torch_dtype() == "float16"
          ? "torch_dtype float16 trains float16 weights, whose optimizer updates overflow; keep "
            "float32 weights and train in mixed precision (fp16 or bf16)"
          : "lower learning_rate, or set max_grad_norm"));
}

std::optional<std::string> Trainer::nonfinite_weights() const {
  auto sharded = accelerator_->sharded_model();
  if (!sharded) return checkpoint::nonfinite_parameter(*model_);
  // Each process checks its slices; the first parameter (in the model's order) any finds.
  torch::NoGradGuard no_grad;
  std::vector<std::string> names;
  for (const auto& item : model_->named_parameters()) names.push_back(item.key());
  double first = -static_cast<double>(names.size());
  for (const ShardedSlice& slice : sharded->local_slices()) {
    if (io::all_finite(slice.view)) continue;
    auto it = std::find(names.begin(), names.end(), slice.name);
    first = std::max(first, -static_cast<double>(it - names.begin()));
  }
  const double found =
      -accelerator_->reduce(torch::tensor({first}, torch::kDouble).to(device()), Reduction::kMax)
           .item<double>();
  if (found >= static_cast<double>(names.size())) return std::nullopt;
  return names[static_cast<size_t>(found)];
}

}  // namespace trainer
