// TrainingArguments: the table of arguments (name, help, JSON conversion), parsing from JSON and
// `--name value`, and validate(), the one place where values are checked.
#include "trainer/training_args.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "lib/data/mnist_defaults.h"
#include "lib/data/names.h"
#include "lib/optim/schedules.h"
#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/text.h"
#include "lib/models/names.h"

namespace trainer {
namespace {

using json = nlohmann::ordered_json;

std::string type_name(const json& value) {
  if (value.is_number_integer()) return "integer";
  if (value.is_number()) return "number";
  return value.type_name();
}

// "an array", "a string", "an integer": a JSON value's type with its article.
std::string a_type(const json& value) {
  std::string type = type_name(value);
  return (std::string("aeiou").find(type.front()) != std::string::npos ? "an " : "a ") + type;
}

// A value as the messages quote it: its JSON text, cut short past 60 characters.
std::string shown(const json& value) {
  if (value.is_number_float() && !std::isfinite(value.get<double>())) {
    return base::python_float(value.get<double>());  // JSON has no inf or nan
  }
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  return text.size() <= 60 ? text : text.substr(0, 57) + "...";
}

[[noreturn]] void wrong_type(const std::string& key, const json& value, const char* expected) {
  if (value.is_null())
    throw InputError(fmt::format("argument {}: null, expected {}", key, expected));
  throw InputError(fmt::format("argument {}: {} is {}, expected {}", key, shown(value),
                               a_type(value), expected));
}

// JSON -> field value, with a type check that names the key.
template <typename T>
struct Convert;

template <>
struct Convert<bool> {
  static bool from(const std::string& key, const json& v) {
    if (!v.is_boolean()) wrong_type(key, v, "true or false");
    return v.get<bool>();
  }
};
template <>
struct Convert<int64_t> {
  static int64_t from(const std::string& key, const json& v) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX}) {
      throw InputError(
          fmt::format("argument {}: {} is out of range (an integer up to 2^63-1)", key, shown(v)));
    }
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_number_float()) {
      double d = v.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15)
        return static_cast<int64_t>(d);
    }
    wrong_type(key, v, "an integer");
  }
};
template <>
struct Convert<double> {
  static double from(const std::string& key, const json& v) {
    if (!v.is_number()) wrong_type(key, v, "a number");
    return v.get<double>();
  }
};
template <>
struct Convert<std::string> {
  static std::string from(const std::string& key, const json& v) {
    if (!v.is_string()) wrong_type(key, v, "a string");
    // A command-line value can hold any bytes; training_args.json (JSON) only text.
    try {
      (void)v.dump();
    } catch (const json::type_error&) {
      throw InputError(fmt::format("argument {}: {} is not valid UTF-8 text", key, shown(v)));
    }
    return v.get<std::string>();
  }
};
template <>
struct Convert<json> {
  static json from(const std::string& key, const json& v) {
    if (v.is_null()) return json::object();
    if (!v.is_object()) wrong_type(key, v, "a JSON object of options, e.g. {\"dropout\": 0.1}");
    return v;
  }
};
template <typename T>
struct Convert<std::optional<T>> {
  static std::optional<T> from(const std::string& key, const json& v) {
    if (v.is_null()) return std::nullopt;
    return Convert<T>::from(key, v);
  }
};
template <>
struct Convert<std::vector<std::string>> {
  static std::vector<std::string> from(const std::string& key, const json& v) {
    if (v.is_string()) return {v.get<std::string>()};
    if (!v.is_array()) wrong_type(key, v, "a string or a list of strings");
    std::vector<std::string> out;
    for (const auto& item : v) out.push_back(Convert<std::string>::from(key, item));
    return out;
  }
};

// A number as Python's int() or float() reads it ("01", "+1e-3", ".5", "1_000", " 2 ", "inf",
// "1e999" as inf), or nothing; an integer past int64 is an error that quotes it.
std::optional<json> python_number(const std::string& typed) {
  size_t first = typed.find_first_not_of(" \t\n");
  size_t last = typed.find_last_not_of(" \t\n");
  if (first == std::string::npos) return std::nullopt;
  std::string text = typed.substr(first, last - first + 1);
  std::string digits;  // without the underscores Python allows between digits
  for (size_t i = 0; i < text.size(); ++i) {
    bool between_digits = i > 0 && i + 1 < text.size() &&
                          std::isdigit(static_cast<unsigned char>(text[i - 1])) &&
                          std::isdigit(static_cast<unsigned char>(text[i + 1]));
    if (text[i] == '_' && between_digits) continue;
    digits += text[i];
  }
  if (digits.find_first_of("xXpP") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  if (digits.find_first_not_of("+-0123456789") == std::string::npos) {
    long long value = std::strtoll(digits.c_str(), &end, 10);
    if (*end != '\0' || end == digits.c_str()) return std::nullopt;
    if (errno == ERANGE) {
      throw InputError(fmt::format("{} is out of range (an integer up to 2^63-1)", typed));
    }
    return json(static_cast<int64_t>(value));
  }
  double value = std::strtod(digits.c_str(), &end);
  if (*end != '\0' || end == digits.c_str()) return std::nullopt;
  return json(value);
}

// Command-line text -> JSON for a field of type T: strings stay text, the rest is read as JSON
// (with Python's True/False/None accepted, as HfArgumentParser takes them).
template <typename T>
json text_to_json(const std::string& text) {
  constexpr bool is_string =
      std::is_same_v<T, std::string> || std::is_same_v<T, std::optional<std::string>>;
  if constexpr (is_string) {
    if (std::is_same_v<T, std::optional<std::string>> && (text == "None" || text == "null"))
      return nullptr;
    return text;
  }
  if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    if (!text.empty() && text.front() == '[') {
      json parsed = json::parse(text, nullptr, false);
      if (!parsed.is_discarded()) return parsed;
    }
    json list = json::array();
    size_t start = 0;
    while (start <= text.size()) {
      size_t comma = text.find(',', start);
      if (comma == std::string::npos) comma = text.size();
      if (comma > start) list.push_back(text.substr(start, comma - start));
      start = comma + 1;
    }
    return list;
  }
  if (text == "True" || text == "true") return true;
  if (text == "False" || text == "false") return false;
  if (text == "None" || text == "null") return nullptr;
  constexpr bool is_number = std::is_same_v<T, int64_t> ||
                             std::is_same_v<T, std::optional<int64_t>> ||
                             std::is_same_v<T, double> || std::is_same_v<T, std::optional<double>>;
  if constexpr (is_number) {
    if (auto number = python_number(text)) return *number;
  }
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return text;  // reported as a wrong type, with the text quoted
  return parsed;
}

// What a value of type T must be, in the words of the error messages.
template <typename T>
const char* kind_of() {
  if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::optional<bool>>) {
    return "true or false";
  } else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, std::optional<int64_t>>) {
    return "an integer";
  } else if constexpr (std::is_same_v<T, double> || std::is_same_v<T, std::optional<double>>) {
    return "a number";
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    return "a string or a list of strings";
  } else if constexpr (std::is_same_v<T, json>) {
    return "a JSON object";
  } else {
    return "a string";
  }
}

struct Spec {
  std::string name;
  std::string help;
  const char* kind;
  std::function<json(const TrainingArguments&)> get;
  std::function<void(TrainingArguments&, const json&)> set;
  std::function<json(const std::string&)> parse_text;
};

template <typename T>
json to_json_value(const T& v) {
  if constexpr (std::is_same_v<T, std::optional<std::string>> ||
                std::is_same_v<T, std::optional<int64_t>> ||
                std::is_same_v<T, std::optional<double>> ||
                std::is_same_v<T, std::optional<bool>>) {
    return v ? json(*v) : json(nullptr);
  } else {
    return json(v);
  }
}

#define SPEC(T, field, text)                                                                                  \
  Spec {                                                                                                      \
#field, text, kind_of<T>(), [](const TrainingArguments& a) { return to_json_value<T>(a.field()); },         \
        [](TrainingArguments& a, const json& v) { a.field(Convert<T>::from(#field, v)); },        \
        [](const std::string& s) { return text_to_json<T>(s); } \
  }

const std::vector<Spec>& specs() {
  static const std::vector<Spec> table = {
      SPEC(std::string, output_dir,
           "Where trainer_state.json, training_args.json, model.safetensors and the results go."),
      SPEC(bool, overwrite_output_dir,
           "Train into an output_dir that already holds files, replacing an earlier run's "
           "results."),
      SPEC(bool, do_train, "Accepted for compatibility; `trainer train` always trains."),
      SPEC(bool, do_eval, "Evaluate after training even when eval_strategy is \"no\"."),
      SPEC(double, num_train_epochs, "Number of epochs (a fraction ends mid-epoch)."),
      SPEC(int64_t, max_steps, "If > 0: total optimization steps, overriding num_train_epochs."),
      SPEC(int64_t, per_device_train_batch_size, "Training batch size per process."),
      SPEC(int64_t, per_device_eval_batch_size, "Evaluation batch size per process."),
      SPEC(double, learning_rate, "Initial AdamW learning rate."),
      SPEC(double, weight_decay,
           "AdamW weight decay, applied to all parameters but biases and norms."),
      SPEC(double, adam_beta1, "AdamW beta1."),
      SPEC(double, adam_beta2, "AdamW beta2."),
      SPEC(double, adam_epsilon, "AdamW epsilon."),
      SPEC(double, max_grad_norm, "Gradient clipping norm (0 disables clipping)."),
      SPEC(int64_t, gradient_accumulation_steps, "Batches accumulated before each optimizer step."),
      SPEC(std::string, lr_scheduler_type, "linear, cosine, constant or constant_with_warmup."),
      SPEC(int64_t, warmup_steps, "Linear warmup steps (overrides warmup_ratio when > 0)."),
      SPEC(double, warmup_ratio, "Fraction of the total steps used for linear warmup."),
      SPEC(std::string, logging_strategy, "no, steps or epoch."),
      SPEC(double, logging_steps,
           "Log every N steps (a value below 1 is a fraction of the total)."),
      SPEC(bool, logging_first_step, "Also log the first step."),
      SPEC(std::string, eval_strategy, "no, steps or epoch (old name: evaluation_strategy)."),
      SPEC(std::optional<double>, eval_steps, "Evaluate every N steps (default: logging_steps)."),
      SPEC(std::string, save_strategy,
           "When to save a checkpoint-<step> folder: no, steps, epoch, or best (when "
           "metric_for_best_model improves)."),
      SPEC(double, save_steps,
           "Save every N steps with save_strategy steps (a value below 1 is a fraction of the "
           "total)."),
      SPEC(std::optional<int64_t>, save_total_limit,
           "Keep at most N checkpoints: the newest, and the best one with load_best_model_at_end "
           "(null: keep all)."),
      SPEC(bool, save_only_model,
           "Checkpoints hold the model only, no optimizer, schedule or random state (they cannot "
           "be resumed)."),
      SPEC(bool, load_best_model_at_end,
           "Load the checkpoint with the best metric_for_best_model when training ends (needs "
           "save_strategy to match eval_strategy)."),
      SPEC(std::optional<std::string>, metric_for_best_model,
           "Metric that picks the best checkpoint, e.g. loss or accuracy (default with "
           "load_best_model_at_end: loss)."),
      SPEC(std::optional<bool>, greater_is_better,
           "Whether a greater metric_for_best_model is better (default: false for names ending in "
           "loss, else true)."),
      Spec{"resume_from_checkpoint",
           "Resume training from a checkpoint folder, or true for the newest good checkpoint in "
           "output_dir.",
           "a path, or true",
           [](const TrainingArguments& a) -> json {
             const auto& v = a.resume_from_checkpoint();
             if (!v) return nullptr;
             return *v == "true" ? json(true) : json(*v);
           },
           [](TrainingArguments& a, const json& v) {
             // true, or a word for it, is the newest checkpoint; false and null are none.
             std::optional<std::string> value;
             if (v.is_boolean()) {
               if (v.get<bool>()) value = "true";
             } else {
               value = Convert<std::optional<std::string>>::from("resume_from_checkpoint", v);
               std::string word = value.value_or("");
               std::transform(word.begin(), word.end(), word.begin(),
                              [](unsigned char c) { return std::tolower(c); });
               if (word == "true") value = "true";
               if (word == "false") value.reset();
               if (value && value->empty()) {
                 throw InputError(
                     "argument resume_from_checkpoint: \"\" is not allowed (a checkpoint "
                     "folder, or true for the newest in output_dir)");
               }
             }
             a.resume_from_checkpoint(value);
           },
           [](const std::string& s) -> json {
             if (s == "None" || s == "null") return nullptr;
             return s;
           }},
      SPEC(bool, ignore_data_skip,
           "On resume, start the interrupted epoch from its beginning instead of skipping the "
           "batches already trained on."),
      SPEC(int64_t, max_nonfinite_steps,
           "Stop with an error after this many steps in a row with a non-finite loss or gradient "
           "norm (each one's update is skipped); 0: never stop."),
      SPEC(std::optional<int64_t>, early_stopping_patience,
           "Stop training after this many evaluations without improving metric_for_best_model "
           "(Transformers' EarlyStoppingCallback; null: off)."),
      SPEC(double, early_stopping_threshold,
           "How much metric_for_best_model must improve to count, with early_stopping_patience."),
      SPEC(int64_t, seed,
           "Seed for model initialisation, dropout and (without data_seed) shuffling."),
      SPEC(std::optional<int64_t>, data_seed,
           "Seed for shuffling the training data (default: seed)."),
      SPEC(bool, use_cpu, "Train on the CPU even where CUDA is available."),
      SPEC(bool, bf16, "bf16 mixed precision (autocast), on CPU and CUDA."),
      SPEC(bool, fp16, "fp16 mixed precision with loss scaling (CUDA only)."),
      SPEC(std::optional<bool>, tf32,
           "TF32 tensor-core math for float32 matrix products and convolutions (CUDA only; null: "
           "LibTorch's default, off)."),
      SPEC(bool, cuda_graphs,
           "Capture the whole training step (forward, backward, optimizer) as a CUDA graph after "
           "3 warm-up steps and replay it; falls back to eager steps, with a warning, where it "
           "cannot (CPU, several processes, fp16, gradient accumulation, a step that syncs)."),
      SPEC(bool, data_on_device,
           "On CUDA, keep a data set that fits on the device and sample, gather and normalise "
           "batches there (false: host memory, each batch copied over)."),
      SPEC(std::optional<std::string>, ddp_backend,
           "Process-group backend with several processes: gloo or nccl (default: nccl on CUDA, "
           "gloo on CPU)."),
      SPEC(int64_t, ddp_timeout,
           "Seconds the rendezvous and each collective may take before the run fails."),
      SPEC(std::optional<int64_t>, ddp_bucket_cap_mb,
           "DDP gradient bucket size in MiB (default: 25, as PyTorch)."),
      SPEC(std::optional<bool>, ddp_find_unused_parameters,
           "Let DDP look for parameters the forward did not use (default: false)."),
      SPEC(std::optional<bool>, ddp_broadcast_buffers,
           "Broadcast rank 0's buffers at every training forward (default: true)."),
      SPEC(bool, dataloader_drop_last, "Drop the last incomplete training batch."),
      SPEC(bool, remove_unused_columns,
           "Accepted for compatibility; batches keep what the collator builds."),
      SPEC(bool, disable_tqdm, "No progress bar, only the log lines."),
      SPEC(std::vector<std::string>, report_to,
           "Integrations to report the logs to: tensorboard (event files under logging_dir), "
           "jsonl (output_dir/log_history.jsonl, one line per log as it happens), all, or none."),
      SPEC(std::optional<std::string>, logging_dir,
           "Where report_to tensorboard writes (default: $TENSORBOARD_LOGGING_DIR, else "
           "output_dir/runs/<Mon DD_HH-MM-SS>_<host>)."),
      SPEC(std::optional<std::string>, run_name, "Name of the run (default: output_dir)."),
      SPEC(std::string, model_name,
           "Model to train, by name: basic_net (the tutorial's), mlp, resnet, or gpt (a "
           "decoder-only transformer, for dataset_name text)."),
      SPEC(json, model_config,
           "The model's options: mlp {hidden_sizes [128], activation relu|gelu|tanh, dropout 0}; "
           "resnet {width 16, stages 3, blocks_per_stage 2}; gpt {n_layer 4, n_head 4, n_embd 128, "
           "block_size (the data's context_length), dropout 0, bias true}; basic_net {fused true: "
           "false runs LibTorch's plain ops, as PyTorch's BasicNet}; a TorchScript model {outputs "
           "logits|log_probs}."),
      SPEC(std::optional<std::string>, model_name_or_path,
           "A TorchScript module (*.pt, saved from Python with torch.jit.script) to train instead "
           "of a model_name; output_dir gets it back as model.pt with the trained weights."),
      SPEC(std::string, dataset_name,
           "fashion_mnist or mnist (MNIST-format files), csv (a table with a header), or text "
           "(byte-level language modeling on a UTF-8 file or folder)."),
      SPEC(json, dataset_config,
           "The data set's options: csv {path (required), label \"label\", features (default: "
           "all other columns), task classification|regression, validation_fraction 0.2, seed "
           "42}; text {path /usr/share/games/fortunes, context_length 128, stride "
           "(context_length), validation_fraction 0.1, seed 42}; none for fashion_mnist and "
           "mnist."),
      SPEC(std::string, dataset_dir,
           "Directory with the four IDX files (default for fashion_mnist: "
           "/usr/share/datasets/fashion-mnist); for csv, where a relative path is found; for text, "
           "the corpus, instead of dataset_config's path."),
      SPEC(std::optional<int64_t>, max_train_samples, "Use only the first N training examples."),
      SPEC(std::optional<int64_t>, max_eval_samples, "Use only the first N evaluation examples."),
  };
  return table;
}
#undef SPEC

}  // namespace

// Keys of Transformers' TrainingArguments that this trainer does not implement.
const std::vector<std::string>& TrainingArguments::unsupported_keys() {
  static const std::vector<std::string> keys = {"accelerator_config",
                                                "adafactor",
                                                "auto_find_batch_size",
                                                "average_tokens_across_devices",
                                                "batch_eval_metrics",
                                                "bf16_full_eval",
                                                "dataloader_num_workers",
                                                "dataloader_persistent_workers",
                                                "dataloader_pin_memory",
                                                "dataloader_prefetch_factor",
                                                "debug",
                                                "deepspeed",
                                                "dispatch_batches",
                                                "do_predict",
                                                "eval_accumulation_steps",
                                                "eval_delay",
                                                "eval_do_concat_batches",
                                                "eval_on_start",
                                                "fp16_backend",
                                                "fp16_full_eval",
                                                "fp16_opt_level",
                                                "fsdp",
                                                "fsdp_config",
                                                "fsdp_min_num_params",
                                                "fsdp_transformer_layer_cls_to_wrap",
                                                "full_determinism",
                                                "gradient_checkpointing",
                                                "gradient_checkpointing_kwargs",
                                                "group_by_length",
                                                "half_precision_backend",
                                                "hub_model_id",
                                                "hub_private_repo",
                                                "hub_strategy",
                                                "hub_token",
                                                "include_for_metrics",
                                                "include_inputs_for_metrics",
                                                "include_num_input_tokens_seen",
                                                "include_tokens_per_second",
                                                "jit_mode_eval",
                                                "label_names",
                                                "label_smoothing_factor",
                                                "length_column_name",
                                                "local_rank",
                                                "log_level",
                                                "log_level_replica",
                                                "log_on_each_node",
                                                "logging_nan_inf_filter",
                                                "lr_scheduler_kwargs",
                                                "mp_parameters",
                                                "neftune_noise_alpha",
                                                "no_cuda",
                                                "optim",
                                                "optim_args",
                                                "optim_target_modules",
                                                "past_index",
                                                "per_gpu_eval_batch_size",
                                                "per_gpu_train_batch_size",
                                                "prediction_loss_only",
                                                "push_to_hub",
                                                "ray_scope",
                                                "restore_callback_states_from_checkpoint",
                                                "save_on_each_node",
                                                "save_safetensors",
                                                "sharded_ddp",
                                                "skip_memory_metrics",
                                                "split_batches",
                                                "torch_compile",
                                                "torch_compile_backend",
                                                "torch_compile_mode",
                                                "torchdynamo",
                                                "tpu_metrics_debug",
                                                "tpu_num_cores",
                                                "use_ipex",
                                                "use_legacy_prediction_loop",
                                                "use_liger_kernel",
                                                "use_mps_device"};
  return keys;
}

namespace {

const Spec* find_spec(const std::string& name) {
  for (const auto& s : specs()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

// The spec for `key` (with evaluation_strategy as eval_strategy's old name); throws for keys
// that Transformers has and we do not, and for unknown keys with the nearest known one.
const Spec& lookup(const std::string& key) {
  if (key == "evaluation_strategy") return *find_spec("eval_strategy");
  if (key.empty()) throw InputError("an empty name \"\" is not an argument");
  if (const Spec* s = find_spec(key)) return *s;
  TrainingArguments::reject_unsupported_key(key);
  std::vector<std::string> names;
  for (const auto& s : specs()) names.push_back(s.name);
  std::string near = base::nearest(key, names);
  throw InputError(fmt::format(
      "unknown argument {}{}", key,
      near.empty() ? " (see trainer train --help)" : fmt::format(" (did you mean {}?)", near)));
}

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

void TrainingArguments::reject_unsupported_key(const std::string& name) {
  const auto& keys = unsupported_keys();
  if (std::find(keys.begin(), keys.end(), name) == keys.end()) return;
  throw InputError(fmt::format(
      "argument {}: Transformers' TrainingArguments has it, but this trainer does not support it",
      name));
}

TrainingArguments TrainingArguments::from_json_text(const std::string& json_text,
                                                    const std::string& source) {
  // The callback sees each top-level key as it is read. An unknown key, a key given twice or a
  // nested object is recorded (the first one is reported, after any syntax error) and dropped,
  // so the object never grows past the ~50 known keys and reading stays linear in the text's
  // size whatever it holds.
  std::map<std::string, std::string> seen;  // key -> its value, as the messages quote it
  std::string key;
  std::optional<std::string> error;
  auto fail = [&](const std::string& message) {
    if (!error) error = message;
    return false;
  };
  auto on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if (error && depth >= 1) return false;  // the rest is only checked for syntax
    if (depth > 8 &&
        (event == json::parse_event_t::array_start || event == json::parse_event_t::object_start)) {
      // No argument nests; a deep value would only cost stack when it is printed.
      return fail(fmt::format("{}: values nested deeper than 8 levels (under {})", source,
                              key.empty() ? "the top level" : key));
    }
    if (depth == 1 && event == json::parse_event_t::key) {
      key = parsed.get<std::string>();
      try {
        lookup(key);
      } catch (const InputError& e) {
        return fail(e.what());
      }
      if (auto it = seen.find(key); it != seen.end()) {
        return fail(
            fmt::format("{}: {} is given twice (first {}); give it once", source, key, it->second));
      }
      seen[key] = "";
    } else if (depth >= 1 && event == json::parse_event_t::object_start &&
               std::string(lookup(key).kind) != kind_of<json>()) {
      return fail(
          fmt::format("argument {}: an object is not allowed, expected {}", key, lookup(key).kind));
    } else if (depth == 1 &&
               (event == json::parse_event_t::value || event == json::parse_event_t::array_end ||
                event == json::parse_event_t::object_end)) {
      seen[key] = shown(parsed);
    }
    return true;
  };
  json object;
  try {
    object = json::parse(json_text, on_event);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for 1e400
    std::string what = e.what();
    throw InputError(
        fmt::format("{} is not valid JSON: {}", source, what.substr(what.find(']') + 2)));
  }
  if (error) throw InputError(*error);
  if (!object.is_object()) {
    throw InputError(fmt::format("{} must hold one flat JSON object of arguments, not {}", source,
                                 a_type(object)));
  }
  if (object.contains("eval_strategy") && object.contains("evaluation_strategy") &&
      object["eval_strategy"] != object["evaluation_strategy"]) {
    throw InputError(fmt::format(
        "{}: eval_strategy {} and its old name evaluation_strategy {} disagree (give one)", source,
        shown(object["eval_strategy"]), shown(object["evaluation_strategy"])));
  }
  TrainingArguments args;
  for (const auto& [name, value] : object.items()) lookup(name).set(args, value);
  args.validate();
  return args;
}

void TrainingArguments::set_from_text(const std::string& name, const std::string& value) {
  const Spec& spec = lookup(name);
  json parsed;
  try {
    parsed = spec.parse_text(value);
  } catch (const InputError& e) {
    throw InputError(fmt::format("argument {}: {}", name, e.what()));
  }
  spec.set(*this, parsed);
}

TrainingArguments TrainingArguments::parse(
    const std::string& json_path,
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  TrainingArguments args;
  if (!json_path.empty()) {
    // A configuration is a few kilobytes; 1 GiB bounds what a wrong path can make us read.
    args = from_json_text(base::read_file(json_path, size_t{1} << 30), json_path);
  }
  for (const auto& [name, value] : overrides) args.set_from_text(name, value);
  args.validate();
  return args;
}

void TrainingArguments::validate() const {
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
  check_choice("lr_scheduler_type", lr_scheduler_type_, optim::lr_scheduler_types());
  check(warmup_steps_ >= 0, "warmup_steps", std::to_string(warmup_steps_), "must be >= 0");
  check(warmup_ratio_ >= 0 && warmup_ratio_ <= 1, "warmup_ratio", num(warmup_ratio_),
        "must be in [0, 1]");
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
  check(seed_ >= 0, "seed", std::to_string(seed_), "must be >= 0");
  check(!(bf16_ && fp16_), "fp16", "true", "bf16 is true too; choose one mixed precision");
  if (ddp_backend_) check_choice("ddp_backend", *ddp_backend_, {"gloo", "nccl"});
  // c10d's sockets take the timeout in int32 milliseconds.
  check(ddp_timeout_ >= 1 && ddp_timeout_ <= 2147483, "ddp_timeout", std::to_string(ddp_timeout_),
        "must be in 1..2147483 seconds, about 24 days");
  if (ddp_bucket_cap_mb_) {
    check(*ddp_bucket_cap_mb_ >= 1 && *ddp_bucket_cap_mb_ <= 1048576, "ddp_bucket_cap_mb",
          std::to_string(*ddp_bucket_cap_mb_), "must be in 1..1048576");
  }
  if (data_seed_) check(*data_seed_ >= 0, "data_seed", std::to_string(*data_seed_), "must be >= 0");
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
  check_choice("dataset_name", dataset_name_, data::dataset_names());
  if (model_name_or_path_) {
    check(!model_name_or_path_->empty(), "model_name_or_path", "\"\"",
          "a TorchScript file (*.pt), or null");
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
}

std::string TrainingArguments::to_json() const {
  json out = json::object();
  for (const auto& spec : specs()) out[spec.name] = spec.get(*this);
  return out.dump(2) + "\n";
}

std::string TrainingArguments::arguments_markdown() {
  // A table cell: pipes escaped, so help text cannot split a row.
  auto cell = [](std::string text) {
    std::string out;
    for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
    return out;
  };
  std::string out =
      "# Training arguments\n\n"
      "Generated from the argument table in `trainer/training_args.cpp` "
      "(`TrainingArguments::arguments_markdown`); the test `Docs.ArgumentsMdIsUpToDate` fails when "
      "this file is stale, and `TRAINER_UPDATE_DOCS=1 build/bin/trainer_tests "
      "--gtest_filter=Docs.*` rewrites it.\n\n"
      "Each is a key of the JSON config or a `--name value` option of `trainer train` and "
      "`trainer evaluate`, with Transformers' name and meaning.\n\n"
      "| Argument | Type | Default | Meaning |\n|---|---|---|---|\n";
  for (const auto& d : describe()) {
    out += fmt::format("| `{}` | {} | `{}` | {} |\n", d.name, cell(d.kind), cell(d.default_json),
                       cell(d.help));
  }
  out +=
      "\n## Not supported\n\n"
      "Transformers' `TrainingArguments` has these keys; a config or option naming one is an "
      "error (exit 2) saying that this trainer does not support it:\n\n";
  for (const auto& key : unsupported_keys()) out += fmt::format("- `{}`\n", key);
  return out;
}

std::vector<TrainingArguments::Description> TrainingArguments::describe() {
  TrainingArguments defaults;
  std::vector<Description> out;
  for (const auto& spec : specs())
    out.push_back({spec.name, spec.get(defaults).dump(), spec.help, spec.kind});
  return out;
}

const std::vector<std::string>& TrainingArguments::report_integrations() {
  static const std::vector<std::string> names = {"tensorboard", "jsonl"};
  return names;
}

std::vector<std::string> TrainingArguments::effective_report_to() const {
  std::vector<std::string> out;
  for (const std::string& name : report_integrations()) {
    bool named = std::find(report_to_.begin(), report_to_.end(), name) != report_to_.end();
    if (named || report_to_ == std::vector<std::string>{"all"}) out.push_back(name);
  }
  return out;
}

int64_t TrainingArguments::get_warmup_steps(int64_t total_steps) const {
  if (warmup_steps_ > 0) return warmup_steps_;
  return static_cast<int64_t>(std::ceil(warmup_ratio_ * static_cast<double>(total_steps)));
}

std::string TrainingArguments::best_metric_name() const {
  if (metric_for_best_model_) return *metric_for_best_model_;
  return load_best_model_at_end_ ? "loss" : "";
}

bool TrainingArguments::best_metric_greater_is_better() const {
  if (greater_is_better_) return *greater_is_better_;
  const std::string name = best_metric_name();
  return !(name.size() >= 4 && name.compare(name.size() - 4, 4, "loss") == 0);
}

std::string TrainingArguments::effective_dataset_dir() const {
  if (!dataset_dir_.empty()) return dataset_dir_;
  return data::kFashionMnistDir;
}

}  // namespace trainer
