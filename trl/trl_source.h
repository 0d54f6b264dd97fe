// What every TRL trainer's data source is (`trainer sft`, `trainer dpo` and the next ones): the
// files, the tokenizer and chat template, the pad token and the node's cache, as TrlSourceOptions;
// and TrlSource, the DataSource that prepares each split once per node (the others read the
// node's cache, trl/data_cache.h), reports what the data became, and hands out the trainer's
// Dataset. A trainer says only what is its own: how a split is prepared and reported, and the
// Dataset its rows make.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/data/registry.h"
#include "lib/tokenizers/chat_template.h"
#include "lib/tokenizers/tokenizer.h"
#include "trainer/training_args.h"
#include "trl/data_cache.h"
#include "trl/data_files.h"

namespace trainer::trl {

struct TrlSourceOptions {
  std::string command;  // "sft", "dpo": the command messages name, the cache's folder
  std::string train_file, eval_file;
  int64_t pad_token_id = 0;
  std::optional<int64_t> pad_to_multiple_of;
  std::shared_ptr<const tokenizers::Tokenizer> tokenizer;
  std::optional<tokenizers::ChatTemplate> chat_template;
  // Where the node's first process caches the prepared splits (cache_dir "": nowhere), and
  // whether it prepares them again (overwrite_cache).
  data::LoadContext context;
  bool overwrite_cache = false;
  bool is_main = true;  // prints what the data became

  const tokenizers::ChatTemplate* chat() const { return chat_template ? &*chat_template : nullptr; }
};

// The options every TRL config gives its source, with the model's tokenizer and its folder:
// train_file / validation_file or dataset_name (with dataset_config and the split names), the pad
// token (pad_token, else the tokenizer's, else its eos token, as TRL), the chat template
// (chat_template_path's, else the tokenizer folder's). Throws InputError for a pad_token or
// eos_token the vocabulary lacks, a chat_template_path that is not a template, and data named
// twice or not at all.
TrlSourceOptions trl_source_options(const TrainingArguments& args,
                                    std::shared_ptr<const tokenizers::Tokenizer> tokenizer,
                                    const std::string& tokenizer_dir, const std::string& command);

// A prepared split's rows as a Dataset: the trainer's Dataset says what example a row is.
template <typename Row>
class RowDataset : public data::Dataset {
 public:
  explicit RowDataset(std::vector<Row> rows) : rows_(std::move(rows)) {}
  int64_t size() const override { return static_cast<int64_t>(rows_.size()); }
  const std::vector<Row>& rows() const { return rows_; }

 protected:
  std::vector<Row> rows_;
};

// A trainer's options (a TrlSourceOptions with its own beside, its `data` a TrlDataOptions) with
// the common ones from `args` (trl_source_options; max_length and truncation_mode), its own left
// at their defaults.
template <typename Options>
Options source_options(const TrainingArguments& args,
                       std::shared_ptr<const tokenizers::Tokenizer> tokenizer,
                       const std::string& tokenizer_dir, const std::string& command) {
  Options options;
  static_cast<TrlSourceOptions&>(options) =
      trl_source_options(args, std::move(tokenizer), tokenizer_dir, command);
  options.data.max_length = args.max_length();
  options.data.truncation_mode = args.truncation_mode();
  return options;
}

// A split's records as TRL reads them, the first `max_samples` when set.
std::vector<nlohmann::ordered_json> split_records(const std::string& path,
                                                  std::optional<int64_t> max_samples);

// `Options` is the trainer's options, a TrlSourceOptions with its own beside; `Data` holds the
// prepared `rows`, each as long as row_length says, which make a `RowsDataset`.
template <typename Data, typename Options, typename RowsDataset>
class TrlSource : public data::DataSource {
 public:
  data::DataInfo info() override {
    data::DataInfo info;
    info.task = data::TaskKind::kCausalLM;
    info.input_shape = {max_length().value_or(longest_)};
    info.num_labels = options_.tokenizer->vocab_size();
    return info;
  }

  std::shared_ptr<const data::Dataset> split(const std::string& split,
                                             std::optional<int64_t> max_samples) override {
    const std::string& path = split == "train" ? options_.train_file : options_.eval_file;
    if (path.empty()) {
      throw InputError(fmt::format(
          "trainer {}: no {} data (give {})", options_.command,
          split == "train" ? "training" : "evaluation",
          split == "train" ? "train_file, or dataset_name a file or folder"
                           : "validation_file, or dataset_name a folder with a test file"));
    }
    // The node's first process prepares the split and caches it; the others read the cache.
    std::optional<Data> prepared;
    bool from_cache = false;
    const std::string cache = cache_path(path, cache_settings(split, max_samples));
    options_.context.run_first([&] {
      if (!cache.empty() && !options_.overwrite_cache) read_data_cache(cache, prepared);
      from_cache = prepared.has_value();
      if (prepared) return;
      prepared = prepare(split, path, max_samples);
      if (!cache.empty() && options_.context.local_main) {
        try {
          write_data_cache(cache, *prepared);
        } catch (const std::exception&) {
          // A cache that cannot be written costs the next run the preparation, nothing more.
        }
      }
    });
    if (options_.is_main) report(split, path, *prepared, from_cache);
    for (const auto& row : prepared->rows) longest_ = std::max(longest_, row_length(row));
    return make_dataset(*prepared);
  }

  std::string location() const override { return options_.train_file; }
  std::string split_name(const std::string& split) const override {
    return split == "train" ? "train_file " + options_.train_file + "'s train"
                            : "eval file " + options_.eval_file + "'s";
  }

 protected:
  explicit TrlSource(Options options) : options_(std::move(options)) {}

  // The length the rows are cut to (none: the longest row seen is the input shape).
  virtual std::optional<int64_t> max_length() const = 0;
  // Every option that changes a split's rows, as text (the cache key's).
  virtual std::string cache_settings(const std::string& split,
                                     std::optional<int64_t> max_samples) const = 0;
  // TRL's preparation of one split's file.
  virtual Data prepare(const std::string& split, const std::string& path,
                       std::optional<int64_t> max_samples) const = 0;
  // The split's Dataset of the prepared data (default: its rows alone).
  virtual std::shared_ptr<const data::Dataset> make_dataset(Data& prepared) const {
    return std::make_shared<RowsDataset>(std::move(prepared.rows));
  }
  // One line on what the data became; warnings with the counts where TRL drops rows silently.
  virtual void report(const std::string& split, const std::string& path, const Data& data,
                      bool from_cache) const = 0;

 private:
  // The split's cache file ("" without a cache folder).
  std::string cache_path(const std::string& path, const std::string& settings) const {
    if (options_.context.cache_dir.empty()) return "";
    const std::string key =
        data_cache_key(path, options_.tokenizer->fingerprint(),
                       options_.chat_template ? options_.chat_template->source() : "", settings);
    return base::join_path(base::join_path(options_.context.cache_dir, options_.command),
                           key + ".bin");
  }

  int64_t longest_ = 0;

 protected:
  Options options_;
};

}  // namespace trainer::trl
