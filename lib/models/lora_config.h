// PEFT's LoraConfig as its adapter_config.json holds it (torch-free): read, checked, written back
// with PEFT 0.21's keys, and the rule PEFT matches target_modules and modules_to_save by.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainer::models {

struct LoraConfig {
  int64_t r = 8;
  double lora_alpha = 8;
  double lora_dropout = 0.0;
  // Layer names or their last components ("q_proj" matches "model.layers.0.self_attn.q_proj"), or
  // {"all-linear"}; target_regex instead when adapter_config.json gives one string (re.fullmatch).
  std::vector<std::string> target_modules;
  std::optional<std::string> target_regex;
  std::string bias = "none";  // none, all, lora_only
  std::vector<std::string> modules_to_save;
  bool use_rslora = false;
  std::string init_lora_weights = "true";  // true, false, gaussian
  bool fan_in_fan_out = false;             // set when the adapted layers are GPT-2's Conv1D
  // The base model's folder, as the run was given it; empty for a base of no folder.
  std::string base_model_name_or_path;
  std::string task_type = "CAUSAL_LM";  // empty: none

  // lora_alpha / r, or lora_alpha / sqrt(r) with use_rslora.
  double scaling() const;
  bool all_linear() const;
};

// Checks the values a run gives (r > 0, lora_alpha > 0, 0 <= lora_dropout < 1, bias and
// init_lora_weights known); throws InputError "argument <name>: ..." on the first that is not.
void check_lora_config(const LoraConfig& config);

// Whether `name` names the module `key` as PEFT's lists do: equal, or its last dotted components
// ("q_proj" and "self_attn.q_proj" name "model.layers.0.self_attn.q_proj").
bool names_module(const std::string& name, const std::string& key);
// Whether PEFT adds an adapter to the layer `key` (its dotted name in the base model): the regex
// when there is one (full match), else `key` equal to a target or ending in "." + a target.
bool lora_target_matches(const LoraConfig& config, const std::string& key);
// Whether `key` is one of modules_to_save or inside one (PEFT's `(^|.*\.)m($|\..*)`): such a
// layer trains in full and gets no adapter.
bool inside_module_to_save(const LoraConfig& config, const std::string& key);
// Whether `key` is one of modules_to_save (equal, or ending in "." + a name).
bool module_to_save_matches(const LoraConfig& config, const std::string& key);

// adapter_config.json of `dir`. Throws InputError naming the file for a missing or damaged file, a
// value of the wrong type, a peft_type other than LORA, and every feature that would change the
// adapters' arithmetic that is not done here (use_dora, rank_pattern, alpha_pattern,
// layers_to_transform, exclude_modules, lora_bias, ...), by name.
LoraConfig read_adapter_config(const std::string& dir);
// The same from the file's JSON (`path` names it in messages).
LoraConfig parse_adapter_config(const nlohmann::ordered_json& j, const std::string& path);
// The file PEFT 0.21 writes for `config` (every key of LoraConfig.to_dict, sorted, indent 2).
std::string adapter_config_json(const LoraConfig& config);

// Whether `dir` is an adapter folder (holds adapter_config.json).
bool is_adapter_dir(const std::string& dir);

}  // namespace trainer::models
