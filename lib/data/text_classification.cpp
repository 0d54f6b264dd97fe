// run_glue.py's text classification data as a DataSource, its examples and its padding collator.
#include "lib/data/text_classification.h"

#include <stdexcept>

#include <fmt/format.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/tokenizers/tokenizer.h"

namespace trainer::data {

TextClassificationDataset::TextClassificationDataset(TextClassificationSplit rows)
    : rows_(std::move(rows)) {}

Example TextClassificationDataset::get(int64_t index) const {
  const std::vector<int32_t>& ids = rows_.input_ids.at(static_cast<size_t>(index));
  torch::Tensor input = torch::from_blob(const_cast<int32_t*>(ids.data()),
                                         {static_cast<int64_t>(ids.size())}, torch::kInt)
                            .to(torch::kLong);
  torch::Tensor target = rows_.classes.empty()
                             ? torch::tensor(rows_.targets.at(static_cast<size_t>(index)))
                             : torch::tensor(rows_.classes.at(static_cast<size_t>(index)));
  return {input, target};
}

Batch ClassificationCollator::operator()(const std::vector<Example>& examples) const {
  if (examples.empty()) throw std::invalid_argument("ClassificationCollator: no examples");
  int64_t longest = 0;
  for (const auto& e : examples) longest = std::max(longest, e.input.size(0));
  const int64_t rows = static_cast<int64_t>(examples.size());
  torch::Tensor ids = torch::full({rows, longest}, pad_token_id, torch::kLong);
  torch::Tensor mask = torch::zeros({rows, longest}, torch::kLong);
  std::vector<torch::Tensor> targets;
  for (int64_t i = 0; i < rows; ++i) {
    const torch::Tensor& input = examples[static_cast<size_t>(i)].input;
    ids[i].slice(0, 0, input.size(0)).copy_(input);
    mask[i].slice(0, 0, input.size(0)).fill_(1);
    targets.push_back(examples[static_cast<size_t>(i)].target);
  }
  return {{"input_ids", ids}, {"attention_mask", mask}, {"labels", torch::stack(targets)}};
}

TextClassificationSource::TextClassificationSource(TextClassificationSourceOptions options)
    : options_(std::move(options)) {}

const TextClassificationData& TextClassificationSource::data() {
  if (!data_) data_ = prepare_text_classification(options_, *options_.tokenizer);
  return *data_;
}

const LabelPlan& TextClassificationSource::labels() { return data().labels; }

DataInfo TextClassificationSource::info() {
  const LabelPlan& plan = labels();
  return {plan.regression ? TaskKind::kRegression : TaskKind::kClassification,
          {options_.max_length},
          plan.num_labels};
}

std::shared_ptr<const Dataset> TextClassificationSource::split(const std::string& split,
                                                               std::optional<int64_t> max_samples) {
  const bool train = split == "train";
  if ((train ? options_.train_file : options_.validation_file).empty()) {
    throw InputError(
        train ? "text classification trains on train_file: give one (a CSV or JSON file with a "
                "'label' column)"
              : "text classification evaluates on validation_file: give one (run_glue: "
                "evaluation requires a validation dataset)");
  }
  TextClassificationSplit rows = train ? data().train : data().eval;
  if (max_samples && *max_samples < rows.size()) {
    const auto n = static_cast<size_t>(*max_samples);
    rows.input_ids.resize(n);
    if (!rows.classes.empty()) rows.classes.resize(n);
    if (!rows.targets.empty()) rows.targets.resize(n);
  }
  return std::make_shared<TextClassificationDataset>(std::move(rows));
}

DataCollator TextClassificationSource::collator() const {
  return ClassificationCollator{options_.pad_token_id};
}

std::string TextClassificationSource::location() const {
  return options_.train_file.empty() ? options_.validation_file : options_.train_file;
}

std::string TextClassificationSource::split_name(const std::string& split) const {
  return split == "train" ? "train_file " + options_.train_file + "'s train"
                          : "validation_file " + options_.validation_file + "'s";
}

std::unique_ptr<TextClassificationSource> make_text_classification_source(
    TextClassificationSourceOptions options) {
  if (options.train_file.empty() && options.validation_file.empty()) {
    throw InputError("text classification needs train_file or validation_file");
  }
  if (options.max_length < 1) {
    throw InputError(
        fmt::format("block_size {} is not allowed (a positive integer: the longest "
                    "row in tokens, run_glue's max_seq_length)",
                    options.max_length));
  }
  if (options.pad_token_id < 0) {
    throw InputError(
        "text classification pads its batches with config.json's pad_token_id, or the "
        "tokenizer's pad_token: the classifier and its tokenizer name none; set pad_token_id in "
        "config.json");
  }
  if (!options.tokenizer) throw std::invalid_argument("text classification: no tokenizer");
  return std::make_unique<TextClassificationSource>(std::move(options));
}

}  // namespace trainer::data
