// CSV splits as tensors, with the gather-per-batch fast path.
#include "datasets/csv.h"

#include <algorithm>

namespace trainer::data {

CsvDataset::CsvDataset(torch::Tensor x, torch::Tensor labels)
    : x_(std::move(x)), labels_(std::move(labels)) {
  TORCH_CHECK(x_.dim() == 2 && x_.scalar_type() == torch::kFloat,
              "CsvDataset: x must be float [N, F]");
  TORCH_CHECK(labels_.dim() == 1 && labels_.size(0) == x_.size(0),
              "CsvDataset: labels must be [N] with N = rows of x");
}

CsvDataset::CsvDataset(const TabularSplit& split, int64_t num_features, bool regression,
                       std::optional<int64_t> max_samples) {
  int64_t n = std::min(split.size, max_samples.value_or(split.size));
  n = std::max<int64_t>(n, 0);
  x_ = torch::from_blob(const_cast<float*>(split.x.data()), {n, num_features}, torch::kFloat)
           .clone();
  labels_ =
      regression
          ? torch::from_blob(const_cast<float*>(split.targets.data()), {n}, torch::kFloat).clone()
          : torch::from_blob(const_cast<int64_t*>(split.classes.data()), {n}, torch::kLong).clone();
}

Example CsvDataset::get(int64_t index) const { return {x_[index], labels_[index]}; }

std::optional<Batch> CsvDataset::get_batch(const torch::Tensor& indices) const {
  return Batch{{"x", x_.index_select(0, indices)}, {"labels", labels_.index_select(0, indices)}};
}

std::shared_ptr<const Dataset> CsvDataset::to_device(const torch::Device& device,
                                                     int64_t max_bytes) const {
  if (x_.nbytes() + labels_.nbytes() > static_cast<size_t>(std::max<int64_t>(0, max_bytes)))
    return nullptr;
  return std::make_shared<CsvDataset>(x_.to(device), labels_.to(device));
}

}  // namespace trainer::data
