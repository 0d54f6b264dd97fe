// TrainingArguments::validate() for TRL's configs: the script arguments, SFTConfig's and
// DPOConfig's own values, as TRL 1.16 checks them.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"
#include "lib/data/names.h"
#include "lib/io/safetensors_header.h"
#include "lib/models/hf_config.h"
#include "lib/models/lora_config.h"
#include "lib/models/names.h"
#include "lib/optim/schedules.h"
#include "trainer/training_args.h"
#include "trainer/training_args_checks.h"
#include "trainer/training_args_specs.h"

namespace trainer {

using namespace validate;

// TRL's script arguments (ScriptArguments, ModelConfig) of `trainer sft` and `trainer dpo`: what
// this trainer does is accepted, what it cannot do refused with why. dataset_config is TRL's name
// there, a JSON object of options for `trainer train`'s data sets.
void TrainingArguments::validate_script() const {
  if (!is_sft() && !is_dpo() && !is_grpo() && !is_reward()) {
    check(dataset_config_.is_object(), "dataset_config", shown(dataset_config_),
          "a JSON object of the data set's options; a configuration's name is TRL's, for trainer "
          "sft and trainer dpo");
    return;
  }
  check(dataset_config_.is_string() || dataset_config_.empty(), "dataset_config",
        shown(dataset_config_),
        "TRL's name of a configuration: a subfolder of dataset_name, or null");
  if (dataset_config_.is_string()) {
    check(!dataset_config_.get<std::string>().empty(), "dataset_config", "\"\"",
          "a subfolder of dataset_name, or null");
  }
  check(!dataset_train_split_.empty(), "dataset_train_split", "\"\"", "a split's name, e.g. train");
  check(!dataset_test_split_.empty(), "dataset_test_split", "\"\"", "a split's name, e.g. test");
  check(!dataset_streaming_, "dataset_streaming", "true",
        "false only: the data is read whole, prepared once per node and cached");
  if (attn_implementation_) {
    const std::string& attn = *attn_implementation_;
    if (attn != "eager" && attn != "sdpa") {
      const bool kernel = attn.find("flash") != std::string::npos ||
                          attn.find("flex") != std::string::npos ||
                          attn.find('/') != std::string::npos || attn.find("paged") == 0;
      check(false, "attn_implementation", shown(json(attn)),
            kernel ? "eager or sdpa: that kernel is not built into this trainer (LibTorch's own "
                     "attention computes the same softmax; eager and sdpa are it)"
                   : "eager or sdpa (the same attention here), or null");
    }
  }
  check(lora_task_type_ == "CAUSAL_LM", "lora_task_type", shown(json(lora_task_type_)),
        "CAUSAL_LM only: the models here are causal language models");
  check(lora_target_parameters_.empty(), "lora_target_parameters",
        shown(json(lora_target_parameters_)),
        "[] or null only: PEFT's adapters on parameters are not implemented (use "
        "lora_target_modules)");
  check(!use_dora_, "use_dora", "true", "false only: DoRA is not implemented");
  for (const auto& [name, on] :
       {std::pair{"load_in_8bit", load_in_8bit_}, std::pair{"load_in_4bit", load_in_4bit_},
        std::pair{"use_bnb_nested_quant", use_bnb_nested_quant_}}) {
    check(!on, name, "true",
          "false only: quantized weights need bitsandbytes' CUDA kernels, which this trainer does "
          "not have (train LoRA over bf16 weights: use_peft with dtype bfloat16)");
  }
  check_choice("bnb_4bit_quant_type", bnb_4bit_quant_type_, {"nf4", "fp4"});
  check(!trust_remote_code_, "trust_remote_code", "true",
        "false (no model here runs code from its folder)");
  if (router_aux_loss_coef_) {
    check(std::isfinite(*router_aux_loss_coef_), "router_aux_loss_coef",
          num(*router_aux_loss_coef_), "a finite number, or null");
  }
}

// SFTConfig's own values, as TRL 1.16's SFTConfig and SFTTrainer check them.
void TrainingArguments::validate_sft() const {
  if (!is_sft()) return;
  if (max_length_)
    check(*max_length_ > 0, "max_length", std::to_string(*max_length_), "> 0, or null");
  check_choice("truncation_mode", truncation_mode_, {"keep_start", "keep_end"});
  check_choice("packing_strategy", packing_strategy_, {"bfd", "bfd_split", "wrapped"});
  if (loss_type_.size() != 1) {
    check(false, "loss_type", shown(nlohmann::ordered_json(loss_type_)),
          "nll or dft (one of them)");
  }
  check_choice("loss_type", loss_type_.front(), {"nll", "dft"});
  if (pad_to_multiple_of_) {
    check(*pad_to_multiple_of_ > 0, "pad_to_multiple_of", std::to_string(*pad_to_multiple_of_),
          "> 0, \"auto\" or null");
  }
  if (dataset_num_proc_) {
    check(*dataset_num_proc_ > 0, "dataset_num_proc", std::to_string(*dataset_num_proc_),
          "> 0, or null");
  }
  if ((packing_ || eval_packing_.value_or(false)) && !max_length_) {
    throw InputError("argument packing: packing needs a max_length (null is not allowed with it)");
  }
  // Packing keeps a tree over every free length up to max_length; padding allocates it per row.
  constexpr int64_t kLongestPacked = int64_t{1} << 24, kLargestMultiple = int64_t{1} << 20;
  if ((packing_ || eval_packing_.value_or(false)) && *max_length_ > kLongestPacked) {
    check(false, "max_length", std::to_string(*max_length_),
          fmt::format("at most {} with packing", kLongestPacked));
  }
  if (pad_to_multiple_of_ && *pad_to_multiple_of_ > kLargestMultiple) {
    check(false, "pad_to_multiple_of", std::to_string(*pad_to_multiple_of_),
          fmt::format("at most {}", kLargestMultiple));
  }
  if (padding_free_ && !packing_ && max_length_) {
    throw InputError(
        "argument padding_free: without packing, max_length is not enforced (TRL refuses it): set "
        "packing true (packing_strategy bfd) or max_length null");
  }
  if (padding_free_ && packing_ && packing_strategy_ == "wrapped") {
    throw InputError(
        "argument padding_free: with packing_strategy wrapped a row's sequences are cut anywhere, "
        "so attention cannot stay within them; use bfd (TRL warns and trains across them)");
  }
  for (const auto& [key, value] : dataset_kwargs_.items()) {
    if (key == "skip_prepare_dataset" && value == false) continue;
    throw InputError(fmt::format(
        "argument dataset_kwargs: {} {} is not supported (only skip_prepare_dataset false: the "
        "data is prepared here)",
        key, shown(value)));
  }
  check_model_init_kwargs();
}

// RewardConfig's values, as TRL 1.16's RewardConfig and RewardTrainer check them.
void TrainingArguments::validate_reward() const {
  if (!is_reward()) return;
  if (max_length_)
    check(*max_length_ > 0, "max_length", std::to_string(*max_length_), "> 0, or null");
  if (pad_to_multiple_of_) {
    check(*pad_to_multiple_of_ > 0 && *pad_to_multiple_of_ <= (int64_t{1} << 20),
          "pad_to_multiple_of", std::to_string(*pad_to_multiple_of_),
          "from 1 to 2^20, \"auto\" or null");
  }
  if (dataset_num_proc_) {
    check(*dataset_num_proc_ > 0, "dataset_num_proc", std::to_string(*dataset_num_proc_),
          "> 0, or null");
  }
  if (center_rewards_coefficient_) {
    check(std::isfinite(*center_rewards_coefficient_), "center_rewards_coefficient",
          num(*center_rewards_coefficient_), "a finite number, or null");
  }
  check_model_init_kwargs();
}

// DPOConfig's own values, as TRL 1.16's DPOConfig and DPOTrainer check them (and where TRL only
// warns of a value that makes the loss infinite or NaN, refused).
void TrainingArguments::validate_dpo() const {
  if (!is_dpo()) return;
  if (max_length_)
    check(*max_length_ > 0, "max_length", std::to_string(*max_length_), "> 0, or null");
  check_choice("truncation_mode", truncation_mode_, {"keep_start", "keep_end"});
  if (pad_to_multiple_of_) {
    check(*pad_to_multiple_of_ > 0 && *pad_to_multiple_of_ <= (int64_t{1} << 20),
          "pad_to_multiple_of", std::to_string(*pad_to_multiple_of_),
          "from 1 to 2^20, \"auto\" or null");
  }
  check(!loss_type_.empty(), "loss_type", "[]", "one loss or a list of them");
  static const std::vector<std::string> losses = {
      "sigmoid",  "hinge",    "ipo",       "exo_pair", "nca_pair",
      "robust",   "bco_pair", "sppo_hard", "aot",      "aot_unpaired",
      "apo_zero", "apo_down", "discopop",  "sft",      "sigmoid_norm"};
  for (const auto& loss : loss_type_) check_choice("loss_type", loss, losses);
  if (!loss_weights_.empty() && loss_weights_.size() != loss_type_.size()) {
    throw InputError(fmt::format(
        "argument loss_weights: {} weight{} for {} loss type{} (give one weight per loss_type)",
        loss_weights_.size(), loss_weights_.size() == 1 ? "" : "s", loss_type_.size(),
        loss_type_.size() == 1 ? "" : "s"));
  }
  auto uses = [this](const char* loss) {
    return std::find(loss_type_.begin(), loss_type_.end(), loss) != loss_type_.end();
  };
  check(std::isfinite(beta_) && beta_ > 0, "beta", num(beta_), "a number > 0");
  check(std::isfinite(label_smoothing_) && label_smoothing_ >= 0 && label_smoothing_ <= 1,
        "label_smoothing", num(label_smoothing_), "from 0 to 1");
  if (uses("robust")) {
    check(label_smoothing_ < 0.5, "label_smoothing", num(label_smoothing_),
          "below 0.5 with the robust loss (it divides by 1 - 2 label_smoothing)");
  }
  if (uses("exo_pair")) {
    check(label_smoothing_ > 0 && label_smoothing_ < 1, "label_smoothing", num(label_smoothing_),
          "between 0 and 1 with exo_pair (the EXO paper: 1e-3)");
  }
  check_choice("f_divergence_type", f_divergence_type_,
               {"reverse_kl", "forward_kl", "js_divergence", "alpha_divergence"});
  if (f_divergence_type_ != "reverse_kl") {
    for (const auto& loss : loss_type_) {
      check(loss == "sigmoid" || loss == "sigmoid_norm" || loss == "hinge" || loss == "ipo" ||
                loss == "exo_pair" || loss == "robust" || loss == "discopop" || loss == "sft",
            "loss_type", shown(loss),
            fmt::format("with f_divergence_type {}: sigmoid, sigmoid_norm, hinge, ipo, exo_pair, "
                        "robust, discopop or sft",
                        f_divergence_type_));
    }
  }
  for (double w : loss_weights_) check(std::isfinite(w), "loss_weights", num(w), "finite numbers");
  if (ld_alpha_) {
    check(std::isfinite(*ld_alpha_) && *ld_alpha_ >= 0, "ld_alpha", num(*ld_alpha_),
          "a finite number >= 0, or null");
  }
  check(std::isfinite(f_alpha_divergence_coef_), "f_alpha_divergence_coef",
        num(f_alpha_divergence_coef_), "a finite number");
  check(std::isfinite(discopop_tau_) && discopop_tau_ > 0, "discopop_tau", num(discopop_tau_),
        "a finite number > 0");
  if (use_weighting_ && (uses("aot") || uses("aot_unpaired"))) {
    throw InputError(
        "argument use_weighting: not with the aot or aot_unpaired loss (they sort the pairs, "
        "which would misalign each pair's weight)");
  }
  if (precompute_ref_batch_size_) {
    check(*precompute_ref_batch_size_ > 0, "precompute_ref_batch_size",
          std::to_string(*precompute_ref_batch_size_), "> 0, or null");
  }
  check(!sync_ref_model_, "sync_ref_model", "true",
        "false (TR-DPO's reference updates are not supported)");
  check_model_init_kwargs();
}

// model_init_kwargs: the model's dtype only (TRL's configs pass the rest to from_pretrained).
void TrainingArguments::check_model_init_kwargs() const {
  for (const auto& [key, value] : model_init_kwargs_.items()) {
    if ((key == "dtype" || key == "torch_dtype") && value.is_string()) continue;
    throw InputError(fmt::format(
        "argument model_init_kwargs: {} {} is not supported (only dtype or torch_dtype, a string)",
        key, shown(value)));
  }
}

}  // namespace trainer
