// TrainingArguments: Transformers' argument names and defaults, plus the dataset and model
// choice. Read from one flat JSON object, overridden by `--name value`, validated in one place
// (validate()), written back as training_args.json; also a C++ builder with chainable setters:
//   TrainingArguments().learning_rate(1e-3).num_train_epochs(1)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

// Declares a chainable setter `name(value)` and a getter `name()` for a field with a default,
// in the style of LibTorch's TORCH_ARG.
#define TRAINER_ARG(T, name, ...)                    \
 public:                                             \
  TrainingArguments& name(T value) {                 \
    name##_ = std::move(value);                      \
    return *this;                                    \
  }                                                  \
  const T& name() const noexcept { return name##_; } \
                                                     \
 private:                                            \
  T name##_ = __VA_ARGS__

namespace trainer {

class TrainingArguments {
  TRAINER_ARG(std::string, output_dir, "trainer_output");
  TRAINER_ARG(bool, overwrite_output_dir, false);
  TRAINER_ARG(bool, do_train, false);
  TRAINER_ARG(bool, do_eval, false);
  TRAINER_ARG(double, num_train_epochs, 3.0);
  TRAINER_ARG(int64_t, max_steps, -1);
  TRAINER_ARG(int64_t, per_device_train_batch_size, 8);
  TRAINER_ARG(int64_t, per_device_eval_batch_size, 8);
  TRAINER_ARG(double, learning_rate, 5e-5);
  TRAINER_ARG(double, weight_decay, 0.0);
  TRAINER_ARG(double, adam_beta1, 0.9);
  TRAINER_ARG(double, adam_beta2, 0.999);
  TRAINER_ARG(double, adam_epsilon, 1e-8);
  TRAINER_ARG(double, max_grad_norm, 1.0);
  TRAINER_ARG(int64_t, gradient_accumulation_steps, 1);
  TRAINER_ARG(std::string, lr_scheduler_type, "linear");
  TRAINER_ARG(int64_t, warmup_steps, 0);
  TRAINER_ARG(double, warmup_ratio, 0.0);
  TRAINER_ARG(std::string, logging_strategy, "steps");
  TRAINER_ARG(double, logging_steps, 500);
  TRAINER_ARG(bool, logging_first_step, false);
  TRAINER_ARG(std::string, eval_strategy, "no");
  TRAINER_ARG(std::optional<double>, eval_steps, std::nullopt);
  TRAINER_ARG(std::string, save_strategy, "steps");
  TRAINER_ARG(double, save_steps, 500);
  TRAINER_ARG(std::optional<int64_t>, save_total_limit, std::nullopt);
  TRAINER_ARG(bool, save_only_model, false);
  TRAINER_ARG(bool, load_best_model_at_end, false);
  TRAINER_ARG(std::optional<std::string>, metric_for_best_model, std::nullopt);
  TRAINER_ARG(std::optional<bool>, greater_is_better, std::nullopt);
  // A checkpoint folder, or "true" for the newest good checkpoint in output_dir.
  TRAINER_ARG(std::optional<std::string>, resume_from_checkpoint, std::nullopt);
  TRAINER_ARG(bool, ignore_data_skip, false);
  TRAINER_ARG(int64_t, max_nonfinite_steps, 10);
  TRAINER_ARG(std::optional<int64_t>, early_stopping_patience, std::nullopt);
  TRAINER_ARG(double, early_stopping_threshold, 0.0);
  TRAINER_ARG(int64_t, seed, 42);
  TRAINER_ARG(std::optional<int64_t>, data_seed, std::nullopt);
  TRAINER_ARG(bool, use_cpu, false);
  TRAINER_ARG(bool, bf16, false);
  TRAINER_ARG(bool, fp16, false);
  // TF32 matrix products and convolutions on CUDA (null: LibTorch's default, off).
  TRAINER_ARG(std::optional<bool>, tf32, std::nullopt);
  // Capture the whole training step as a CUDA graph after warm-up and replay it.
  TRAINER_ARG(bool, cuda_graphs, false);
  // Keep a data set that fits on the CUDA device (false: host memory, copied per batch).
  TRAINER_ARG(bool, data_on_device, true);
  TRAINER_ARG(std::optional<std::string>, ddp_backend, std::nullopt);
  TRAINER_ARG(int64_t, ddp_timeout, 1800);
  TRAINER_ARG(std::optional<int64_t>, ddp_bucket_cap_mb, std::nullopt);
  TRAINER_ARG(std::optional<bool>, ddp_find_unused_parameters, std::nullopt);
  TRAINER_ARG(std::optional<bool>, ddp_broadcast_buffers, std::nullopt);
  TRAINER_ARG(bool, dataloader_drop_last, false);
  TRAINER_ARG(bool, remove_unused_columns, true);
  TRAINER_ARG(bool, disable_tqdm, false);
  TRAINER_ARG(std::vector<std::string>, report_to, {"none"});
  // Where report_to tensorboard writes (null: $TENSORBOARD_LOGGING_DIR, else
  // output_dir/runs/<Mon DD_HH-MM-SS>_<host>, as Transformers).
  TRAINER_ARG(std::optional<std::string>, logging_dir, std::nullopt);
  TRAINER_ARG(std::optional<std::string>, run_name, std::nullopt);
  TRAINER_ARG(std::string, model_name, "basic_net");
  // The model's options, a JSON object (see docs/arguments.md).
  TRAINER_ARG(nlohmann::ordered_json, model_config, nlohmann::ordered_json::object());
  // A TorchScript file (*.pt) saved from Python, trained instead of a model_name.
  TRAINER_ARG(std::optional<std::string>, model_name_or_path, std::nullopt);
  TRAINER_ARG(std::string, dataset_name, "fashion_mnist");
  // The data set's options, a JSON object.
  TRAINER_ARG(nlohmann::ordered_json, dataset_config, nlohmann::ordered_json::object());
  TRAINER_ARG(std::string, dataset_dir, "");
  TRAINER_ARG(std::optional<int64_t>, max_train_samples, std::nullopt);
  TRAINER_ARG(std::optional<int64_t>, max_eval_samples, std::nullopt);

 public:
  // One argument's name, its default as JSON text, and what it does: for --help.
  struct Description {
    std::string name;
    std::string default_json;
    std::string help;
    std::string kind;  // "true or false", "an integer", "a number", "a string", ...
    bool is_flag() const { return kind == "true or false"; }
  };

  // Arguments from a flat JSON object (empty path: defaults), then `--name value` overrides
  // (name without dashes, value as typed), then validate(). Throws InputError naming the key,
  // the value and what is allowed: unknown keys (with the nearest known key), keys Transformers
  // has that this trainer does not support, wrong types, values out of range.
  static TrainingArguments parse(const std::string& json_path,
                                 const std::vector<std::pair<std::string, std::string>>& overrides);
  // The same from JSON text (used by parse and the tests).
  static TrainingArguments from_json_text(const std::string& json_text,
                                          const std::string& source = "arguments");
  // Applies one `--name value` override. Throws InputError as parse() does.
  void set_from_text(const std::string& name, const std::string& value);

  // Throws InputError ("... does not support it") for a key of Transformers' TrainingArguments
  // that this trainer does not implement; returns for any other name.
  static void reject_unsupported_key(const std::string& name);

  // Checks every value against what is allowed. Throws InputError on the first bad one.
  void validate() const;
  // All arguments as one flat JSON object, in declaration order (training_args.json).
  std::string to_json() const;
  // Every argument with its default and help, in declaration order.
  static std::vector<Description> describe();
  // Keys of Transformers' TrainingArguments this trainer refuses.
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
  // metric_for_best_model, or "loss" with load_best_model_at_end; empty when neither.
  std::string best_metric_name() const;
  // greater_is_better, or (when unset) whether best_metric_name() does not end in "loss".
  bool best_metric_greater_is_better() const;
  // Accelerate's mixed_precision for bf16 / fp16: "bf16", "fp16" or "no".
  std::string mixed_precision() const { return bf16_ ? "bf16" : fp16_ ? "fp16" : "no"; }
};

}  // namespace trainer
