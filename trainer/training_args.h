// TrainingArguments: Transformers' argument names and defaults, plus the dataset and model
// choice. Read from one flat JSON object, overridden by `--name value`, validated in one place
// (validate()), written back as training_args.json; also a C++ builder with chainable setters:
//   TrainingArguments().learning_rate(1e-3).num_train_epochs(1)
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/accelerate/deepspeed_plugin.h"
#include "lib/accelerate/fsdp_plugin.h"
#include "lib/models/lora_config.h"
#include "trainer/training_args_table.h"

namespace trainer {

// The optimizer optim and optim_args name (TrainingArguments::optimizer_plan).
// accelerator_config read as Accelerate's AcceleratorConfig (accelerator_config_plan()).
struct AcceleratorConfigPlan {
  bool split_batches = false;  // batch sizes are global, split over the processes
  bool even_batches = true;    // the last round padded with samples from the start
  bool use_seedable_sampler = true;
  bool non_blocking = false;
  std::optional<int64_t> num_steps;  // gradient_accumulation_kwargs num_steps
};

struct OptimizerPlan {
  std::string name;                       // one of TrainingArguments::optimizers()
  std::map<std::string, double> options;  // optim_args: numbers, and flags as 1 or 0
};

// Activation checkpointing as activation_checkpointing (or gradient_checkpointing) and its
// kwargs ask for it (TrainingArguments::checkpointing_plan).
struct CheckpointingPlan {
  bool enabled = false;
  int64_t every_n_layers = 1;  // blocks 0, n, 2n, ... are recomputed
  bool offload = false;        // kept activations in host memory: what they are on CPU already
};

class TrainingArguments {
  // Each row of training_args_table.h: a field with its default, a chainable setter
  // `name(value)` and a getter `name()`, in the style of LibTorch's TORCH_ARG.
#define TRAINER_ARGUMENT_FIELD(T, name, default_value, help) \
 public:                                                     \
  TrainingArguments& name(T value) {                         \
    name##_ = std::move(value);                              \
    return *this;                                            \
  }                                                          \
  const T& name() const noexcept { return name##_; }         \
                                                             \
 private:                                                    \
  T name##_ = default_value;
  TRAINER_ARGUMENTS(TRAINER_ARGUMENT_FIELD)
  TRAINER_SFT_ARGUMENTS(TRAINER_ARGUMENT_FIELD)
  TRAINER_DPO_ARGUMENTS(TRAINER_ARGUMENT_FIELD)
  TRAINER_GRPO_ARGUMENTS(TRAINER_ARGUMENT_FIELD)
  TRAINER_REWARD_ARGUMENTS(TRAINER_ARGUMENT_FIELD)
  TRAINER_RLOO_ARGUMENTS(TRAINER_ARGUMENT_FIELD)
#undef TRAINER_ARGUMENT_FIELD

 public:
  // One argument's name, its default as JSON text, and what it does: for --help.
  struct Description {
    std::string name;
    std::string default_json;
    std::string help;
    std::string kind;  // "true or false", "an integer", "a number", "a string", ...
    bool is_flag() const { return kind == "true or false"; }
  };

  // Arguments from a flat JSON object, or a YAML mapping when the path ends in .yaml or .yml
  // (TRL's `--config recipe.yaml`: from_yaml_text) (empty path: defaults), then `--name value`
  // overrides
  // (name without dashes, value as typed), then validate(). Throws InputError naming the key,
  // the value and what is allowed: unknown keys (with the nearest known key), keys Transformers
  // has that this trainer does not support, wrong types, values out of range.
  // The file's keys and the overrides apply over `defaults` (sft_defaults() for `trainer sft`).
  static TrainingArguments parse(const std::string& json_path,
                                 const std::vector<std::pair<std::string, std::string>>& overrides,
                                 const TrainingArguments& defaults);
  static TrainingArguments parse(
      const std::string& json_path,
      const std::vector<std::pair<std::string, std::string>>& overrides) {
    return parse(json_path, overrides, TrainingArguments());
  }
  // The same from JSON text (used by parse and the tests).
  static TrainingArguments from_json_text(const std::string& json_text,
                                          const std::string& source = "arguments");
  static TrainingArguments from_json_text(const std::string& json_text, const std::string& source,
                                          const TrainingArguments& defaults);
  // The same from a YAML mapping, read as TRL's TrlParser reads `--config`: yaml.safe_load's
  // values (base::parse_yaml), text given for a number or a boolean converted as its
  // `--name text` would be (argparse converts a text default), `env`'s variables set in this
  // process, TRL's dataset mixture keys (datasets, streaming, test_split_size) accepted at their
  // defaults; then checked as a JSON config is.
  // (`set_env` false: env is checked, not set.)
  static TrainingArguments from_yaml_text(const std::string& yaml_text, const std::string& source,
                                          const TrainingArguments& defaults, bool set_env = true);
  // Whether `path` names a YAML config (.yaml or .yml).
  static bool is_yaml_path(const std::string& path);
  // Old or TRL-script names of arguments, with the argument each names (evaluation_strategy:
  // eval_strategy, max_seq_length: max_length, dtype: torch_dtype, lora_target_modules:
  // target_modules, lora_modules_to_save: modules_to_save). Both given with different values is
  // an error.
  static const std::vector<std::pair<std::string, std::string>>& other_names();

  // TRL's SFTConfig: these arguments with SFTConfig's defaults where they differ from
  // TrainingArguments' (learning_rate 2e-5, logging_steps 10, gradient_checkpointing true, bf16
  // `bf16`: TRL's "true unless fp16", here where the machine has bf16), and the SFT arguments
  // (TRAINER_SFT_ARGUMENTS) allowed. A key given explicitly keeps its value; fp16 given true
  // turns the bf16 default off.
  static TrainingArguments sft_defaults(bool bf16);
  // TRL's DPOConfig: as SFTConfig (its _BaseConfig's defaults) with learning_rate 1e-6 and
  // loss_type sigmoid; the DPO arguments (TRAINER_DPO_ARGUMENTS) and the SFT arguments DPOConfig
  // has too (dpo_shared_keys) allowed.
  static TrainingArguments dpo_defaults(bool bf16);
  // TRL's GRPOConfig: as DPOConfig's base (learning_rate 1e-6, logging_steps 10,
  // gradient_checkpointing true, bf16 as sft) with loss_type dapo, beta 0, disable_dropout false,
  // shuffle_dataset true; the GRPO arguments (TRAINER_GRPO_ARGUMENTS) and those of SFTConfig and
  // DPOConfig GRPOConfig has too (grpo_shared_keys) allowed.
  static TrainingArguments grpo_defaults(bool bf16);
  // TRL's RewardConfig: as SFTConfig's base (logging_steps 10, gradient_checkpointing true, bf16
  // as sft) with learning_rate 1e-4; its own argument (TRAINER_REWARD_ARGUMENTS) and those of
  // SFTConfig and DPOConfig it has too (reward_shared_keys: max_length, disable_dropout,
  // pad_to_multiple_of, eos_token, pad_token, chat_template_path, ...) allowed.
  static TrainingArguments reward_defaults(bool bf16);
  // TRL's RLOOConfig: GRPOConfig's with beta 0.05 and num_generations 2; its own arguments
  // (TRAINER_RLOO_ARGUMENTS) and GRPOConfig's but grpo_only_keys allowed. is_grpo() holds for it
  // too (GRPOConfig's checks apply), is_rloo() only for it.
  static TrainingArguments rloo_defaults(bool bf16);
  // Whether this is an SFTConfig (sft_defaults) or a DPOConfig (dpo_defaults): their own
  // arguments are refused by name elsewhere.
  bool is_sft() const { return config_ == Config::kSft; }
  bool is_dpo() const { return config_ == Config::kDpo; }
  bool is_grpo() const { return config_ == Config::kGrpo || config_ == Config::kRloo; }
  bool is_rloo() const { return config_ == Config::kRloo; }
  bool is_reward() const { return config_ == Config::kReward; }
  // The names of the SFT arguments, of the DPO arguments, and of the SFT arguments DPOConfig
  // has too (max_length, truncation_mode, padding_free, loss_type, ...).
  static const std::vector<std::string>& sft_keys();
  static const std::vector<std::string>& dpo_keys();
  static const std::vector<std::string>& dpo_shared_keys();
  static const std::vector<std::string>& grpo_keys();
  static const std::vector<std::string>& grpo_shared_keys();
  static const std::vector<std::string>& reward_keys();
  static const std::vector<std::string>& rloo_keys();
  // GRPOConfig's arguments RLOOConfig lacks (loss_type, scale_rewards, delta, ...).
  static const std::vector<std::string>& grpo_only_keys();
  static const std::vector<std::string>& reward_shared_keys();
  // TRL's script arguments (ScriptArguments and ModelConfig: dataset_train_split,
  // model_revision, attn_implementation, load_in_4bit, ...): sft and dpo take them.
  static const std::vector<std::string>& script_keys();
  // Whether a configuration of this kind takes argument `name`.
  bool takes(const std::string& name) const;
  // Whether `name` was given (in the config or on the command line).
  bool given(const std::string& name) const { return given_.count(name) > 0; }
  // Applies one `--name value` override. Throws InputError as parse() does.
  void set_from_text(const std::string& name, const std::string& value);

  // Throws InputError ("... no longer has it ...; use ...") for a key of removed_keys(); returns
  // for any other name.
  static void reject_unsupported_key(const std::string& name);

  // Checks every value against what is allowed. Throws InputError on the first bad one.
  void validate() const;
  // All arguments as one flat JSON object, in declaration order (training_args.json).
  std::string to_json() const;
  // Every argument with its default (in `defaults`: sft_defaults' for `trainer sft`) and help, in
  // declaration order.
  static std::vector<Description> describe(const TrainingArguments& defaults);
  static std::vector<Description> describe();
  // Keys that Transformers' TrainingArguments had before 5.x and has no more (refused, naming what
  // replaced them), with what replaced each ("" for nothing); unsupported_keys() their names.
  static const std::vector<std::pair<std::string, std::string>>& removed_keys();
  static const std::vector<std::string>& unsupported_keys();
  // docs/arguments.md: a Markdown table of describe() (name, type, default, meaning) and the list
  // of unsupported keys. The test suite fails when the checked-in file differs.
  static std::string arguments_markdown();

  // Derived values, as Transformers computes them.
  // warmup_steps if > 0, else ceil(warmup_ratio * total_steps).
  int64_t get_warmup_steps(int64_t total_steps) const;
  // data_seed if set, else seed.
  int64_t sampler_seed() const { return data_seed_.value_or(seed_); }
  // eval_steps if set, else logging_steps.
  double effective_eval_steps() const { return eval_steps_.value_or(logging_steps_); }
  // The integrations report_to names, "all" spelled out, "none" and repeats dropped, in the
  // order of report_integrations().
  std::vector<std::string> effective_report_to() const;
  // Every integration report_to can name.
  static const std::vector<std::string>& report_integrations();
  // run_name if set, else output_dir.
  std::string effective_run_name() const { return run_name_.value_or(output_dir_); }
  // dataset_dir if set, else the dataset's default location.
  std::string effective_dataset_dir() const;
  // metric_for_best_model, or "loss" with load_best_model_at_end or reduce_lr_on_plateau (as
  // Transformers); empty otherwise.
  std::string best_metric_name() const;
  // The key of best_metric_name() among an evaluation's metrics: with the "eval_" prefix.
  std::string best_metric_key() const;
  // greater_is_better, or (when unset) whether best_metric_name() does not end in "loss".
  bool best_metric_greater_is_better() const;
  // Accelerate's mixed_precision for bf16 / fp16: "bf16", "fp16" or "no".
  std::string mixed_precision() const { return bf16_ ? "bf16" : fp16_ ? "fp16" : "no"; }
  // LoRA is on: use_peft, or target_modules given.
  bool uses_lora() const { return use_peft_ || !target_modules_.empty(); }
  // PEFT's LoraConfig of the LoRA arguments (target_modules as given, possibly empty: the model
  // type's default is the caller's to fill in).
  models::LoraConfig lora_config() const;
  // The sharding fsdp and fsdp_config ask for (parse_fsdp_plan, lib/accelerate/fsdp_plugin.h);
  // nothing without fsdp or with no_shard. Throws InputError naming a bad word, key or value.
  // With deepspeed, the plan of its zero_optimization.stage (nothing for stage 0); deepspeed with
  // a sharding fsdp is refused.
  std::optional<FsdpPlan> fsdp_plan() const;
  // What deepspeed's config asks for (parse_deepspeed_plan, lib/accelerate/deepspeed_plugin.h),
  // read against these arguments; nothing without deepspeed. parse() and from_json_text() have
  // applied its settings already (the values it sets of arguments not given). Throws InputError
  // naming a bad key or value.
  std::optional<DeepSpeedPlan> deepspeed_plan() const;
  // The optimizers optim can name: adamw_torch_fused, adamw_torch, adafactor, sgd, adagrad,
  // rmsprop.
  static const std::vector<std::string>& optimizers();
  // optim and optim_args read as Transformers reads them (optim_args: "key=value,key=value", the
  // keys each optimizer reads, values >= 0). Throws InputError naming a bad name, key or value.
  OptimizerPlan optimizer_plan() const;
  // activation_checkpointing (else gradient_checkpointing, else false) with
  // activation_checkpointing_kwargs (else gradient_checkpointing_kwargs). Throws InputError
  // naming an unknown or bad option.
  CheckpointingPlan checkpointing_plan() const;
  // accelerator_config read as Accelerate's AcceleratorConfig: its keys typed and checked, those
  // with nothing to do here accepted only as their defaults. Throws InputError naming the key.
  AcceleratorConfigPlan accelerator_config_plan() const;
  // gradient_accumulation_steps, or accelerator_config's gradient_accumulation_kwargs num_steps
  // (which Transformers takes when gradient_accumulation_steps is 1).
  int64_t effective_accumulation_steps() const;
  // The log level of a process (Python's number: 10 debug .. 50 critical), as Transformers'
  // get_process_log_level: log_level on the node's first process (log_on_each_node) or the
  // run's first (not), log_level_replica on the others; passive keeps warning.
  int process_log_level(bool local_main, bool world_main) const;
  // A language model's training loss chunked (use_liger_kernel, null meaning true).
  bool chunked_loss() const { return use_liger_kernel_.value_or(true); }

 private:
  // The names given on the command line (set_from_text): a LoRA setting given there is refused
  // beside an adapter folder even when it equals the default.
  std::set<std::string> command_line_;
  // Every name given, in the config or on the command line.
  std::set<std::string> given_;
  enum class Config { kTraining, kSft, kDpo, kGrpo, kReward, kRloo };
  Config config_ = Config::kTraining;
  // Throws InputError for an SFT or DPO argument where it does not belong; records `name` as
  // given.
  void note_given(const std::string& name);
  // The shared end of from_json_text and from_yaml_text: an object whose keys are known, each
  // set over `defaults`, then validate().
  static TrainingArguments from_json_object(const nlohmann::ordered_json& object,
                                            const std::string& source,
                                            const TrainingArguments& defaults);
  // sft_defaults' bf16: off when fp16 was given true and bf16 was not given; and local_rank from
  // the environment's LOCAL_RANK, as Transformers' __post_init__.
  void apply_sft_bf16_default();
  // deepspeed's config read against the arguments: the values it sets of arguments not given
  // applied (an earlier config's undone first). Throws InputError as deepspeed_plan().
  void apply_deepspeed();
  // The arguments a DeepSpeed config fills and checks, with whether each was given.
  std::map<std::string, DeepSpeedArgument> deepspeed_arguments() const;
  // The arguments apply_deepspeed set, with the values they had before.
  std::vector<std::pair<std::string, nlohmann::ordered_json>> deepspeed_restore_;
  // deepspeed's config as apply_deepspeed read it, and the deepspeed value it was read for.
  nlohmann::ordered_json deepspeed_config_, deepspeed_config_of_;
  // validate()'s groups of checks (training_args_validate.cpp).
  void validate_steps_and_batches() const;
  void validate_optimizer() const;
  void validate_logging_and_saving() const;
  void validate_evaluation_keys() const;
  void validate_best_model() const;
  void validate_stopping() const;
  void validate_sft() const;
  void validate_dpo() const;
  void validate_reward() const;
  void validate_grpo() const;
  void check_model_init_kwargs() const;
  void validate_grpo_unbuilt() const;
  void validate_grpo_generation() const;
  void validate_script() const;
  void validate_devices() const;
  void validate_reporting_model_and_data() const;
  void validate_lora() const;
  void validate_transformers_keys() const;
  void validate_data_loading() const;
};

}  // namespace trainer
