// `trainer reward` (as `trl reward`): TrainingArguments with TRL's RewardConfig (its arguments
// and defaults), the preference pairs prepared as RewardTrainer prepares them, the model a
// sequence classifier of one label (a causal folder gets a fresh head, as
// AutoModelForSequenceClassification gives it), and trl::RewardTrainer on `trainer train`'s run.
#include <memory>
#include <string>

#include <fmt/format.h>
#include <torch/torch.h>

#include "apps/trainer/trl_command.h"
#include "lib/base/errors.h"
#include "lib/models/hf_config.h"
#include "trl/reward_trainer.h"

namespace trainer::cli {

int reward_command(const std::string& config,
                   const std::vector<std::pair<std::string, std::string>>& overrides) {
  const TrainingArguments args = parse_trl_arguments(
      "reward", config, overrides, TrainingArguments::reward_defaults(machine_has_bf16()));
  auto pad_token_id = std::make_shared<int64_t>(-1);
  auto data = [pad_token_id](Accelerator& accelerator, const TrainingArguments& a,
                             const ModelSource& model,
                             std::string& train_file) -> std::unique_ptr<data::DataSource> {
    trl::RewardSourceOptions options = trl::source_options<trl::RewardSourceOptions>(
        a, trl_tokenizer("reward", model), tokenizer_dir(model.tokenizer_path), "reward");
    finish_trl_source_options(options, accelerator, a, train_file);
    *pad_token_id = options.pad_token_id;
    return trl::make_reward_source(std::move(options));
  };
  auto trainer = [](std::shared_ptr<models::Model> model, const TrainingArguments& a,
                    std::shared_ptr<const data::Dataset> train,
                    std::shared_ptr<const data::Dataset> eval, data::DataCollator collator) {
    return std::unique_ptr<Trainer>(std::make_unique<trl::RewardTrainer>(
        std::move(model), a, std::move(train), std::move(eval), std::move(collator)));
  };
  TrainingRecipe recipe = trl_recipe("reward", args, data, trainer);
  // A reward model scores; it does not talk.
  recipe.chat_sample = [] {};
  recipe.model_source = [pad_token_id, &args](ModelSource& source) {
    if (!source.config) return;
    if (source.pretrained && source.pretrained->is_adapter()) {
      throw InputError(fmt::format(
          "trainer reward: model_name_or_path {} is an adapter folder; start a reward model from "
          "a model folder (a causal language model or a classifier of one label), with use_peft "
          "for LoRA",
          source.pretrained->path));
    }
    const models::HfConfig& config = *source.config;
    if (config.sequence_classification && config.num_labels != 1) {
      throw InputError(
          fmt::format("trainer reward: {} is a classifier of {} labels; a reward model has one "
                      "(num_labels=1: one score a sequence, as TRL requires)",
                      args.model_name_or_path().value_or("the model"), config.num_labels));
    }
    // TRL's RewardTrainer: AutoModelForSequenceClassification with num_labels=1, and
    // config.pad_token_id the tokenizer's pad (pad_token, else its pad, else its eos).
    models::HfConfig classifier = models::as_sequence_classifier(config, 1);
    classifier.pad_token_id = *pad_token_id;
    classifier.json["pad_token_id"] = *pad_token_id;
    source.config = classifier;
  };
  return run_training(args, recipe);
}

}  // namespace trainer::cli
