// Tabular data sets from CSV files (dataset_name "csv"): a table's rows as {"x": float [B, F],
// "labels": int64 [B] (classification) or float [B] (regression)}, held as two tensors.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "lib/data/csv_table.h"
#include "lib/data/dataset.h"
#include "lib/data/registry.h"

namespace trainer::data {

// A split of a table held as tensors.
class CsvDataset : public Dataset {
 public:
  // x: float [N, F]; labels: int64 [N] (class ids) or float [N] (targets), on one device.
  CsvDataset(torch::Tensor x, torch::Tensor labels);
  // The first `max_samples` rows of `split` (all when nullopt or larger), copied into tensors.
  CsvDataset(const TabularSplit& split, int64_t num_features, bool regression,
             std::optional<int64_t> max_samples = std::nullopt);

  int64_t size() const override { return x_.size(0); }
  // input: float [F]; target: int64 or float scalar.
  Example get(int64_t index) const override;
  // {"x": float [B, F], "labels": [B]} in one index_select each.
  std::optional<Batch> get_batch(const torch::Tensor& indices) const override;
  torch::Device device() const override { return x_.device(); }
  std::shared_ptr<const Dataset> to_device(const torch::Device& device,
                                           int64_t max_bytes) const override;

  const torch::Tensor& x() const { return x_; }
  const torch::Tensor& labels() const { return labels_; }

 private:
  torch::Tensor x_, labels_;
};

// dataset_name "csv": a CSV file with a header, with dataset_config options
//   path                 the file (required); relative to dataset_dir when that is set
//   label                the target column (default "label")
//   features             the feature columns, a list (default: every column but the label)
//   task                 "classification" (default) or "regression"
//   validation_fraction  the share of rows held out as the eval split, in [0, 1) (default 0.2)
//   seed                 the split's seed (default 42)
// The file is read here (see make_tabular for what it must hold); info() is {task, {features},
// classes or 1}. Throws InputError for an unknown option (naming the nearest), a bad value, or a
// bad file (one line, with its line number).
std::unique_ptr<DataSource> make_csv_source(const std::string& dir,
                                            const nlohmann::ordered_json& config);

}  // namespace trainer::data
