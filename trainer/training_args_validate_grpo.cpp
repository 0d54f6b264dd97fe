// TrainingArguments::validate() for TRL's GRPOConfig: its own values as TRL 1.16's GRPOConfig and
// GRPOTrainer check them, the keys of what is not built here (vLLM, the Hub, tools, an entropy
// bonus) accepted at their defaults only, each refusal naming why.
#include <cmath>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "lib/base/json_text.h"
#include "trainer/training_args.h"
#include "trainer/training_args_checks.h"

namespace trainer {

using namespace validate;

namespace {

template <typename T>
nlohmann::ordered_json as_json(const T& value) {
  return nlohmann::ordered_json(value);
}
template <typename T>
nlohmann::ordered_json as_json(const std::optional<T>& value) {
  return value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json();
}

// A key of what this trainer does not build, at its default.
template <typename T>
void only_default(const char* key, const T& value, const T& default_value, const char* why) {
  if (value == default_value) return;
  check(false, key, shown(as_json(value)),
        fmt::format("{} only: {}", shown(as_json(default_value)), why));
}

}  // namespace

// The generation's keys: the groups, the generation batch, the sampling settings.
void TrainingArguments::validate_grpo_generation() const {
  check(num_generations_ >= 2, "num_generations", std::to_string(num_generations_),
        "at least 2 (GRPO's advantages compare the completions of a prompt)");
  if (num_generations_eval_) {
    check(*num_generations_eval_ >= 1, "num_generations_eval",
          std::to_string(*num_generations_eval_), ">= 1, or null");
  }
  if (generation_batch_size_ && steps_per_generation_) {
    throw InputError(
        "argument generation_batch_size: 'generation_batch_size' and 'steps_per_generation' can "
        "not be both configured at the same time (give one of them)");
  }
  if (generation_batch_size_) {
    check(*generation_batch_size_ > 0, "generation_batch_size",
          std::to_string(*generation_batch_size_), "> 0, or null");
  }
  if (steps_per_generation_) {
    check(*steps_per_generation_ > 0, "steps_per_generation",
          std::to_string(*steps_per_generation_), "> 0, or null");
  }
  check(max_completion_length_.has_value() && *max_completion_length_ > 0, "max_completion_length",
        max_completion_length_ ? std::to_string(*max_completion_length_) : "null", "> 0");
  check(std::isfinite(temperature_) && temperature_ > 0, "temperature", num(temperature_),
        "a number > 0");
  check(top_p_ > 0 && top_p_ <= 1, "top_p", num(top_p_), "in (0, 1]");
  check(top_k_ >= 0, "top_k", std::to_string(top_k_), ">= 0 (0: off)");
  if (min_p_) check(*min_p_ >= 0 && *min_p_ <= 1, "min_p", num(*min_p_), "from 0 to 1, or null");
  check(std::isfinite(repetition_penalty_) && repetition_penalty_ > 0, "repetition_penalty",
        num(repetition_penalty_), "a number > 0");
  check(generation_kwargs_.is_null() || generation_kwargs_.is_object(), "generation_kwargs",
        shown(generation_kwargs_), "a JSON object of generate()'s keys, or null");
  check(chat_template_kwargs_.is_null() || chat_template_kwargs_.is_object(),
        "chat_template_kwargs", shown(chat_template_kwargs_),
        "a JSON object of the template's variables, or null");
}

void TrainingArguments::validate_grpo() const {
  if (!is_grpo()) return;
  validate_grpo_generation();
  check(num_iterations_ >= 1, "num_iterations", std::to_string(num_iterations_), ">= 1");
  check(std::isfinite(epsilon_) && epsilon_ >= 0, "epsilon", num(epsilon_), "a number >= 0");
  if (epsilon_high_) {
    check(std::isfinite(*epsilon_high_) && *epsilon_high_ >= 0, "epsilon_high", num(*epsilon_high_),
          "a number >= 0, or null");
  }
  if (delta_) check(std::isfinite(*delta_) && *delta_ > 0, "delta", num(*delta_), "> 0, or null");
  check_choice("importance_sampling_level", importance_sampling_level_, {"token", "sequence"});
  if (loss_type_.size() != 1) {
    check(false, "loss_type", shown(nlohmann::ordered_json(loss_type_)),
          "one of grpo, dr_grpo, dapo, bnpo, cispo, sapo, luspo, vespo");
  }
  check_choice("loss_type", loss_type_.front(),
               {"grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"});
  check(std::isfinite(beta_) && beta_ >= 0, "beta", num(beta_), "a number >= 0 (0: no KL term)");
  check_choice("scale_rewards", scale_rewards_, {"group", "batch", "none"});
  check_choice("multi_objective_aggregation", multi_objective_aggregation_,
               {"sum_then_normalize", "normalize_then_sum"});
  for (double w : reward_weights_) check(std::isfinite(w), "reward_weights", num(w), "numbers");
  check(top_entropy_quantile_ > 0 && top_entropy_quantile_ <= 1, "top_entropy_quantile",
        num(top_entropy_quantile_), "in (0, 1]");
  check(reward_timeout_ > 0, "reward_timeout", num(reward_timeout_), "seconds > 0");
  if (sync_ref_model_) {
    check(beta_ != 0.0, "sync_ref_model", "true",
          "false while beta is 0 (there is no reference model to sync; set beta > 0)");
    check(ref_model_sync_steps_ > 0, "ref_model_sync_steps", std::to_string(ref_model_sync_steps_),
          "> 0");
    check(ref_model_mixup_alpha_ >= 0 && ref_model_mixup_alpha_ <= 1, "ref_model_mixup_alpha",
          num(ref_model_mixup_alpha_), "from 0 to 1");
  }
  check(!auto_find_batch_size_, "auto_find_batch_size", "true",
        "false: GRPO's generation batch must hold whole groups of num_generations completions "
        "(lower per_device_train_batch_size instead)");
  if (log_completions_hub_repo_) {
    check(false, "log_completions_hub_repo",
          shown(nlohmann::ordered_json(*log_completions_hub_repo_)),
          "null only: nothing is pushed to a Hub here");
  }
  if (num_completions_to_print_) {
    check(*num_completions_to_print_ >= 0, "num_completions_to_print",
          std::to_string(*num_completions_to_print_), ">= 0, or null");
  }
  validate_grpo_unbuilt();
  check_model_init_kwargs();
  if (is_rloo() && !reward_clip_range_.empty()) {
    const auto& r = reward_clip_range_;
    check(r.size() == 2 && std::isfinite(r[0]) && std::isfinite(r[1]) && r[0] <= r[1],
          "reward_clip_range", shown(nlohmann::ordered_json(r)),
          "[min, max]: two finite numbers, min <= max (or [] for none)");
  }
}

// The keys of what is not built here (vLLM, tools, the Hub, an entropy bonus): their defaults only.
void TrainingArguments::validate_grpo_unbuilt() const {
  check(!use_vllm_, "use_vllm", "true", "false only: sampling runs in the trainer's processes");
  const char* vllm = "vLLM is not used here (use_vllm false)";
  only_default("vllm_mode", vllm_mode_, std::string("colocate"), vllm);
  only_default("vllm_model_impl", vllm_model_impl_, std::string("vllm"), vllm);
  only_default("vllm_enable_sleep_mode", vllm_enable_sleep_mode_, false, vllm);
  only_default("vllm_structured_outputs_regex", vllm_structured_outputs_regex_,
               std::optional<std::string>(), vllm);
  only_default("vllm_server_base_url", vllm_server_base_url_, std::optional<std::string>(), vllm);
  only_default("vllm_server_host", vllm_server_host_, std::string("0.0.0.0"), vllm);
  only_default("vllm_server_port", vllm_server_port_, int64_t{8000}, vllm);
  only_default("vllm_server_timeout", vllm_server_timeout_, 240.0, vllm);
  only_default("vllm_group_port", vllm_group_port_, int64_t{51216}, vllm);
  only_default("vllm_gpu_memory_utilization", vllm_gpu_memory_utilization_, 0.3, vllm);
  only_default("vllm_max_model_length", vllm_max_model_length_, std::optional<int64_t>(), vllm);
  only_default("vllm_tensor_parallel_size", vllm_tensor_parallel_size_, int64_t{1}, vllm);
  only_default("vllm_importance_sampling_correction", vllm_importance_sampling_correction_, true,
               vllm);
  only_default("vllm_importance_sampling_mode", vllm_importance_sampling_mode_,
               std::string("sequence_mask"), vllm);
  only_default("vllm_importance_sampling_clip_max", vllm_importance_sampling_clip_max_, 3.0, vllm);
  only_default("vllm_importance_sampling_clip_min", vllm_importance_sampling_clip_min_,
               std::optional<double>(), vllm);
  only_default("vllm_importance_sampling_cap", vllm_importance_sampling_cap_,
               std::optional<double>(), vllm);
  only_default("ds3_gather_for_generation", ds3_gather_for_generation_, true,
               "sampling under ZeRO-3 runs on the gathered weights");
  only_default("cache_implementation", cache_implementation_, std::optional<std::string>(),
               "the KV cache is the one built here");
  only_default("use_transformers_continuous_batching", use_transformers_continuous_batching_, false,
               "the batch is sampled together");
  only_default("use_transformers_paged", use_transformers_paged_, false,
               "the batch is sampled together");
  check(transformers_continuous_batching_config_.empty(), "transformers_continuous_batching_config",
        shown(transformers_continuous_batching_config_),
        "null only: the batch is sampled together");
  only_default("max_tool_calling_iterations", max_tool_calling_iterations_,
               std::optional<int64_t>(), "tools are not built here");
  only_default("entropy_coef", entropy_coef_, 0.0, "no entropy bonus is built here");
  only_default("use_adaptive_entropy", use_adaptive_entropy_, false,
               "no entropy bonus is built here");
  only_default("off_policy_mask_threshold", off_policy_mask_threshold_, std::optional<double>(),
               "the off-policy mask is not built here");
  only_default("cast_lm_head_to_fp32", cast_lm_head_to_fp32_, false,
               "the output layer runs in the model's type");
  check(!push_to_hub_, "push_to_hub", "true", "false only: nothing is pushed to a Hub here");
}

}  // namespace trainer
