// The data-source registry: MNIST-format image folders (fashion_mnist, mnist), CSV tables
// (csv, lib/data/csv.h) and byte-level text (text, lib/data/text.h).
#include "lib/data/registry.h"

#include <fmt/format.h>

#include "lib/base/config_reader.h"
#include "lib/base/errors.h"
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

}  // namespace

std::unique_ptr<DataSource> make_data_source(const std::string& name, const std::string& dir,
                                             const nlohmann::ordered_json& config,
                                             LoadContext context) {
  base::ConfigReader options("dataset_config", name, config);
  if (name == "fashion_mnist" || name == "mnist") {
    options.finish();
    if (name == "mnist" && dir.empty()) {
      throw InputError(
          "dataset_name mnist needs dataset_dir: a directory with MNIST's four IDX files");
    }
    return std::make_unique<MnistSource>(dir.empty() ? kFashionMnistDir : dir, std::move(context));
  }
  if (name == "csv") return make_csv_source(dir, config);
  if (name == "text") return make_text_source(read_text_options(options, dir));
  throw InputError(fmt::format("dataset_name: unknown data set '{}' (allowed: {})", name,
                               fmt::join(dataset_names(), ", ")));
}

}  // namespace trainer::data
