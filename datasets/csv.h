// Tabular data sets from CSV files (dataset_name "csv"): a table's rows as {"x": float [B, F],
// "labels": int64 [B] (classification) or float [B] (regression)}, held as two tensors.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "datasets/csv_table.h"
#include "datasets/dataset.h"

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

}  // namespace trainer::data
