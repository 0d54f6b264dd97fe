// What a Trainer leaves in output_dir: model.safetensors (and model.pt for a TorchScript model),
// trainer_state.json, <split>_results.json and all_results.json, and the printed metrics.
#include <filesystem>

#include <torch/torch.h>

#include "lib/base/files.h"
#include "lib/base/warn.h"
#include "lib/io/safetensors.h"
#include "lib/models/torchscript.h"
#include "trainer/callbacks.h"
#include "trainer/checkpoint_manifest.h"
#include "trainer/trainer.h"

namespace trainer {

using json = nlohmann::ordered_json;

namespace {

// A metric as Transformers writes it: the memory metrics (bytes) as whole numbers.
json metric_json(const std::string& key, double value) {
  if (key.find("_mem_") != std::string::npos) return static_cast<int64_t>(value);
  return value;
}

}  // namespace

void Trainer::save_model(const std::string& dir, base::WriteBatch* batch) const {
  refuse_nonfinite_weights();
  // A sharded model's full weights are gathered on the main process for it (every process
  // takes part); otherwise every process holds them already.
  accelerator_->with_full_params([&] { write_model(dir, batch); }, /*rank0_only=*/true);
}

void Trainer::write_model(const std::string& dir, base::WriteBatch* batch) const {
  if (!saves_here()) return;
  std::string target = dir.empty() ? args_.output_dir() : dir;
  model_->save_weights(target,
                       io::parse_file_size(args_.save_safetensors_max_shard_size(),
                                           "argument save_safetensors_max_shard_size:"),
                       batch);
  for (const auto& [name, contents] : model_->pretrained_files) {
    base::write_file_atomic(base::join_path(target, name), contents, batch);
  }
  // A model from Python goes back as it came, with the trained weights: model.pt.
  if (auto* script = dynamic_cast<const models::TorchScriptModel*>(model_.get())) {
    script->save(base::join_path(target, "model.pt"), batch);
  }
}

void Trainer::remove_earlier_checkpoints() const {
  if (!accelerator_->is_main_process()) return;
  const std::string aside = base::join_path(args_.output_dir(), kEarlierCheckpointsDir);
  if (!base::remove_tree(aside))
    base::warn("could not remove {} (this run's results are saved)", aside);
}

void Trainer::save_state(base::WriteBatch* batch) const {
  if (!accelerator_->is_main_process()) return;
  state_.save_to_json(base::join_path(args_.output_dir(), "trainer_state.json"), batch);
}

void Trainer::log_metrics(const std::string& split, const Metrics& metrics) const {
  if (!accelerator_->is_main_process()) return;
  std::fputs(format_metrics(split, metrics).c_str(), stdout);
  std::fflush(stdout);
}

void Trainer::save_metrics(const std::string& split, const Metrics& metrics,
                           base::WriteBatch* batch) const {
  if (!accelerator_->is_main_process()) return;
  json values;
  for (const auto& [key, value] : metrics) values[key] = metric_json(key, value);
  base::write_json(base::join_path(args_.output_dir(), split + "_results.json"), values, batch);
  std::string all_path = base::join_path(args_.output_dir(), "all_results.json");
  if (!all_results_) {
    all_results_ = json::object();
    if (base::exists(all_path)) {
      all_results_ = base::read_json_object(all_path);  // a damaged file is not replaced
    }
  }
  for (const auto& [key, value] : metrics) (*all_results_)[key] = metric_json(key, value);
  base::write_json(all_path, *all_results_, batch);
}

}  // namespace trainer
