// Data sets by name (dataset_name) with their options (dataset_config): a DataSource gives what a
// model must fit (DataInfo), the train and eval splits, and the collator their batches need.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "lib/data/dataset.h"
#include "lib/data/names.h"

namespace trainer::data {

// How a source loads on one of several processes: `run_first(load)` runs `load` on the node's
// first process before the others (it writes caches they then read), `local_main` says whether
// this is that process, and `cache_dir` is where caches go ("" for none).
struct LoadContext {
  std::function<void(const std::function<void()>&)> run_first = [](const auto& load) { load(); };
  bool local_main = true;
  std::string cache_dir;
};

// One dataset_name with its dataset_config.
class DataSource {
 public:
  virtual ~DataSource() = default;
  // What a model must fit: task, one example's input shape, classes / targets / vocabulary.
  virtual DataInfo info() = 0;
  // "train" or "eval": the split's examples, the first `max_samples` when set. Throws InputError
  // for a missing or bad file.
  virtual std::shared_ptr<const Dataset> split(const std::string& split,
                                               std::optional<int64_t> max_samples) = 0;
  // The collator these batches need (null: the dataset's own batches, or default_collate).
  virtual DataCollator collator() const { return nullptr; }
  // Where the data comes from, for messages: a directory or file.
  virtual std::string location() const = 0;
  // What the data set calls `split` ("train" or "eval"), for messages: MNIST's eval split is
  // "test".
  virtual std::string split_name(const std::string& split) const { return split; }
};

// The source `name` reads from `dir` (dataset_dir; "" for the source's default) with `config`.
// Throws InputError for an unknown name (listing the known ones) or option (naming the nearest
// known one), or a bad value.
std::unique_ptr<DataSource> make_data_source(const std::string& name, const std::string& dir,
                                             const nlohmann::ordered_json& config,
                                             LoadContext context = {});

}  // namespace trainer::data
