// adapter_config.json as PEFT 0.21 reads and writes it, and PEFT's matching of module names.
#include "lib/models/lora_config.h"

#include <cctype>
#include <cmath>
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <unicode/regex.h>
#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/hf_files.h"
#include "lib/base/json_fields.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"

namespace trainer::models {
namespace {

using json = nlohmann::ordered_json;

constexpr size_t kMaxTargetRegex = 256;
// How long ICU may try to match the regex of target_modules against one module name, in its
// units of about a millisecond: a nested repetition (".*+" read as "(.*)+") backtracks without end.
constexpr int32_t kTargetRegexTimeLimit = 1000;

// The regex of target_modules as ICU reads it (the syntax of Python's re, which PEFT matches
// with): compiled, or null with `status` set. ICU backtracks on a heap stack of bounded size and
// under a time limit, where std::regex recursed (a pattern could overflow the stack) and had none.
std::unique_ptr<icu::RegexPattern> compile_target_regex(const std::string& pattern,
                                                        UErrorCode& status) {
  UParseError where;
  std::unique_ptr<icu::RegexPattern> compiled(
      icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(pattern), 0, where, status));
  return U_SUCCESS(status) ? std::move(compiled) : nullptr;
}

// A number as Python's json writes it: an integral value as an int (PEFT's lora_alpha: 16).
json python_number(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) {
    return static_cast<int64_t>(v);
  }
  return v;
}

}  // namespace

bool names_module(const std::string& name, const std::string& key) {
  return key == name || base::ends_with(key, "." + name);
}

double LoraConfig::scaling() const {
  const double rank = static_cast<double>(r);
  return use_rslora ? lora_alpha / std::sqrt(rank) : lora_alpha / rank;
}

bool LoraConfig::all_linear() const {
  return !target_regex && target_modules.size() == 1 && target_modules[0] == "all-linear";
}

void check_lora_config(const LoraConfig& c) {
  if (c.r < 1) {
    throw InputError(fmt::format("argument lora_r: {} is not allowed (a positive rank)", c.r));
  }
  if (!(c.lora_alpha > 0) || !std::isfinite(c.lora_alpha)) {
    throw InputError(fmt::format("argument lora_alpha: {} is not allowed (a positive number)",
                                 base::python_float(c.lora_alpha)));
  }
  if (!(c.lora_dropout >= 0 && c.lora_dropout < 1)) {
    throw InputError(fmt::format("argument lora_dropout: {} is not allowed (0 <= p < 1)",
                                 base::python_float(c.lora_dropout)));
  }
  if (c.bias != "none" && c.bias != "all" && c.bias != "lora_only") {
    throw InputError(fmt::format("argument bias: {} is not allowed (none, all or lora_only)",
                                 base::shown_text(c.bias)));
  }
  if (c.init_lora_weights != "true" && c.init_lora_weights != "false" &&
      c.init_lora_weights != "gaussian") {
    throw InputError(fmt::format(
        "argument init_lora_weights: {} is not allowed (true, false or gaussian; PEFT's pissa, "
        "olora, loftq, eva and corda initialisations are not done here)",
        base::shown_text(c.init_lora_weights)));
  }
  for (const std::string& t : c.target_modules) {
    if (t.empty()) throw InputError("argument target_modules: an empty name is not allowed");
  }
  for (const std::string& t : c.modules_to_save) {
    if (t.empty()) throw InputError("argument modules_to_save: an empty name is not allowed");
  }
}

bool lora_target_matches(const LoraConfig& config, const std::string& key) {
  if (config.target_regex) {
    UErrorCode status = U_ZERO_ERROR;
    const std::unique_ptr<icu::RegexPattern> pattern =
        compile_target_regex(*config.target_regex, status);
    const icu::UnicodeString name = icu::UnicodeString::fromUTF8(key);
    std::unique_ptr<icu::RegexMatcher> matcher;
    if (U_SUCCESS(status)) matcher.reset(pattern->matcher(name, status));
    if (U_SUCCESS(status)) matcher->setTimeLimit(kTargetRegexTimeLimit, status);
    const bool matched = U_SUCCESS(status) && matcher->matches(status);
    if (U_FAILURE(status)) {
      throw InputError(fmt::format(
          "argument target_modules: the regular expression {} could not be matched against the "
          "module name {} ({}: it backtracks too long or too deep, as a nested repetition such "
          "as (a*)* does); simplify it",
          base::shown_text(*config.target_regex), base::shown_text(key), u_errorName(status)));
    }
    return matched;
  }
  for (const std::string& t : config.target_modules) {
    if (names_module(t, key)) return true;
  }
  return false;
}

bool inside_module_to_save(const LoraConfig& config, const std::string& key) {
  for (const std::string& m : config.modules_to_save) {
    if (key == m || base::starts_with(key, m + ".") || base::ends_with(key, "." + m) ||
        key.find("." + m + ".") != std::string::npos) {
      return true;
    }
  }
  return false;
}

bool module_to_save_matches(const LoraConfig& config, const std::string& key) {
  for (const std::string& name : config.modules_to_save) {
    if (names_module(name, key)) return true;
  }
  return false;
}

LoraConfig read_adapter_config(const std::string& dir) {
  const std::string path = base::join_path(dir, base::hf::kAdapterConfig);
  return parse_adapter_config(base::read_json_object(path), path);
}

namespace {

// target_modules: a list of module names, or one string, "all-linear" (in any case, as PEFT
// spells it) or a regular expression of PEFT's size.
void read_target_modules(base::JsonFields& f, LoraConfig& c) {
  if (f.has("target_modules") && f.at("target_modules").is_string()) {
    const std::string t = f.string("target_modules");
    std::string lower = t;
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (lower == "all-linear") {
      c.target_modules = {"all-linear"};
      return;
    }
    if (t.size() > kMaxTargetRegex) {
      f.fail("target_modules", fmt::format("is a regular expression of {} bytes (at most {})",
                                           t.size(), kMaxTargetRegex));
    }
    UErrorCode status = U_ZERO_ERROR;
    if (!compile_target_regex(t, status)) {
      f.fail("target_modules",
             fmt::format("{} is not a regular expression", base::shown(f.at("target_modules"))));
    }
    c.target_regex = t;
    return;
  }
  c.target_modules = f.strings("target_modules");
  if (c.target_modules.empty()) {
    f.fail("target_modules", "is missing (the names of the layers that carry adapters)");
  }
}

// What would change the adapters' arithmetic and is not done here: refused by name.
void refuse_unsupported(base::JsonFields& f) {
  for (const char* key :
       {"use_dora", "lora_bias", "use_qalora", "use_bdlora", "ensure_weight_tying"}) {
    if (f.boolean(key, false)) f.fail(key, "true is not supported (LoRA without it only)");
  }
  for (const char* key : {"rank_pattern", "alpha_pattern", "loftq_config"}) {
    if (f.has(key) && !(f.at(key).is_object() && f.at(key).empty())) {
      f.fail(key, fmt::format("{} is not supported (one r and lora_alpha for every layer)",
                              base::shown(f.at(key))));
    }
  }
  for (const char* key :
       {"layers_to_transform", "layers_pattern", "exclude_modules", "layer_replication",
        "trainable_token_indices", "target_parameters", "alora_invocation_tokens",
        "megatron_config", "arrow_config", "kasa_config", "velora_config", "monteclora_config",
        "lora_ga_config", "corda_config", "eva_config"}) {
    // An empty list or object means none, as PEFT reads it.
    if (f.has(key) && !((f.at(key).is_array() || f.at(key).is_object()) && f.at(key).empty())) {
      f.fail(key, fmt::format("{} is not supported (only null)", base::shown(f.at(key))));
    }
  }
}

}  // namespace

LoraConfig parse_adapter_config(const nlohmann::ordered_json& j, const std::string& path) {
  if (!j.is_object()) {
    throw InputError(fmt::format("{}: not a JSON object (PEFT's adapter_config.json)", path));
  }
  base::JsonFields f(j, path);
  LoraConfig c;
  const std::string peft_type = f.string("peft_type", "LORA");
  if (peft_type != "LORA") {
    f.fail("peft_type", fmt::format("\"{}\" is not supported (LORA)", peft_type));
  }
  // PEFT computes with these as they are: a null fails there (lora_alpha / r), so here too.
  for (const char* key : {"r", "lora_alpha", "lora_dropout"}) {
    if (j.contains(key) && j.at(key).is_null()) {
      f.fail(key, "null is not allowed (a number; PEFT cannot compute its scaling with null)");
    }
  }
  c.r = f.positive("r", 8);
  c.lora_alpha = f.number("lora_alpha", 8);
  c.lora_dropout = f.number("lora_dropout", 0.0);
  read_target_modules(f, c);
  c.bias = f.string("bias", "none");
  c.modules_to_save = f.strings("modules_to_save");
  c.use_rslora = f.boolean("use_rslora", false);
  if (f.has("init_lora_weights")) {
    const json& v = f.at("init_lora_weights");
    c.init_lora_weights =
        v.is_boolean() ? (v.get<bool>() ? "true" : "false") : f.string("init_lora_weights");
  }
  c.fan_in_fan_out = f.boolean("fan_in_fan_out", false);
  c.base_model_name_or_path = f.string("base_model_name_or_path", "");
  c.task_type = f.string("task_type", "");
  if (!c.task_type.empty() && c.task_type != "CAUSAL_LM" && c.task_type != "SEQ_CLS") {
    f.fail("task_type", fmt::format("\"{}\" is not supported (CAUSAL_LM, SEQ_CLS, or null for a "
                                    "model of no task head)",
                                    c.task_type));
  }
  refuse_unsupported(f);
  try {
    check_lora_config(c);
  } catch (const InputError& e) {
    // "argument lora_r: ..." -> "<path>: r ..."
    std::string what = e.what();
    f.fail_object(what.substr(what.find(' ') + 1));
  }
  return c;
}

std::string adapter_config_json(const LoraConfig& c) {
  json j = json::object();
  auto list_or_null = [](const std::vector<std::string>& v) -> json {
    if (v.empty()) return nullptr;
    return json(v);
  };
  json init;
  if (c.init_lora_weights == "true") {
    init = true;
  } else if (c.init_lora_weights == "false") {
    init = false;
  } else {
    init = c.init_lora_weights;
  }
  j["alora_invocation_tokens"] = nullptr;
  j["alpha_pattern"] = json::object();
  j["arrow_config"] = nullptr;
  j["auto_mapping"] = nullptr;
  j["base_model_name_or_path"] =
      c.base_model_name_or_path.empty() ? json(nullptr) : json(c.base_model_name_or_path);
  j["bias"] = c.bias;
  j["corda_config"] = nullptr;
  j["ensure_weight_tying"] = false;
  j["eva_config"] = nullptr;
  j["exclude_modules"] = nullptr;
  j["fan_in_fan_out"] = c.fan_in_fan_out;
  j["inference_mode"] = true;
  j["init_lora_weights"] = init;
  j["kasa_config"] = nullptr;
  j["layer_replication"] = nullptr;
  j["layers_pattern"] = nullptr;
  j["layers_to_transform"] = nullptr;
  j["loftq_config"] = json::object();
  j["lora_alpha"] = python_number(c.lora_alpha);
  j["lora_bias"] = false;
  j["lora_dropout"] = c.lora_dropout;
  j["lora_ga_config"] = nullptr;
  j["megatron_config"] = nullptr;
  j["megatron_core"] = "megatron.core";
  j["modules_to_save"] = list_or_null(c.modules_to_save);
  j["monteclora_config"] = nullptr;
  j["peft_type"] = "LORA";
  j["peft_version"] = "0.21.2";
  j["qalora_group_size"] = 16;
  j["r"] = c.r;
  j["rank_pattern"] = json::object();
  j["revision"] = nullptr;
  j["target_modules"] = c.target_regex ? json(*c.target_regex) : json(c.target_modules);
  j["target_parameters"] = nullptr;
  j["task_type"] = c.task_type.empty() ? json(nullptr) : json(c.task_type);
  j["trainable_token_indices"] = nullptr;
  j["use_bdlora"] = nullptr;
  j["use_dora"] = false;
  j["use_qalora"] = false;
  j["use_rslora"] = c.use_rslora;
  j["velora_config"] = nullptr;
  return j.dump(2);
}

bool is_adapter_dir(const std::string& dir) {
  std::error_code ec;
  return std::filesystem::is_directory(dir, ec) &&
         std::filesystem::is_regular_file(base::join_path(dir, base::hf::kAdapterConfig), ec);
}

}  // namespace trainer::models
