// Which configuration takes which argument: TRL's configs' own keys (SFT, DPO, GRPO, RLOO,
// reward), the keys they share, TRL's script arguments, each config's defaults, and the one line
// that refuses an argument where it does not belong.
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/base/errors.h"
#include "trainer/training_args.h"

namespace trainer {

void TrainingArguments::note_given(const std::string& name) {
  if (!takes(name)) {
    const auto& sft = sft_keys();
    const auto& shared = dpo_shared_keys();
    const bool in_sft = std::find(sft.begin(), sft.end(), name) != sft.end();
    const bool in_shared = std::find(shared.begin(), shared.end(), name) != shared.end();
    const auto& grpo = grpo_keys();
    const auto& reward = reward_keys();
    const auto& rloo = rloo_keys();
    if (std::find(rloo.begin(), rloo.end(), name) != rloo.end()) {
      throw InputError(fmt::format(
          "argument {}: an RLOOConfig argument (TRL's); only `trainer rloo` takes it", name));
    }
    if (is_rloo()) {
      throw InputError(fmt::format(
          "argument {}: a GRPOConfig argument that RLOOConfig lacks (TRL's RLOO has one loss: "
          "the clipped sequence-level ratio, the KL in the reward); only `trainer grpo` takes it",
          name));
    }
    if (std::find(reward.begin(), reward.end(), name) != reward.end()) {
      throw InputError(fmt::format(
          "argument {}: a RewardConfig argument (TRL's); only `trainer reward` takes it", name));
    }
    if (is_reward()) {
      throw InputError(fmt::format(
          "argument {}: not a RewardConfig argument (TRL's); `trainer reward` takes the "
          "Trainer's and {}",
          name, fmt::join(reward_shared_keys(), ", ")));
    }
    if (std::find(grpo.begin(), grpo.end(), name) != grpo.end()) {
      throw InputError(fmt::format(
          "argument {}: a GRPOConfig argument (TRL's); only `trainer grpo` takes it", name));
    }
    const auto& script = script_keys();
    if (std::find(script.begin(), script.end(), name) != script.end()) {
      throw InputError(fmt::format(
          "argument {}: one of TRL's script arguments (ScriptArguments, ModelConfig); only "
          "`trainer sft` and `trainer dpo` take it",
          name));
    }
    if (in_shared) {
      throw InputError(fmt::format(
          "argument {}: an SFTConfig and DPOConfig argument (TRL's); only `trainer sft` and "
          "`trainer dpo` take it",
          name));
    }
    if (in_sft) {
      throw InputError(fmt::format(
          "argument {}: an SFTConfig argument (TRL's); only `trainer sft` takes it", name));
    }
    throw InputError(fmt::format(
        "argument {}: a DPOConfig argument (TRL's); only `trainer dpo` takes it", name));
  }
  given_.insert(name);
}

bool TrainingArguments::takes(const std::string& name) const {
  auto has = [&name](const std::vector<std::string>& keys) {
    return std::find(keys.begin(), keys.end(), name) != keys.end();
  };
  if (has(reward_keys())) return is_reward();
  if (has(rloo_keys())) return is_rloo();
  if (is_rloo() && has(grpo_only_keys())) return false;
  if (is_reward() && (has(reward_shared_keys()) || has(script_keys()))) return true;
  if (has(script_keys())) return is_sft() || is_dpo() || is_grpo();
  if (is_grpo() && has(grpo_shared_keys())) return true;
  if (has(grpo_keys())) return is_grpo();
  if (has(sft_keys())) return is_sft() || (is_dpo() && has(dpo_shared_keys()));
  if (has(dpo_keys())) return is_dpo();
  return true;
}

const std::vector<std::string>& TrainingArguments::sft_keys() {
  static const std::vector<std::string> keys = {
#define TRAINER_SFT_KEY(T, name, default_value, help) #name,
      TRAINER_SFT_ARGUMENTS(TRAINER_SFT_KEY)
#undef TRAINER_SFT_KEY
  };
  return keys;
}

const std::vector<std::string>& TrainingArguments::dpo_keys() {
  static const std::vector<std::string> keys = {
#define TRAINER_DPO_KEY(T, name, default_value, help) #name,
      TRAINER_DPO_ARGUMENTS(TRAINER_DPO_KEY)
#undef TRAINER_DPO_KEY
  };
  return keys;
}

const std::vector<std::string>& TrainingArguments::grpo_keys() {
  static const std::vector<std::string> keys = {
#define TRAINER_GRPO_KEY(T, name, default_value, help) #name,
      TRAINER_GRPO_ARGUMENTS(TRAINER_GRPO_KEY)
#undef TRAINER_GRPO_KEY
  };
  return keys;
}

const std::vector<std::string>& TrainingArguments::grpo_shared_keys() {
  // TRL 1.16's GRPOConfig fields that SFTConfig or DPOConfig have too.
  static const std::vector<std::string> keys = {"beta",
                                                "loss_type",
                                                "disable_dropout",
                                                "shuffle_dataset",
                                                "sync_ref_model",
                                                "ref_model_mixup_alpha",
                                                "ref_model_sync_steps",
                                                "model_init_kwargs",
                                                "pad_to_multiple_of",
                                                "trust_remote_code",
                                                "router_aux_loss_coef"};
  return keys;
}

const std::vector<std::string>& TrainingArguments::reward_keys() {
  static const std::vector<std::string> keys = {
#define TRAINER_REWARD_KEY(T, name, default_value, help) #name,
      TRAINER_REWARD_ARGUMENTS(TRAINER_REWARD_KEY)
#undef TRAINER_REWARD_KEY
  };
  return keys;
}

const std::vector<std::string>& TrainingArguments::rloo_keys() {
  static const std::vector<std::string> keys = {
#define TRAINER_RLOO_KEY(T, name, default_value, help) #name,
      TRAINER_RLOO_ARGUMENTS(TRAINER_RLOO_KEY)
#undef TRAINER_RLOO_KEY
  };
  return keys;
}

const std::vector<std::string>& TrainingArguments::grpo_only_keys() {
  // TRL 1.16: the fields of GRPOConfig that RLOOConfig does not have.
  static const std::vector<std::string> keys = {"loss_type",
                                                "importance_sampling_level",
                                                "scale_rewards",
                                                "multi_objective_aggregation",
                                                "delta",
                                                "sapo_temperature_pos",
                                                "sapo_temperature_neg",
                                                "vespo_k_pos",
                                                "vespo_k_neg",
                                                "vespo_lambda_pos",
                                                "vespo_lambda_neg",
                                                "top_entropy_quantile",
                                                "entropy_coef",
                                                "use_adaptive_entropy",
                                                "use_bias_correction_kl",
                                                "cast_lm_head_to_fp32",
                                                "off_policy_mask_threshold",
                                                "max_tool_calling_iterations",
                                                "log_completions_hub_repo",
                                                "vllm_importance_sampling_correction",
                                                "vllm_importance_sampling_mode",
                                                "vllm_importance_sampling_clip_max",
                                                "vllm_importance_sampling_clip_min",
                                                "vllm_importance_sampling_cap"};
  return keys;
}

const std::vector<std::string>& TrainingArguments::reward_shared_keys() {
  // TRL 1.16's RewardConfig fields that SFTConfig or DPOConfig have too.
  static const std::vector<std::string> keys = {
      "max_length",        "disable_dropout",      "pad_to_multiple_of", "eos_token",
      "pad_token",         "chat_template_path",   "dataset_num_proc",   "model_init_kwargs",
      "trust_remote_code", "activation_offloading"};
  return keys;
}

const std::vector<std::string>& TrainingArguments::script_keys() {
  // TRL's ScriptArguments and ModelConfig fields that `trl sft` and `trl dpo` read beside
  // their configs (and that TrainingArguments has no other use for).
  static const std::vector<std::string> keys = {
      "dataset_train_split",  "dataset_test_split",     "dataset_streaming",
      "ignore_bias_buffers",  "model_revision",         "attn_implementation",
      "lora_task_type",       "lora_target_parameters", "use_dora",
      "load_in_8bit",         "load_in_4bit",           "bnb_4bit_quant_type",
      "use_bnb_nested_quant", "bnb_4bit_quant_storage"};
  return keys;
}

const std::vector<std::string>& TrainingArguments::dpo_shared_keys() {
  // TRL 1.16's DPOConfig fields that SFTConfig has too.
  static const std::vector<std::string> keys = {
      "max_length", "truncation_mode",   "padding_free",        "pad_to_multiple_of",
      "loss_type",  "dataset_num_proc",  "model_init_kwargs",   "activation_offloading",
      "pad_token",  "trust_remote_code", "router_aux_loss_coef"};
  return keys;
}

TrainingArguments TrainingArguments::sft_defaults(bool bf16) {
  TrainingArguments args;
  args.config_ = Config::kSft;
  args.learning_rate_ = 2e-5;
  args.logging_steps_ = 10;
  args.gradient_checkpointing_ = true;
  args.bf16_ = bf16;
  return args;
}

TrainingArguments TrainingArguments::grpo_defaults(bool bf16) {
  TrainingArguments args = sft_defaults(bf16);
  args.config_ = Config::kGrpo;
  args.learning_rate_ = 1e-6;
  args.loss_type_ = {"dapo"};
  args.beta_ = 0.0;
  args.disable_dropout_ = false;
  args.shuffle_dataset_ = true;
  return args;
}

TrainingArguments TrainingArguments::rloo_defaults(bool bf16) {
  TrainingArguments args = grpo_defaults(bf16);
  args.config_ = Config::kRloo;
  args.beta_ = 0.05;
  args.num_generations_ = 2;
  return args;
}

TrainingArguments TrainingArguments::reward_defaults(bool bf16) {
  TrainingArguments args = sft_defaults(bf16);
  args.config_ = Config::kReward;
  args.learning_rate_ = 1e-4;
  return args;
}

TrainingArguments TrainingArguments::dpo_defaults(bool bf16) {
  TrainingArguments args = sft_defaults(bf16);
  args.config_ = Config::kDpo;
  args.learning_rate_ = 1e-6;
  args.loss_type_ = {"sigmoid"};
  return args;
}

}  // namespace trainer
