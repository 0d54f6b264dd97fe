// CSV splits as tensors, with the gather-per-batch fast path.
#include "lib/data/csv.h"

#include <algorithm>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/json_fields.h"

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

namespace {

class CsvSource : public DataSource {
 public:
  explicit CsvSource(TabularOptions options)
      : options_(std::move(options)), data_(load_tabular(options_)) {}

  DataInfo info() override {
    return {options_.regression ? TaskKind::kRegression : TaskKind::kClassification,
            {data_.num_features()},
            data_.num_labels()};
  }
  std::shared_ptr<const Dataset> split(const std::string& split,
                                       std::optional<int64_t> max_samples) override {
    return std::make_shared<CsvDataset>(split == "train" ? data_.train : data_.eval,
                                        data_.num_features(), options_.regression, max_samples);
  }
  std::string location() const override { return options_.path; }

 private:
  TabularOptions options_;
  TabularData data_;
};

}  // namespace

std::unique_ptr<DataSource> make_csv_source(const std::string& dir,
                                            const nlohmann::ordered_json& config) {
  auto reader = base::JsonFields::options("dataset_config", "csv", config);
  TabularOptions options;
  options.path = reader.string("path", "");
  options.label = reader.string("label", options.label);
  options.features = reader.strings("features", {});
  // Left out, the features are every column but the label; an empty list is a mistake.
  if (options.features.empty() && reader.has("features")) {
    reader.not_allowed("features", reader.at("features"),
                       "name at least one column (or leave features out for every column but the "
                       "label)");
  }
  options.regression =
      reader.choice("task", "classification", {"classification", "regression"}) == "regression";
  options.validation_fraction = reader.number("validation_fraction", options.validation_fraction,
                                              0.0, 1.0, /*max_open=*/true);
  options.seed = static_cast<uint64_t>(reader.integer("seed", 42, 0));
  reader.finish();
  if (!dir.empty() && !options.path.empty() && options.path[0] != '/') {
    options.path = base::join_path(dir, options.path);
  }
  return std::make_unique<CsvSource>(std::move(options));
}

}  // namespace trainer::data
