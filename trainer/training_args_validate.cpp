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
#include "trainer/training_args_checks.h"
#include "trainer/training_args_specs.h"

namespace trainer {

using namespace validate;

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
  validate_reward();
  validate_grpo();
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

}  // namespace trainer
