// TrainingArguments::validate(): the one place where argument values are checked, each error
// naming the argument, its value and what is allowed.
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
#include "trainer/training_args_specs.h"

namespace trainer {
namespace {

using json = nlohmann::ordered_json;
using base::shown;

void check(bool ok, const std::string& key, const std::string& value, const std::string& allowed) {
  if (!ok)
    throw InputError(fmt::format("argument {}: {} is not allowed ({})", key, value, allowed));
}

void check_choice(const std::string& key, const std::string& value,
                  const std::vector<std::string>& allowed) {
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return;
  throw InputError(fmt::format("argument {}: \"{}\" is not allowed (allowed: {})", key, value,
                               fmt::format("{}", fmt::join(allowed, ", "))));
}

std::string num(double v) { return base::python_float(v); }

// Step counts are int64 on the way and doubles in the logs: 2^53 keeps both exact.
constexpr int64_t kMaxSteps = int64_t{1} << 53;
// Batch sizes and accumulation multiply into the total batch size: int32 keeps that in int64.
constexpr int64_t kMaxCount = 2147483647;
constexpr double kMaxFloat = 3.4028234663852886e38;  // FLT_MAX

}  // namespace

void TrainingArguments::validate() const {
  validate_steps_and_batches();
  validate_optimizer();
  validate_logging_and_saving();
  validate_best_model();
  validate_stopping();
  validate_devices();
  validate_reporting_model_and_data();
  validate_lora();
  validate_sft();
  validate_dpo();
  validate_transformers_keys();
  validate_data_loading();
  validate_script();
  const auto fsdp = fsdp_plan();
  const OptimizerPlan optimizer = optimizer_plan();
  // A sharded run's optimizer sees flat slices of the parameters and its checkpoints hold AdamW's
  // moments per slice: Adafactor's factored moments need the parameters' shapes, and the other
  // optimizers' state has no sharded checkpoint.
  check(!fsdp || optimizer.name.rfind("adamw", 0) == 0, "optim", shown(optimizer.name),
        fmt::format("with fsdp {} only adamw_torch_fused and adamw_torch, whose moments a sharded "
                    "run's checkpoints hold; leave out fsdp to train with {}",
                    fsdp ? fsdp->strategy : "", optimizer.name));
  checkpointing_plan();
}

// The steps, epochs and batch sizes.
void TrainingArguments::validate_steps_and_batches() const {
  check(!output_dir_.empty(), "output_dir", "\"\"", "a directory path");
  check(std::isfinite(num_train_epochs_) && num_train_epochs_ >= 0, "num_train_epochs",
        num(num_train_epochs_), "must be >= 0");
  check(max_steps_ == -1 || (max_steps_ > 0 && max_steps_ <= kMaxSteps), "max_steps",
        std::to_string(max_steps_), "-1 to train for num_train_epochs, or 1..2^53");
  check(max_steps_ > 0 || num_train_epochs_ > 0, "num_train_epochs", num(num_train_epochs_),
        "must be > 0 unless max_steps > 0");
  check(per_device_train_batch_size_ >= 1 && per_device_train_batch_size_ <= kMaxCount,
        "per_device_train_batch_size", std::to_string(per_device_train_batch_size_),
        "must be in 1..2147483647");
  check(per_device_eval_batch_size_ >= 1 && per_device_eval_batch_size_ <= kMaxCount,
        "per_device_eval_batch_size", std::to_string(per_device_eval_batch_size_),
        "must be in 1..2147483647");
}

// The optimizer, clipping and the learning-rate schedule.
void TrainingArguments::validate_optimizer() const {
  // The optimizer computes in float32: a value past its range is inf there.
  check(std::isfinite(learning_rate_) && learning_rate_ >= 0 && learning_rate_ <= kMaxFloat,
        "learning_rate", num(learning_rate_), "must be in 0..3.4e38, float32's range");
  check(std::isfinite(weight_decay_) && weight_decay_ >= 0 && weight_decay_ <= kMaxFloat,
        "weight_decay", num(weight_decay_), "must be in 0..3.4e38, float32's range");
  check(adam_beta1_ >= 0 && adam_beta1_ < 1, "adam_beta1", num(adam_beta1_), "must be in [0, 1)");
  check(adam_beta2_ >= 0 && adam_beta2_ < 1, "adam_beta2", num(adam_beta2_), "must be in [0, 1)");
  check(std::isfinite(adam_epsilon_) && adam_epsilon_ >= 0 && adam_epsilon_ <= kMaxFloat,
        "adam_epsilon", num(adam_epsilon_), "must be in 0..3.4e38, float32's range");
  check(std::isfinite(max_grad_norm_) && max_grad_norm_ >= 0 && max_grad_norm_ <= kMaxFloat,
        "max_grad_norm", num(max_grad_norm_),
        "must be in 0..3.4e38, float32's range; 0 disables clipping");
  check(gradient_accumulation_steps_ >= 1 && gradient_accumulation_steps_ <= kMaxCount,
        "gradient_accumulation_steps", std::to_string(gradient_accumulation_steps_),
        "must be in 1..2147483647");
  check(lr_scheduler_type_ != "greedy", "lr_scheduler_type", "\"greedy\"",
        "Transformers' GreedyLR is not supported; reduce_lr_on_plateau is the schedule stepped "
        "by an evaluation's metric");
  check_choice("lr_scheduler_type", lr_scheduler_type_, optim::lr_scheduler_types());
  optim::check_lr_scheduler_kwargs(lr_scheduler_type_, lr_scheduler_kwargs_, learning_rate_);
  // As Transformers' TrainingArguments: the metric comes from evaluations during training.
  check(lr_scheduler_type_ != optim::kReduceLrOnPlateau || eval_strategy_ != "no",
        "lr_scheduler_type", "\"reduce_lr_on_plateau\"",
        "it needs an eval strategy: set eval_strategy to steps or epoch");
  check(warmup_steps_ >= 0, "warmup_steps", std::to_string(warmup_steps_), "must be >= 0");
  check(warmup_ratio_ >= 0 && warmup_ratio_ <= 1, "warmup_ratio", num(warmup_ratio_),
        "must be in [0, 1]");
}

// When to log, evaluate and save; the metric that picks the best checkpoint.
void TrainingArguments::validate_logging_and_saving() const {
  check_choice("logging_strategy", logging_strategy_, {"no", "steps", "epoch"});
  check(std::isfinite(logging_steps_) && logging_steps_ > 0 && logging_steps_ <= kMaxSteps &&
            (logging_steps_ < 1 || logging_steps_ == std::floor(logging_steps_)),
        "logging_steps", num(logging_steps_),
        "an integer in 1..2^53, or a fraction in (0, 1) of the total steps");
  check_choice("eval_strategy", eval_strategy_, {"no", "steps", "epoch"});
  if (eval_steps_) {
    check(std::isfinite(*eval_steps_) && *eval_steps_ > 0 && *eval_steps_ <= kMaxSteps &&
              (*eval_steps_ < 1 || *eval_steps_ == std::floor(*eval_steps_)),
          "eval_steps", num(*eval_steps_),
          "an integer in 1..2^53, or a fraction in (0, 1) of the total steps");
  }
  validate_evaluation_keys();
  check_choice("save_strategy", save_strategy_, {"no", "steps", "epoch", "best"});
  check(std::isfinite(save_steps_) && save_steps_ > 0 && save_steps_ <= kMaxSteps &&
            (save_steps_ < 1 || save_steps_ == std::floor(save_steps_)),
        "save_steps", num(save_steps_),
        "an integer in 1..2^53, or a fraction in (0, 1) of the total steps");
  if (save_total_limit_) {
    check(*save_total_limit_ >= 1, "save_total_limit", std::to_string(*save_total_limit_),
          "must be >= 1, or null to keep every checkpoint");
  }
  if (metric_for_best_model_) {
    check(!metric_for_best_model_->empty(), "metric_for_best_model", "\"\"",
          "a metric name such as loss or accuracy");
  }
  if (save_strategy_ == "best") {
    check(metric_for_best_model_.has_value() || load_best_model_at_end_, "save_strategy",
          "\"best\"", "it needs metric_for_best_model");
    check(eval_strategy_ != "no", "save_strategy", "\"best\"",
          "it needs evaluations: set eval_strategy to steps or epoch");
  }
}

// eval_delay, eval_accumulation_steps, include_for_metrics and the full-precision evaluations.
void TrainingArguments::validate_evaluation_keys() const {
  check(std::isfinite(eval_delay_) && eval_delay_ >= 0 && eval_delay_ <= kMaxSteps, "eval_delay",
        num(eval_delay_), "a number of epochs or steps (as eval_strategy) in 0..2^53");
  if (eval_accumulation_steps_) {
    check(*eval_accumulation_steps_ >= 1 && *eval_accumulation_steps_ <= kMaxCount,
          "eval_accumulation_steps", std::to_string(*eval_accumulation_steps_),
          "an integer in 1..2147483647, or null to move the outputs to the CPU at the end");
  }
  for (const std::string& item : include_for_metrics_) {
    check_choice("include_for_metrics", item, {"inputs", "loss"});
  }
  check(!(bf16_full_eval_ && fp16_full_eval_), "fp16_full_eval", "true",
        "bf16_full_eval is true too; choose one precision for evaluation");
  const bool sharded = !fsdp_.empty() && fsdp_.find("no_shard") == std::string::npos;
  check(!((bf16_full_eval_ || fp16_full_eval_) && sharded),
        bf16_full_eval_ ? "bf16_full_eval" : "fp16_full_eval", "true",
        "fsdp's units keep their flat float32 buffers (a cast evaluation of them is not built); "
        "leave out fsdp to evaluate in full bf16 or fp16");
}

// load_best_model_at_end: saves that land on evaluations.
void TrainingArguments::validate_best_model() const {
  if (load_best_model_at_end_) {
    check(eval_strategy_ != "no", "load_best_model_at_end", "true",
          "it needs evaluations: set eval_strategy to steps or epoch");
    if (save_strategy_ != "best") {
      check(save_strategy_ == eval_strategy_, "load_best_model_at_end", "true",
            fmt::format("it needs save_strategy to match eval_strategy, but save_strategy is "
                        "\"{}\" and eval_strategy \"{}\"",
                        save_strategy_, eval_strategy_));
    }
    // Transformers' rule: saves land on evaluations; a ratio and a step count cannot be
    // checked against each other.
    const double save = save_steps_, eval = effective_eval_steps();
    if (save_strategy_ == "steps" && eval_strategy_ == "steps" && std::fmod(save, eval) != 0) {
      if (save < 1 && eval < 1) {
        check(std::fmod(std::round(save * 1e6), std::round(eval * 1e6)) == 0,
              "load_best_model_at_end", "true",
              fmt::format("it needs save_steps ({}) to be a multiple of eval_steps ({})", num(save),
                          num(eval)));
      } else if (save < 1 || eval < 1) {
        check(false, "load_best_model_at_end", "true",
              fmt::format("it needs save_steps to be a multiple of eval_steps, which cannot be "
                          "told when one is a ratio and the other a step count (save_steps {}, "
                          "eval_steps {})",
                          num(save), num(eval)));
      } else {
        check(false, "load_best_model_at_end", "true",
              fmt::format("it needs save_steps ({}) to be a multiple of eval_steps ({})",
                          static_cast<int64_t>(save), static_cast<int64_t>(eval)));
      }
    }
  }
}

// When training stops early: non-finite steps, early stopping.
void TrainingArguments::validate_stopping() const {
  check(max_nonfinite_steps_ >= 0 && max_nonfinite_steps_ <= kMaxSteps, "max_nonfinite_steps",
        std::to_string(max_nonfinite_steps_), "must be in 0..2^53; 0 never stops");
  if (early_stopping_patience_) {
    check(*early_stopping_patience_ >= 1 && *early_stopping_patience_ <= kMaxSteps,
          "early_stopping_patience", std::to_string(*early_stopping_patience_),
          "must be in 1..2^53, or null for no early stopping");
    check(!best_metric_name().empty(), "early_stopping_patience",
          std::to_string(*early_stopping_patience_),
          "it needs metric_for_best_model (or load_best_model_at_end)");
    check(eval_strategy_ != "no", "early_stopping_patience",
          std::to_string(*early_stopping_patience_),
          "it needs evaluations: set eval_strategy to steps or epoch");
  }
  check(std::isfinite(early_stopping_threshold_) && early_stopping_threshold_ >= 0,
        "early_stopping_threshold", num(early_stopping_threshold_), "must be a finite number >= 0");
}

// Seeds, mixed precision and the process group.
void TrainingArguments::validate_devices() const {
  check(seed_ >= 0, "seed", std::to_string(seed_), "must be >= 0");
  check(!(bf16_ && fp16_), "fp16", "true", "bf16 is true too; choose one mixed precision");
  const bool sharded = (!fsdp_.empty() && fsdp_.find("no_shard") == std::string::npos) ||
                       (!deepspeed_.is_null() && deepspeed_plan()->stage >= 1);
  check(!(fp16_ && sharded), "fp16", "true",
        "fsdp shards the gradients, and fp16's loss scaling would need every process's overflow "
        "check (not built): use bf16");
  check(!(save_on_each_node_ && sharded), "save_on_each_node", "true",
        "fsdp's checkpoints are every rank's own slices, which each node would need (not built); "
        "use a shared file system");
  if (ddp_backend_) check_choice("ddp_backend", *ddp_backend_, {"gloo", "nccl"});
  // c10d's sockets take the timeout in int32 milliseconds.
  check(ddp_timeout_ >= 1 && ddp_timeout_ <= 2147483, "ddp_timeout", std::to_string(ddp_timeout_),
        "must be in 1..2147483 seconds, about 24 days");
  if (ddp_bucket_cap_mb_) {
    check(*ddp_bucket_cap_mb_ >= 1 && *ddp_bucket_cap_mb_ <= 1048576, "ddp_bucket_cap_mb",
          std::to_string(*ddp_bucket_cap_mb_), "must be in 1..1048576");
  }
  if (data_seed_) check(*data_seed_ >= 0, "data_seed", std::to_string(*data_seed_), "must be >= 0");
}

// report_to, the model and the data set.
void TrainingArguments::validate_reporting_model_and_data() const {
  std::vector<std::string> report_choices = report_integrations();
  report_choices.insert(report_choices.begin(), {"none", "all"});
  for (const auto& target : report_to_) {
    check_choice("report_to", target, report_choices);
    check(report_to_.size() == 1 || (target != "none" && target != "all"), "report_to",
          shown(json(report_to_)), fmt::format("\"{}\" goes alone", target));
  }
  if (logging_dir_)
    check(!logging_dir_->empty(), "logging_dir", "\"\"", "a directory path, or null");
  check_choice("model_name", model_name_, models::model_names());
  // `trainer sft`'s dataset_name is a file or folder of JSON Lines (trl::resolve_data_files).
  if (config_ == Config::kTraining)
    check_choice("dataset_name", dataset_name_, data::dataset_names());
  if (model_name_or_path_) {
    check(!model_name_or_path_->empty(), "model_name_or_path", "\"\"",
          "a Hugging Face model folder, a TorchScript file (*.pt), or null");
  }
  check(dataset_name_ != "mnist" || !dataset_dir_.empty(), "dataset_dir", "\"\"",
        "dataset_name mnist needs dataset_dir: a directory with MNIST's four IDX files");
  if (max_train_samples_) {
    check(*max_train_samples_ >= 1, "max_train_samples", std::to_string(*max_train_samples_),
          "must be >= 1");
  }
  if (max_eval_samples_) {
    check(*max_eval_samples_ >= 1, "max_eval_samples", std::to_string(*max_eval_samples_),
          "must be >= 1");
  }
  for (const auto& [key, value] :
       {std::pair{"train_file", &train_file_}, std::pair{"validation_file", &validation_file_},
        std::pair{"tokenizer_name", &tokenizer_name_}, std::pair{"config_name", &config_name_}}) {
    if (*value) check(!(*value)->empty(), key, "\"\"", "a path, or null");
  }
  check(validation_split_percentage_ >= 0 && validation_split_percentage_ <= 100,
        "validation_split_percentage", fmt::format("{}", validation_split_percentage_),
        "must be between 0 and 100");
  if (block_size_) {
    // A block of one token has no next token: no position would have a label.
    check(*block_size_ >= 2, "block_size", std::to_string(*block_size_),
          "must be >= 2 (each token learns to predict the next one in its block)");
  }
  if (preprocessing_num_workers_) {
    // datasets' map(num_proc=...) refuses the same.
    check(*preprocessing_num_workers_ >= 1, "preprocessing_num_workers",
          std::to_string(*preprocessing_num_workers_), "must be >= 1, or null");
  }
  if (model_type_) check_choice("model_type", *model_type_, models::hf_model_types());
  check_choice("torch_dtype", torch_dtype_, {"auto", "float32", "bfloat16", "float16"});
  check(text_column_name_ != "", "text_column_name", "\"\"", "a column name");
  io::parse_file_size(save_safetensors_max_shard_size_,
                      "argument save_safetensors_max_shard_size:");
}

// The LoRA arguments: checked when LoRA is on, and refused when it is off (a LoRA setting that
// would be ignored in silence).
void TrainingArguments::validate_lora() const {
  if (uses_lora()) {
    models::check_lora_config(lora_config());
    return;
  }
  const models::LoraConfig defaults;
  const std::vector<std::pair<const char*, bool>> given = {
      {"lora_r", lora_r_ != defaults.r || command_line_.count("lora_r")},
      {"lora_alpha", lora_alpha_ != defaults.lora_alpha || command_line_.count("lora_alpha")},
      {"lora_dropout",
       lora_dropout_ != defaults.lora_dropout || command_line_.count("lora_dropout")},
      {"bias", bias_ != defaults.bias || command_line_.count("bias")},
      {"modules_to_save", !modules_to_save_.empty()},
      {"use_rslora", use_rslora_},
      {"init_lora_weights", init_lora_weights_ != defaults.init_lora_weights}};
  for (const auto& [name, differs] : given) {
    if (differs) {
      throw InputError(fmt::format(
          "argument {}: a LoRA setting, used only with use_peft true (or target_modules); an "
          "adapter folder as model_name_or_path brings its own (adapter_config.json)",
          name));
    }
  }
}

// TRL's script arguments (ScriptArguments, ModelConfig) of `trainer sft` and `trainer dpo`: what
// this trainer does is accepted, what it cannot do refused with why. dataset_config is TRL's name
// there, a JSON object of options for `trainer train`'s data sets.
void TrainingArguments::validate_script() const {
  if (!is_sft() && !is_dpo()) {
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
  for (const auto& [key, value] : model_init_kwargs_.items()) {
    if ((key == "dtype" || key == "torch_dtype") && value.is_string()) continue;
    throw InputError(fmt::format(
        "argument model_init_kwargs: {} {} is not supported (only dtype or torch_dtype, a string)",
        key, shown(value)));
  }
}

}  // namespace trainer

namespace trainer {

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
  for (const auto& [key, value] : model_init_kwargs_.items()) {
    if ((key == "dtype" || key == "torch_dtype") && value.is_string()) continue;
    throw InputError(fmt::format(
        "argument model_init_kwargs: {} {} is not supported (only dtype or torch_dtype, a string)",
        key, shown(value)));
  }
}

}  // namespace trainer

namespace trainer {
namespace {

// Keys of Transformers' TrainingArguments that ask for what a program without Python, network or
// a TPU cannot have: accepted as their default (which asks for nothing), otherwise refused with
// the reason.
struct InertKey {
  const char* name;
  const char* why;
};
constexpr InertKey kInertKeys[] = {
    {"push_to_hub", "there is no Hugging Face Hub here (save to output_dir and upload it)"},
    {"hub_token", "there is no Hugging Face Hub here"},
    {"hub_private_repo", "there is no Hugging Face Hub here"},
    {"hub_model_id", "there is no Hugging Face Hub here"},
    {"hub_strategy", "there is no Hugging Face Hub here"},
    {"hub_always_push", "there is no Hugging Face Hub here"},
    {"hub_revision", "there is no Hugging Face Hub here"},
    {"torch_compile",
     "torch.compile is Python's (TorchDynamo); the C++ kernels here run as they are"},
    {"torch_compile_backend", "torch.compile is Python's (TorchDynamo)"},
    {"torch_compile_mode", "torch.compile is Python's (TorchDynamo)"},
    {"trackio_space_id", "trackio is a Python integration, not built here"},
    {"trackio_bucket_id", "trackio is a Python integration, not built here"},
    {"trackio_static_space_id", "trackio is a Python integration, not built here"},
    {"optim_target_modules",
     "it names the modules of GaLore's, APOLLO's and similar optimizers, not built here"},
    {"liger_kernel_config",
     "Liger's kernels beyond use_liger_kernel's fused linear cross-entropy are Triton's"},
    {"parallelism_config",
     "tensor, context and sequence parallelism are not built here (fsdp and deepspeed shard "
     "data-parallel runs)"},
};

}  // namespace

void TrainingArguments::validate_transformers_keys() const {
  const TrainingArguments defaults;
  for (const InertKey& key : kInertKeys) {
    const args::Spec& spec = args::lookup(key.name);
    const json value = spec.get(*this);
    const json allowed = spec.get(defaults);
    if (value == allowed) continue;
    throw InputError(fmt::format("argument {}: {} is not supported: {}; accepted only as {}",
                                 key.name, shown(value), key.why,
                                 allowed.is_object() && allowed.empty()  ? "null or {}"
                                 : allowed.is_array() && allowed.empty() ? "null"
                                                                         : shown(allowed)));
  }
  check(std::isfinite(label_smoothing_factor_) && label_smoothing_factor_ >= 0 &&
            label_smoothing_factor_ < 1,
        "label_smoothing_factor", num(label_smoothing_factor_), "0 <= epsilon < 1");
  check(label_smoothing_factor_ == 0 || !is_sft() || loss_type_.front() != "dft",
        "label_smoothing_factor", num(label_smoothing_factor_),
        "0 with loss_type dft: DFT weighs each token's own loss, with nothing to smooth");
  if (neftune_noise_alpha_) {
    check(std::isfinite(*neftune_noise_alpha_) && *neftune_noise_alpha_ > 0, "neftune_noise_alpha",
          num(*neftune_noise_alpha_), "a number > 0, or null");
  }
  for (const std::string& name : label_names_) {
    check(name == "labels" || name == "label", "label_names", shown(json(label_names_)),
          "[\"labels\"] or [\"label\"]: the batches here carry their labels under one key");
  }
  const std::vector<std::string> levels = {"debug", "info",     "warning",
                                           "error", "critical", "passive"};
  check_choice("log_level", log_level_, levels);
  check_choice("log_level_replica", log_level_replica_, levels);
  check_choice("include_num_input_tokens_seen", include_num_input_tokens_seen_,
               {"no", "all", "non_padding"});
  if (torch_empty_cache_steps_) {
    check(*torch_empty_cache_steps_ > 0, "torch_empty_cache_steps",
          std::to_string(*torch_empty_cache_steps_), "a positive integer, or null");
  }
  check(local_rank_ >= -1, "local_rank", std::to_string(local_rank_),
        "-1, or the process's rank on its node");
  for (const std::string& option : debug_) {
    check(option == "underflow_overflow", "debug", shown(option),
          option == "tpu_metrics_debug" ? "tpu_metrics_debug asks for a TPU; underflow_overflow"
                                        : "underflow_overflow, or empty");
  }
}

}  // namespace trainer

namespace trainer {

// The data-loading keys, as Transformers and PyTorch's DataLoader check them.
void TrainingArguments::validate_data_loading() const {
  check(dataloader_num_workers_ >= 0 && dataloader_num_workers_ <= 1024, "dataloader_num_workers",
        std::to_string(dataloader_num_workers_), "must be in 0..1024; 0 loads on the main thread");
  if (dataloader_prefetch_factor_) {
    // Transformers' own check, then PyTorch's.
    check(dataloader_num_workers_ > 0, "dataloader_prefetch_factor",
          std::to_string(*dataloader_prefetch_factor_),
          "only with dataloader_num_workers > 0 (data loaded in other workers), else null");
    check(*dataloader_prefetch_factor_ >= 1 && *dataloader_prefetch_factor_ <= 1024,
          "dataloader_prefetch_factor", std::to_string(*dataloader_prefetch_factor_),
          "must be in 1..1024, or null");
  }
  check(!dataloader_persistent_workers_ || dataloader_num_workers_ > 0,
        "dataloader_persistent_workers", "true", "only with dataloader_num_workers > 0");
  if (dataloader_multiprocessing_context_) {
    check_choice("dataloader_multiprocessing_context", *dataloader_multiprocessing_context_,
                 {"fork", "spawn", "forkserver"});
    check(dataloader_num_workers_ > 0, "dataloader_multiprocessing_context",
          shown(json(*dataloader_multiprocessing_context_)),
          "only with dataloader_num_workers > 0, else null");
  }
  if (train_sampling_strategy_ == "batch_rebalance") {
    throw InputError(
        "argument train_sampling_strategy: \"batch_rebalance\" is not supported: Transformers' "
        "BatchRebalanceSampler is not implemented here (allowed: random, sequential, "
        "group_by_length)");
  }
  check_choice("train_sampling_strategy", train_sampling_strategy_,
               {"random", "sequential", "group_by_length"});
  check(!length_column_name_.empty(), "length_column_name", "\"\"", "a column name");
  accelerator_config_plan();
  const int64_t steps = effective_accumulation_steps();
  check(steps >= 1 && steps <= kMaxCount, "accelerator_config",
        fmt::format("gradient_accumulation_kwargs num_steps {}", steps),
        "must be in 1..2147483647");
}

AcceleratorConfigPlan TrainingArguments::accelerator_config_plan() const {
  AcceleratorConfigPlan plan;
  const json& config = accelerator_config_;
  if (config.is_null()) return plan;
  if (!config.is_object()) {
    throw InputError(fmt::format(
        "argument accelerator_config: {} is not allowed (a JSON object of AcceleratorConfig's "
        "keys, e.g. {{\"split_batches\": true}})",
        shown(config)));
  }
  const std::vector<std::string> keys = {"split_batches",       "dispatch_batches",
                                         "even_batches",        "use_seedable_sampler",
                                         "non_blocking",        "gradient_accumulation_kwargs",
                                         "use_configured_state"};
  auto flag = [&](const std::string& key, bool fallback) {
    auto it = config.find(key);
    if (it == config.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) {
      throw InputError(fmt::format(
          "argument accelerator_config: {} {} is not allowed (true or false)", key, shown(*it)));
    }
    return it->get<bool>();
  };
  for (const auto& [key, value] : config.items()) {
    if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
    throw InputError(fmt::format(
        "argument accelerator_config: key {} is not allowed (AcceleratorConfig's keys: {})",
        shown(json(key)), fmt::join(keys, ", ")));
  }
  plan.split_batches = flag("split_batches", false);
  plan.even_batches = flag("even_batches", true);
  plan.use_seedable_sampler = flag("use_seedable_sampler", true);
  plan.non_blocking = flag("non_blocking", false);
  if (flag("dispatch_batches", false)) {
    throw InputError(
        "argument accelerator_config: dispatch_batches true is not supported: every process reads "
        "its own share of the one order all of them draw, which gives the batches process 0 "
        "would send; accepted only as null or false");
  }
  if (flag("use_configured_state", false)) {
    throw InputError(
        "argument accelerator_config: use_configured_state true is not supported: the Trainer "
        "makes the one Accelerator of the process, there is no state configured before it; "
        "accepted only as false");
  }
  check(plan.even_batches, "accelerator_config", "even_batches false",
        "true: a process with fewer batches would leave the others waiting in DDP's and "
        "gather_for_metrics' collectives (Accelerate needs join_uneven_inputs for it)");
  if (auto it = config.find("gradient_accumulation_kwargs"); it != config.end() && !it->is_null()) {
    if (!it->is_object()) {
      throw InputError(fmt::format(
          "argument accelerator_config: gradient_accumulation_kwargs {} is not allowed (a JSON "
          "object: num_steps, adjust_scheduler, sync_with_dataloader, sync_each_batch)",
          shown(*it)));
    }
    for (const auto& [key, value] : it->items()) {
      if (key == "num_steps") {
        check(value.is_number_integer() && value.get<int64_t>() >= 1 &&
                  value.get<int64_t>() <= kMaxCount,
              "accelerator_config", "gradient_accumulation_kwargs num_steps " + shown(value),
              "an integer in 1..2147483647");
        // (Equal is what the Trainer makes of it, Transformers' args.gradient_accumulation_steps
        // set to num_steps.)
        check(gradient_accumulation_steps_ == 1 || gradient_accumulation_steps_ == value,
              "accelerator_config", "gradient_accumulation_kwargs num_steps " + shown(value),
              fmt::format("only with gradient_accumulation_steps 1 (it is {}), as Transformers "
                          "does not know which one is meant",
                          gradient_accumulation_steps_));
        plan.num_steps = value.get<int64_t>();
      } else if (key == "adjust_scheduler" || key == "sync_with_dataloader") {
        // The Trainer steps the schedule once per optimizer step and ends each epoch's last
        // window at the end of the data, which is what true means; Accelerate's default.
        check(value == json(true), "accelerator_config",
              fmt::format("gradient_accumulation_kwargs {} {}", key, shown(value)),
              "true (the default): the Trainer steps the schedule per optimizer step and ends "
              "an epoch's last window with its data");
      } else if (key == "sync_each_batch") {
        check(value == json(false), "accelerator_config",
              "gradient_accumulation_kwargs sync_each_batch " + shown(value),
              "false (the default): gradients are synchronised on each window's last batch");
      } else {
        throw InputError(fmt::format(
            "argument accelerator_config: gradient_accumulation_kwargs key {} is not allowed "
            "(num_steps, adjust_scheduler, sync_with_dataloader, sync_each_batch)",
            shown(json(key))));
      }
    }
  }
  return plan;
}

int64_t TrainingArguments::effective_accumulation_steps() const {
  const auto& config = accelerator_config_;
  if (!config.is_object()) return gradient_accumulation_steps_;
  auto it = config.find("gradient_accumulation_kwargs");
  if (it == config.end() || !it->is_object()) return gradient_accumulation_steps_;
  auto steps = it->find("num_steps");
  if (steps == it->end() || !steps->is_number_integer()) return gradient_accumulation_steps_;
  return steps->get<int64_t>();
}

}  // namespace trainer
