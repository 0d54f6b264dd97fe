// The checkpoint a run resumes from: the newest good one of output_dir, or the one named, and
// its files checked against this run before anything is loaded.
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

// How a total batch size was made, for messages.
std::string batch_words(int64_t total, int64_t per_device, int64_t processes,
                        int64_t accumulation) {
  return fmt::format("{} ({} per device x {} process{} x {} accumulation)", total, per_device,
                     processes, processes == 1 ? "" : "es", accumulation);
}

// An argument with its paths resolved (realpath, where the file exists): dataset_dir,
// model_name_or_path, the data files, the tokenizer and dataset_config's path name the same data
// however they are written.
json located(const std::string& key, json value) {
  auto real = [](const json& path) -> json {
    if (!path.is_string() || path.get<std::string>().empty()) return path;
    char resolved[PATH_MAX];
    if (::realpath(path.get<std::string>().c_str(), resolved) == nullptr) return path;
    return std::string(resolved);
  };
  for (const char* path_key : {"dataset_dir", "model_name_or_path", "train_file", "validation_file",
                               "tokenizer_name", "config_name"}) {
    if (key == path_key) return real(value);
  }
  if (key == "dataset_config" && value.is_object() && value.contains("path")) {
    value["path"] = real(value["path"]);
  }
  return value;
}

}  // namespace

namespace checkpoint {

int64_t metadata_integer(const io::Metadata& metadata, const std::string& key,
                         const std::string& source) {
  auto it = metadata.find(key);
  if (it != metadata.end() && !it->second.empty()) {
    char* end = nullptr;
    errno = 0;
    long long value = std::strtoll(it->second.c_str(), &end, 10);
    if (errno == 0 && *end == '\0' && value >= 0) return value;
  }
  throw InputError(fmt::format("{}: its metadata has no integer {}", source, key));
}

const torch::Tensor& named_tensor(const io::NamedTensors& tensors, const std::string& name,
                                  const std::string& source) {
  for (const auto& [key, value] : tensors) {
    if (key == name) return value;
  }
  throw InputError(fmt::format("{}: it has no tensor {}", source, name));
}

// A one-element tensor's value (a loss sum), or an InputError naming the file.
double scalar_value(const io::NamedTensors& tensors, const std::string& name,
                    const std::string& source) {
  const torch::Tensor& t = named_tensor(tensors, name, source);
  if (t.numel() != 1 || !t.is_floating_point()) {
    throw InputError(fmt::format("{}: {} is not one floating-point number", source, name));
  }
  return t.to(torch::kDouble).item<double>();
}

// "checkpoint-12" of "/old/place/checkpoint-12" under `output_dir`: a best checkpoint recorded by
// a run that lived elsewhere (a copied or moved output_dir) is looked for here, never there.
std::optional<std::string> reroot(const std::optional<std::string>& path,
                                  const std::string& output_dir) {
  if (!path) return std::nullopt;
  std::optional<int64_t> step = checkpoint_step(*path);
  if (!step) return std::nullopt;
  return checkpoint_path(output_dir, *step);
}

}  // namespace checkpoint

std::optional<Trainer::Resumable> Trainer::checkpoint_to_resume(
    const std::optional<std::string>& requested) const {
  std::optional<std::string> wanted = requested ? requested : args_.resume_from_checkpoint();
  const bool newest = !wanted || *wanted == "true";
  if (!args_.save_on_each_node() || !newest || accelerator_->num_processes() == 1)
    return newest_or_requested_checkpoint(requested);
  // save_on_each_node: every node finds the newest of its own copies; they resume from the
  // newest step that every node has (a node stopped inside a save may lack the last one). A
  // copy that one node cannot resume stops every node, not that one alone.
  auto largest = [&](double value) {
    return accelerator_
        ->reduce(torch::tensor({value}, torch::kDouble).to(device()), Reduction::kMax)
        .item<double>();
  };
  // Every node learns whether one could not go on (each collective here runs on every node).
  auto agree_no_problem = [&](const std::string& problem) {
    if (largest(problem.empty() ? 0.0 : 1.0) > 0) {
      if (!problem.empty()) throw InputError(problem);
      // A PeerFailure (exit code 3): the launcher names the node that failed, not this echo of it.
      throw PeerFailure(
          "save_on_each_node: another node cannot resume from its copy of the checkpoint (its "
          "error says why)");
    }
  };
  std::optional<Resumable> found;
  std::string problem;
  try {
    found = newest_or_requested_checkpoint(requested);
  } catch (const InputError& e) {
    problem = e.what();
  }
  agree_no_problem(problem);
  const int64_t mine = found ? found->manifest.global_step : -1;
  const auto agreed = static_cast<int64_t>(-largest(-static_cast<double>(mine)));
  if (agreed != mine) {
    const std::string dir = checkpoint_path(args_.output_dir(), agreed);
    if (agreed < 0) {
      problem = fmt::format(
          "save_on_each_node: a node has no checkpoint in output_dir {} while this one has {}; "
          "copy it there, or start over without resuming",
          args_.output_dir(), found->dir);
    } else if (!base::is_directory(dir)) {
      problem = fmt::format(
          "save_on_each_node: the nodes' newest common checkpoint is step {}, which {} lacks on "
          "this node",
          agreed, dir);
    } else {
      try {
        found = Resumable{dir, verify_checkpoint(dir)};
      } catch (const InputError& e) {
        problem = e.what();
      }
    }
  }
  agree_no_problem(problem);
  return found;
}

std::optional<Trainer::Resumable> Trainer::newest_or_requested_checkpoint(
    const std::optional<std::string>& requested) const {
  std::optional<std::string> wanted = requested ? requested : args_.resume_from_checkpoint();
  // A rank restarted by the launcher (torchrun's --max-restarts) continues from the newest good
  // checkpoint, or starts over when there is none yet.
  const int restart_count = accelerator_->restart_count();
  const bool restarted = restart_count > 0;
  if (!wanted && !restarted) return std::nullopt;
  const bool newest = !wanted || *wanted == "true";
  if (!newest) return Resumable{*wanted, verify_checkpoint(*wanted)};
  std::vector<CheckpointDir> found = list_checkpoints(args_.output_dir());
  std::vector<std::string> problems;
  for (auto it = found.rbegin(); it != found.rend(); ++it) {
    Manifest manifest;
    try {
      manifest = verify_checkpoint(it->path);
    } catch (const InputError& e) {
      problems.push_back(e.what());
      continue;
    }
    if (!problems.empty() && state_.is_world_process_zero) {
      base::warn("{}; resuming from {} instead", problems.front(), it->path);
    }
    return Resumable{it->path, std::move(manifest)};
  }
  if (restarted && !wanted && found.empty()) {
    if (state_.is_world_process_zero) {
      std::fprintf(stderr, "trainer: restart %d: no checkpoint in %s yet; training from step 0\n",
                   restart_count, args_.output_dir().c_str());
      std::fflush(stderr);
    }
    return std::nullopt;
  }
  if (found.empty()) {
    throw InputError(fmt::format(
        "resume_from_checkpoint true: output_dir {} holds no checkpoint-<step> folder to resume "
        "from",
        args_.output_dir()));
  }
  throw InputError(fmt::format("resume_from_checkpoint true: no good checkpoint in {} ({})",
                               args_.output_dir(), problems.front()));
}

void Trainer::check_resumable(const Resumable& checkpoint) const {
  const std::string& dir = checkpoint.dir;
  const Manifest& manifest = checkpoint.manifest;
  if (manifest.save_only_model) {
    throw InputError(fmt::format(
        "checkpoint {} was saved with save_only_model (no optimizer, schedule or random state); "
        "it cannot be resumed (load its model.safetensors instead)",
        dir));
  }
  if (manifest.model_name != args_.model_name()) {
    throw InputError(fmt::format("checkpoint {} holds a {} model; this run trains {}", dir,
                                 manifest.model_name, args_.model_name()));
  }
  // What makes the model and the data: a checkpoint of another model_config or data set whose
  // tensors happen to have the same shapes would load, and train something else.
  const json saved = base::read_json_object(base::join_path(dir, kArgsFile));
  const json now = json::parse(args_.to_json());
  for (const char* key :
       {"model_name", "model_name_or_path", "model_config", "dataset_name", "dataset_config",
        "dataset_dir", "max_train_samples", "train_file", "validation_file",
        "validation_split_percentage", "block_size", "keep_linebreaks", "text_column_name",
        "tokenizer_name", "config_name", "model_type", "torch_dtype"}) {
    if (!saved.contains(key)) continue;  // a checkpoint from before the key existed
    const json here = now.contains(key) ? now[key] : json();
    // Compared unordered ({"a": 1, "b": 2} is {"b": 2, "a": 1}), and paths as the files they name.
    if (nlohmann::json::parse(located(key, saved[key]).dump()) ==
        nlohmann::json::parse(located(key, here).dump())) {
      continue;
    }
    throw InputError(fmt::format(
        "checkpoint {} was trained with {} {}; this run has {}: resume with the same {} (a run's "
        "model and data cannot change midway), or start a new run",
        dir, key, base::shown(saved[key]), base::shown(here), key));
  }
  // The optimizer: optimizer.pt holds its state (adamw_torch and adamw_torch_fused are the same
  // AdamW). A checkpoint from before optim existed was trained with AdamW.
  const std::string saved_optim = saved.contains("optim") && saved["optim"].is_string()
                                      ? saved["optim"].get<std::string>()
                                      : std::string("adamw_torch_fused");
  auto family = [](const std::string& name) {
    return name.rfind("adamw", 0) == 0 ? std::string("adamw") : name;
  };
  if (family(saved_optim) != family(args_.optim())) {
    throw InputError(fmt::format(
        "checkpoint {} was trained with optim {}; this run has {}: resume with optim {} (its "
        "optimizer state is {}'s), or start a new run",
        dir, saved_optim, args_.optim(), saved_optim, saved_optim));
  }
  const int64_t processes = accelerator_->num_processes();
  if (manifest.total_batch_size != total_batch_size_) {
    throw InputError(fmt::format(
        "checkpoint {} was trained with a total batch size of {} ({} process{}); this run's is {}: "
        "resume with the same total batch size",
        dir, manifest.total_batch_size, manifest.world_size, manifest.world_size == 1 ? "" : "es",
        batch_words(total_batch_size_, train_batch_size_, processes,
                    args_.gradient_accumulation_steps())));
  }
}

}  // namespace trainer
