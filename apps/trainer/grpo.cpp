// `trainer grpo` (as `trl grpo`): TrainingArguments with TRL's GRPOConfig (its arguments and
// defaults) and the script's reward_funcs, prompt-only data prepared as GRPOTrainer tokenizes
// them, and trl::GRPOTrainer on `trainer train`'s run: completions sampled in the process,
// rewarded by TRL's built-ins and exec: programs, against a frozen reference when beta > 0.
#include <memory>
#include <string>

#include <fmt/format.h>
#include <torch/torch.h>

#include "apps/trainer/trl_command.h"
#include "lib/base/errors.h"
#include "lib/base/json_text.h"
#include "lib/models/generation_config.h"
#include "lib/models/hf_causal_lm.h"
#include "lib/models/lora.h"
#include "trl/grpo_trainer.h"
#include "trl/reward_model.h"
#include "trl/rloo_trainer.h"

namespace trainer::cli {
namespace {

// reward_funcs as the command line gives it: a JSON list, or one entry.
nlohmann::ordered_json reward_specs(const nlohmann::ordered_json& given) {
  if (given.is_string()) {
    const std::string text = given.get<std::string>();
    if (!text.empty() && text.front() == '[') {
      try {
        return nlohmann::ordered_json::parse(text);
      } catch (const nlohmann::json::exception& e) {
        throw InputError(fmt::format("argument reward_funcs: {} is not a JSON list ({})",
                                     base::shown(given), base::json_error_text(e)));
      }
    }
  }
  return given;
}

// GRPOTrainer's stop ids: the tokenizer's EOS first, then generation_config.json's (TRL's
// eos_token_ids); its padding: the source's pad token.
trl::GrpoSetup grpo_setup(models::Model& model, const ModelSource& source,
                          const trl::GrpoSourceOptions& options,
                          std::shared_ptr<trl::RewardFunctions> rewards,
                          const trl::GrpoDataset& rows) {
  trl::GrpoSetup setup;
  setup.tokenizer = options.tokenizer;
  setup.pad_token_id = options.pad_token_id;
  const auto* hf = models::as_hf_causal_lm(model);
  const models::GenerationConfig generation =
      source.pretrained
          ? models::read_generation_config(source.pretrained->model_dir, hf->config().vocab_size)
          : models::GenerationConfig();
  std::vector<int64_t> eos =
      generation.has_eos ? generation.eos_token_ids : hf->config().eos_token_ids;
  if (auto id = options.tokenizer->eos_token_id()) {
    if (std::find(eos.begin(), eos.end(), *id) == eos.end()) eos.insert(eos.begin(), *id);
  }
  if (eos.empty()) {
    throw InputError(
        "trainer grpo: the tokenizer and the model name no EOS token, so no completion would end "
        "(give the tokenizer an eos_token)");
  }
  setup.eos_token_ids = eos;
  setup.generation_min_p = generation.min_p;
  setup.rewards = std::move(rewards);
  if (rows.size() > 0) {
    const nlohmann::ordered_json first = rows.record(0);
    setup.conversational = first.contains("prompt") && first["prompt"].is_array();
  }
  return setup;
}

// `trainer grpo` and `trainer rloo`: one machinery, RLOOTrainer what differs.
int online_command(const std::string& name, const std::string& config,
                   const std::vector<std::pair<std::string, std::string>>& overrides,
                   TrainingArguments defaults, const GrpoTrainerHook& hook) {
  const TrainingArguments args = parse_trl_arguments(name, config, overrides, std::move(defaults));
  // The rewards first: a program that does not start fails before the model loads.
  // Reward models load on every process (as TRL loads them), with the run's template variables.
  const nlohmann::ordered_json kwargs = args.chat_template_kwargs();
  auto rewards = std::make_shared<trl::RewardFunctions>(
      reward_specs(args.reward_funcs()), args.reward_timeout(),
      [kwargs](const std::string& folder) { return trl::load_reward_model(folder, kwargs); });
  if (!args.reward_weights().empty() && args.reward_weights().size() != rewards->size()) {
    throw InputError(fmt::format(
        "argument reward_weights: Number of reward weights ({}) must match number of reward "
        "functions ({})",
        args.reward_weights().size(), rewards->size()));
  }
  auto source = std::make_shared<ModelSource>();
  auto options = std::make_shared<trl::GrpoSourceOptions>();
  auto data = [source, options, name](
                  Accelerator& accelerator, const TrainingArguments& a, const ModelSource& model,
                  std::string& train_file) -> std::unique_ptr<data::DataSource> {
    *source = model;
    *options = trl::source_options<trl::GrpoSourceOptions>(
        a, trl_tokenizer(name, model), tokenizer_dir(model.tokenizer_path), name);
    if (a.chat_template_kwargs().is_object())
      options->data.chat_template_kwargs = a.chat_template_kwargs();
    finish_trl_source_options(*options, accelerator, a, train_file);
    return trl::make_grpo_source(*options);
  };
  auto trainer = [source, options, rewards, hook, name](
                     std::shared_ptr<models::Model> model, const TrainingArguments& a,
                     std::shared_ptr<const data::Dataset> train,
                     std::shared_ptr<const data::Dataset> eval, data::DataCollator collator) {
    const auto* rows = dynamic_cast<const trl::GrpoDataset*>(train.get());
    if (!rows)
      throw std::invalid_argument("trainer " + name + ": the training data are not prompts");
    trl::GrpoSetup setup = grpo_setup(*model, *source, *options, rewards, *rows);
    std::shared_ptr<models::Model> ref;
    if (a.beta() != 0.0 && !models::find_wrapped<models::PeftModel>(*model)) {
      data::DataInfo info;
      info.task = data::TaskKind::kCausalLM;
      info.num_labels = models::as_hf_causal_lm(*model)->config().vocab_size;
      ref = reference_copy(*model, a, *source, info);
    }
    if (a.sync_ref_model() && models::find_wrapped<models::PeftModel>(*model)) {
      throw InputError(
          "argument sync_ref_model: not with a LoRA adapter (the reference is the model with its "
          "adapters off; TRL refuses it too)");
    }
    std::unique_ptr<trl::GRPOTrainer> made =
        a.is_rloo() ? std::make_unique<trl::RLOOTrainer>(std::move(model), a, std::move(train),
                                                         std::move(eval), std::move(collator),
                                                         std::move(ref), std::move(setup))
                    : std::make_unique<trl::GRPOTrainer>(std::move(model), a, std::move(train),
                                                         std::move(eval), std::move(collator),
                                                         std::move(ref), std::move(setup));
    if (hook) hook(*made);
    return std::unique_ptr<Trainer>(std::move(made));
  };
  return run_training(args, trl_recipe(name, args, data, trainer));
}

}  // namespace

int grpo_command(const std::string& config,
                 const std::vector<std::pair<std::string, std::string>>& overrides,
                 const GrpoTrainerHook& hook) {
  return online_command("grpo", config, overrides,
                        TrainingArguments::grpo_defaults(machine_has_bf16()), hook);
}

int rloo_command(const std::string& config,
                 const std::vector<std::pair<std::string, std::string>>& overrides,
                 const GrpoTrainerHook& hook) {
  return online_command("rloo", config, overrides,
                        TrainingArguments::rloo_defaults(machine_has_bf16()), hook);
}

}  // namespace trainer::cli
