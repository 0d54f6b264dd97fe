// run_glue.py's text classification for a sequence classifier: its data and its config's labels.
#include <algorithm>

#include <fmt/format.h>

#include "apps/trainer/run_setup.h"
#include "lib/base/errors.h"
#include "lib/data/text_classification.h"

namespace trainer::cli {

namespace {

// config.json's label2id (name -> id), or id2label's names where there is no label2id.
std::map<std::string, int64_t> config_label2id(const models::HfConfig& config) {
  std::map<std::string, int64_t> label2id;
  const auto& json = config.json;
  if (json.contains("label2id") && json["label2id"].is_object()) {
    for (const auto& [name, id] : json["label2id"].items()) {
      if (id.is_number_integer()) label2id[name] = id.get<int64_t>();
    }
  } else if (json.contains("id2label") && json["id2label"].is_object()) {
    for (const auto& [id, name] : json["id2label"].items()) {
      const std::string text = name.is_string() ? name.get<std::string>() : name.dump();
      label2id[text] = std::stoll(id);
    }
  }
  return label2id;
}

}  // namespace

bool uses_text_classification(const TrainingArguments& args, const ModelSource& model) {
  return uses_text_files(args) && model.config && model.config->sequence_classification;
}

std::unique_ptr<data::DataSource> text_classification_source(const TrainingArguments& args,
                                                             const ModelSource& model) {
  const models::HfConfig& config = *model.config;
  data::TextClassificationSourceOptions options;
  options.train_file = args.train_file().value_or("");
  options.validation_file = args.validation_file().value_or("");
  options.max_length =
      args.block_size().value_or(std::min<int64_t>(128, config.max_position_embeddings));
  if (options.max_length > config.max_position_embeddings) {
    throw InputError(fmt::format(
        "block_size {} is longer than the model's {} positions (max_position_embeddings)",
        options.max_length, config.max_position_embeddings));
  }
  options.model_label2id = config_label2id(config);
  options.model_num_labels = config.num_labels;
  options.tokenizer = model.tokenizer;
  // DataCollatorWithPadding pads with the tokenizer's pad token, which run_glue's classifiers
  // find by config.json's pad_token_id: that one first.
  options.pad_token_id =
      config.pad_token_id >= 0 ? config.pad_token_id : model.tokenizer->pad_token_id().value_or(-1);
  return data::make_text_classification_source(std::move(options));
}

void adopt_data_labels(ModelSource& model, data::DataSource& source) {
  auto* classification = dynamic_cast<data::TextClassificationSource*>(&source);
  if (!classification || !model.config) return;
  const data::LabelPlan& plan = classification->labels();
  models::HfConfig& config = *model.config;
  if (!plan.regression && !plan.from_model) {
    config.json["label2id"] = data::label2id_json(plan);
    config.json["id2label"] = data::id2label_json(plan);
  }
  if (config.problem_type.empty()) {
    config.problem_type = plan.regression ? "regression" : "single_label_classification";
    config.json["problem_type"] = config.problem_type;
  }
}

}  // namespace trainer::cli
