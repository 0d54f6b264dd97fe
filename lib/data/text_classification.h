// Text classification as run_glue.py runs it without a task name: train_file and validation_file
// (CSV or JSON) prepared by text_classification_data.h, each row's ids and label an example,
// DataCollatorWithPadding's batches (right padding, an attention mask, "labels"), as a DataSource.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/data/registry.h"
#include "lib/data/text_classification_data.h"

namespace trainer::tokenizers {
class Tokenizer;
}  // namespace trainer::tokenizers

namespace trainer::data {

struct TextClassificationSourceOptions : TextClassificationOptions {
  std::shared_ptr<const tokenizers::Tokenizer> tokenizer;
  // The id rows are padded with (config.json's pad_token_id, else the tokenizer's); -1: none.
  int64_t pad_token_id = -1;
};

// One split's rows: input ids of any lengths and a class id (int64) or a target (float32).
class TextClassificationDataset : public Dataset {
 public:
  explicit TextClassificationDataset(TextClassificationSplit rows);
  int64_t size() const override { return rows_.size(); }
  // input: int64 [L]; target: an int64 or float32 scalar.
  Example get(int64_t index) const override;

 private:
  TextClassificationSplit rows_;
};

// Transformers' DataCollatorWithPadding (padding_side right): {"input_ids": int64 [B, L] padded
// with pad_token_id to the batch's longest row, "attention_mask": int64, 1 on the rows' tokens,
// "labels": the targets stacked [B]}. Throws std::invalid_argument for an empty list.
struct ClassificationCollator {
  int64_t pad_token_id = 0;
  Batch operator()(const std::vector<Example>& examples) const;
};

// The source: task classification (num_labels classes) or regression (one target), input shape
// [max_length]. The files are read and tokenized on the first call that needs them (labels(),
// info(), split()). split("eval") without a validation_file, or "train" without a train_file, is
// an InputError, as run_glue's "--do_eval requires a validation dataset".
class TextClassificationSource : public DataSource {
 public:
  explicit TextClassificationSource(TextClassificationSourceOptions options);
  // The label plan (which ids the labels got; the names the config is given).
  const LabelPlan& labels();
  DataInfo info() override;
  std::shared_ptr<const Dataset> split(const std::string& split,
                                       std::optional<int64_t> max_samples) override;
  DataCollator collator() const override;
  std::string location() const override;
  std::string split_name(const std::string& split) const override;

 private:
  const TextClassificationData& data();

  TextClassificationSourceOptions options_;
  std::optional<TextClassificationData> data_;
};

// The source of `options`. Throws InputError for no file, a max_length below 1, or no pad id.
std::unique_ptr<TextClassificationSource> make_text_classification_source(
    TextClassificationSourceOptions options);

}  // namespace trainer::data
