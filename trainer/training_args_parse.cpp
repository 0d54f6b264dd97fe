// Reading TrainingArguments: a JSON config (one flat object, checked key by key as it is read) or a
// YAML one (TRL's `--config recipe.yaml`), `--name value` overrides, and the keys of Transformers'
// TrainingArguments that are refused.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"
#include "lib/base/yaml_text.h"
#include "trainer/training_args_specs.h"

namespace trainer {

using json = nlohmann::ordered_json;
using args::lookup;
using base::a_type;
using base::shown;

// Keys that Transformers' TrainingArguments had before 5.x and has no more, with what replaced
// them (empty: nothing). Every key of 5.24 is a row of the table.
const std::vector<std::pair<std::string, std::string>>& TrainingArguments::removed_keys() {
  static const std::vector<std::pair<std::string, std::string>> keys = {
      {"adafactor", "optim adafactor"},
      {"dispatch_batches", "accelerator_config {\"dispatch_batches\": ...}"},
      {"split_batches", "accelerator_config {\"split_batches\": ...}"},
      {"fp16_backend", "fp16 (autocast with a GradScaler)"},
      {"half_precision_backend", "bf16 or fp16 (autocast)"},
      {"fp16_opt_level", "fp16 (no apex here)"},
      {"fsdp_min_num_params", "fsdp_config {\"min_num_params\": ...}"},
      {"fsdp_transformer_layer_cls_to_wrap",
       "fsdp_config {\"transformer_layer_cls_to_wrap\": ...}"},
      {"include_inputs_for_metrics", "include_for_metrics [\"inputs\"]"},
      {"include_tokens_per_second", "include_num_input_tokens_seen"},
      {"jit_mode_eval", ""},
      {"mp_parameters", ""},
      {"no_cuda", "use_cpu"},
      {"past_index", ""},
      {"per_gpu_eval_batch_size", "per_device_eval_batch_size"},
      {"per_gpu_train_batch_size", "per_device_train_batch_size"},
      {"ray_scope", ""},
      {"save_safetensors", "nothing: weights are always safetensors"},
      {"sharded_ddp", "fsdp"},
      {"torchdynamo", "torch_compile_backend"},
      {"tpu_metrics_debug", "debug (no TPU here)"},
      {"tpu_num_cores", ""},
      {"use_ipex", ""},
      {"use_legacy_prediction_loop", ""},
      {"use_mps_device", "use_cpu (no MPS here)"}};
  return keys;
}

const std::vector<std::string>& TrainingArguments::unsupported_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> out;
    for (const auto& [key, replacement] : removed_keys()) out.push_back(key);
    return out;
  }();
  return keys;
}

void TrainingArguments::reject_unsupported_key(const std::string& name) {
  for (const auto& [key, replacement] : removed_keys()) {
    if (key != name) continue;
    throw InputError(fmt::format(
        "argument {}: Transformers' TrainingArguments no longer has it (removed before 5.x){}",
        name, replacement.empty() ? "; nothing replaces it" : "; use " + replacement));
  }
}

TrainingArguments TrainingArguments::from_json_text(const std::string& json_text,
                                                    const std::string& source) {
  return from_json_text(json_text, source, TrainingArguments());
}

TrainingArguments TrainingArguments::from_json_text(const std::string& json_text,
                                                    const std::string& source,
                                                    const TrainingArguments& defaults) {
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
               std::string(lookup(key).kind) != args::kJsonObjectKind &&
               std::string(lookup(key).kind) != args::kPathOrJsonObjectKind) {
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
    throw InputError(fmt::format("{} is not valid JSON: {}", source, base::json_error_text(e)));
  }
  if (error) throw InputError(*error);
  if (!object.is_object()) {
    throw InputError(fmt::format("{} must hold one flat JSON object of arguments, not {}", source,
                                 a_type(object)));
  }
  return from_json_object(object, source, defaults);
}

const std::vector<std::pair<std::string, std::string>>& TrainingArguments::other_names() {
  static const std::vector<std::pair<std::string, std::string>> names = {
      {"evaluation_strategy", "eval_strategy"},      // Transformers' old name
      {"max_seq_length", "max_length"},              // TRL's old name (SFTConfig)
      {"dtype", "torch_dtype"},                      // TRL's ModelConfig
      {"lora_target_modules", "target_modules"},     // TRL's ModelConfig
      {"lora_modules_to_save", "modules_to_save"}};  // TRL's ModelConfig
  return names;
}

TrainingArguments TrainingArguments::from_json_object(const json& object, const std::string& source,
                                                      const TrainingArguments& defaults) {
  for (const auto& [old_name, name] : other_names()) {
    if (object.contains(name) && object.contains(old_name) && object[name] != object[old_name]) {
      const bool old = old_name == "evaluation_strategy" || old_name == "max_seq_length";
      throw InputError(fmt::format("{}: {} {} and {} {} {} disagree (give one)", source, name,
                                   shown(object[name]), old ? "its old name" : "TRL's name",
                                   old_name, shown(object[old_name])));
    }
  }
  TrainingArguments args = defaults;
  for (const auto& [name, value] : object.items()) {
    const args::Spec& spec = lookup(name);
    args.note_given(spec.name);
    spec.set(args, value);
  }
  args.apply_sft_bf16_default();
  args.apply_deepspeed();
  args.validate();
  return args;
}

namespace {

// A YAML value's type in a YAML user's words (a list, a mapping).
std::string yaml_type(const json& value) {
  if (value.is_array()) return "a list";
  if (value.is_object()) return "a mapping";
  return a_type(value);
}

// Python's str() of a YAML scalar, as TRL sets `env`'s variables (os.environ[key] = str(value)).
std::string python_str(const std::string& key, const json& value, const std::string& source) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "True" : "False";
  if (value.is_null()) return "None";
  if (value.is_number()) return shown(value);
  throw InputError(
      fmt::format("{}: env {} is {}; env's variables take a text, a number or a "
                  "boolean",
                  source, key, a_type(value)));
}

// argparse's string_to_bool, as HfArgumentParser converts a boolean given as text.
std::optional<bool> bool_word(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* word : {"yes", "true", "t", "y", "1"}) {
    if (text == word) return true;
  }
  for (const char* word : {"no", "false", "f", "n", "0"}) {
    if (text == word) return false;
  }
  return std::nullopt;
}

}  // namespace

bool TrainingArguments::is_yaml_path(const std::string& path) {
  auto ends = [&](const std::string& suffix) {
    if (path.size() < suffix.size()) return false;
    std::string tail = path.substr(path.size() - suffix.size());
    for (char& c : tail) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return tail == suffix;
  };
  return ends(".yaml") || ends(".yml");
}

TrainingArguments TrainingArguments::from_yaml_text(const std::string& yaml_text,
                                                    const std::string& source,
                                                    const TrainingArguments& defaults,
                                                    bool set_env) {
  // No argument nests deeper than a JSON config may (8 levels).
  json object = base::parse_yaml(yaml_text, source, 8);
  if (!object.is_object()) {
    throw InputError(fmt::format("{} must hold one YAML mapping of arguments, not {}", source,
                                 object.is_null() ? "nothing" : yaml_type(object)));
  }
  // TrlParser: `env` sets environment variables, before anything reads them.
  if (object.contains("env")) {
    const json env = object["env"];
    object.erase("env");
    if (!env.is_object() && !env.is_null()) {
      throw InputError(fmt::format("{}: env is {}; it takes a mapping of variables to values",
                                   source, yaml_type(env)));
    }
    if (env.is_object()) {
      for (const auto& [key, value] : env.items()) {
        if (key.empty() || key.find('=') != std::string::npos) {
          throw InputError(
              fmt::format("{}: env {} is not a variable name", source, base::shown_text(key)));
        }
        const std::string text = python_str(key, value, source);
        if (set_env) ::setenv(key.c_str(), text.c_str(), 1);
      }
    }
  }
  // TRL's dataset mixture (DatasetMixtureConfig), at its defaults only.
  for (const auto& [key, at_default] :
       {std::pair{"datasets", json::array()}, std::pair{"streaming", json(false)},
        std::pair{"test_split_size", json(nullptr)}}) {
    if (!object.contains(key)) continue;
    const json& value = object[key];
    if (value != at_default && !value.is_null()) {
      throw InputError(fmt::format(
          "{}: {} {}: TRL's dataset mixture (datasets, streaming, test_split_size) is not "
          "supported; give dataset_name (a .json/.jsonl file or a folder of them)",
          source, key, shown(value)));
    }
    object.erase(key);
  }
  for (auto& [key, value] : object.items()) {
    const args::Spec& spec = lookup(key);  // an unknown key is refused here
    const std::string kind = spec.kind;
    if (value.is_object() && kind != args::kJsonObjectKind) {
      throw InputError(
          fmt::format("argument {}: a mapping is not allowed, expected {}", key, spec.kind));
    }
    // argparse converts a text default with the argument's type: `learning_rate: 1e-5` (text
    // to YAML 1.1) is the number 1e-5 to TRL, `bf16: "true"` true.
    if (!value.is_string() || kind.rfind("a string", 0) == 0 || kind.rfind("a path", 0) == 0) {
      continue;
    }
    const std::string text = value.get<std::string>();
    if (kind == "true or false") {
      if (auto b = bool_word(text)) {
        value = *b;
      } else {
        throw InputError(
            fmt::format("argument {}: {} is not true or false (yes/no, true/false, t/f, y/n, 1/0)",
                        key, base::shown_text(text)));
      }
      continue;
    }
    try {
      value = spec.parse_text(text);
    } catch (const InputError& e) {
      throw InputError(fmt::format("argument {}: {}", key, e.what()));
    }
  }
  return from_json_object(object, source, defaults);
}

void TrainingArguments::set_from_text(const std::string& name, const std::string& value) {
  const args::Spec& spec = lookup(name);
  json parsed;
  try {
    parsed = spec.parse_text(value);
  } catch (const InputError& e) {
    throw InputError(fmt::format("argument {}: {}", name, e.what()));
  }
  note_given(spec.name);
  spec.set(*this, parsed);
  command_line_.insert(spec.name);
}

void TrainingArguments::apply_deepspeed() {
  // parse() applies the config after the file's keys and again after the overrides: what the
  // first time set of arguments still not given goes back first.
  for (auto it = deepspeed_restore_.rbegin(); it != deepspeed_restore_.rend(); ++it) {
    if (!given(it->first)) lookup(it->first).set(*this, it->second);
  }
  deepspeed_restore_.clear();
  if (deepspeed_.is_null()) return;
  deepspeed_config_ = load_deepspeed_config(deepspeed_);
  deepspeed_config_of_ = deepspeed_;
  const DeepSpeedPlan plan = *deepspeed_plan();
  for (const auto& [name, value] : plan.settings) {
    const args::Spec& spec = lookup(name);
    deepspeed_restore_.emplace_back(name, spec.get(*this));
    spec.set(*this, value);
  }
}

void TrainingArguments::apply_sft_bf16_default() {
  // TRL: bf16 = not fp16 when bf16 is not given.
  if (config_ != Config::kTraining && fp16_ && !given("bf16")) bf16_ = false;
  // Transformers' group_by_length, now a train_sampling_strategy.
  if (group_by_length_) train_sampling_strategy_ = "group_by_length";
  // Transformers' __post_init__: the environment's LOCAL_RANK (a launcher's) replaces local_rank.
  if (const char* env = std::getenv("LOCAL_RANK")) {
    char* end = nullptr;
    const long long rank = std::strtoll(env, &end, 10);
    if (end != env && *end == '\0' && rank >= 0) local_rank_ = rank;
  }
}

TrainingArguments TrainingArguments::parse(
    const std::string& json_path, const std::vector<std::pair<std::string, std::string>>& overrides,
    const TrainingArguments& defaults) {
  TrainingArguments args = defaults;
  if (!json_path.empty()) {
    // A configuration is a few kilobytes; 1 GiB bounds what a wrong path can make us read.
    const std::string text = base::read_file(json_path, size_t{1} << 30);
    args = is_yaml_path(json_path) ? from_yaml_text(text, json_path, defaults)
                                   : from_json_text(text, json_path, defaults);
  }
  for (const auto& [name, value] : overrides) args.set_from_text(name, value);
  args.apply_sft_bf16_default();
  args.apply_deepspeed();
  args.validate();
  return args;
}

}  // namespace trainer
