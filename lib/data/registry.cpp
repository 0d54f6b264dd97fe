// The data-source registry, one factory (<name>_source) per row of names.h: MNIST-format image
// folders (fashion_mnist, mnist), CSV tables (csv, lib/data/csv.h) and byte-level text (text,
// lib/data/text.h).
#include "lib/data/registry.h"

#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/base/errors.h"
#include "lib/base/json_fields.h"
#include "lib/data/csv.h"
#include "lib/data/mnist.h"
#include "lib/data/mnist_defaults.h"
#include "lib/data/text.h"

namespace trainer::data {
namespace {

// MNIST's four IDX files in a directory; eval is the t10k split. Decoded once per machine into
// the cache that every process maps (MnistDataset::load_shared).
class MnistSource : public DataSource {
 public:
  MnistSource(std::string dir, LoadContext context)
      : dir_(std::move(dir)), context_(std::move(context)) {}

  DataInfo info() override {
    std::vector<int64_t> shape = {1, 28, 28};
    if (loaded_) shape = {1, loaded_->images().size(1), loaded_->images().size(2)};
    return {TaskKind::kClassification, shape, 10};
  }
  std::shared_ptr<const Dataset> split(const std::string& split,
                                       std::optional<int64_t> max_samples) override {
    std::shared_ptr<MnistDataset> dataset;
    context_.run_first([&] {
      dataset = MnistDataset::load_shared(dir_, split == "train" ? "train" : "test",
                                          max_samples.value_or(-1), context_.cache_dir,
                                          /*verify=*/context_.local_main);
    });
    if (!loaded_) loaded_ = dataset;
    return dataset;
  }
  std::string location() const override { return dir_; }
  std::string split_name(const std::string& split) const override {
    return split == "eval" ? "test" : split;
  }

 private:
  std::string dir_;
  LoadContext context_;
  std::shared_ptr<MnistDataset> loaded_;
};

using Factory = std::unique_ptr<DataSource> (*)(base::JsonFields& options,
                                                const nlohmann::ordered_json& config,
                                                const std::string& dir, LoadContext& context);

std::unique_ptr<DataSource> fashion_mnist_source(base::JsonFields& options,
                                                 const nlohmann::ordered_json&,
                                                 const std::string& dir, LoadContext& context) {
  options.finish();
  return std::make_unique<MnistSource>(dir.empty() ? kFashionMnistDir : dir, std::move(context));
}

std::unique_ptr<DataSource> mnist_source(base::JsonFields& options, const nlohmann::ordered_json&,
                                         const std::string& dir, LoadContext& context) {
  options.finish();
  if (dir.empty()) {
    throw InputError(
        "dataset_name mnist needs dataset_dir: a directory with MNIST's four IDX files");
  }
  return std::make_unique<MnistSource>(dir, std::move(context));
}

std::unique_ptr<DataSource> csv_source(base::JsonFields&, const nlohmann::ordered_json& config,
                                       const std::string& dir, LoadContext&) {
  return make_csv_source(dir, config);
}

std::unique_ptr<DataSource> text_source(base::JsonFields& options, const nlohmann::ordered_json&,
                                        const std::string& dir, LoadContext&) {
  return make_text_source(read_text_options(options, dir));
}

// <name>_source for each data set of names.h.
const std::map<std::string, Factory>& factories() {
#define TRAINER_DATASET_FACTORY(name) {#name, &name##_source},
  static const std::map<std::string, Factory> table = {TRAINER_DATASETS(TRAINER_DATASET_FACTORY)};
#undef TRAINER_DATASET_FACTORY
  return table;
}

}  // namespace

std::unique_ptr<DataSource> make_data_source(const std::string& name, const std::string& dir,
                                             const nlohmann::ordered_json& config,
                                             LoadContext context) {
  auto options = base::JsonFields::options("dataset_config", name, config);
  auto it = factories().find(name);
  if (it == factories().end()) {
    throw InputError(fmt::format("dataset_name: unknown data set '{}' (allowed: {})", name,
                                 fmt::join(dataset_names(), ", ")));
  }
  return it->second(options, config, dir, context);
}

}  // namespace trainer::data
