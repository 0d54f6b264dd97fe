// FullyShardedDataParallelPlugin's reading of fsdp and fsdp_config (torch-free): the words of
// fsdp, then fsdp_config key by key, then the rules that tie them together (auto_wrap's units).
#include "lib/accelerate/fsdp_plugin.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"

namespace trainer {
namespace {

using json = nlohmann::ordered_json;

// Transformers splits the string on white space.
std::vector<std::string> split_words(const std::string& fsdp) {
  std::vector<std::string> words;
  for (size_t i = 0; i < fsdp.size();) {
    size_t start = fsdp.find_first_not_of(" \t", i);
    if (start == std::string::npos) break;
    size_t end = std::min(fsdp.find_first_of(" \t", start), fsdp.size());
    words.push_back(fsdp.substr(start, end - start));
    i = end;
  }
  return words;
}

// The words of fsdp: auto_wrap and offload into `plan`; returns the one strategy named
// (no_shard among them), or "" when none is.
std::string read_words(const std::string& fsdp, FsdpPlan& plan) {
  std::vector<std::string> strategies;
  for (const std::string& word : split_words(fsdp)) {
    if (word == "full_shard" || word == "shard_grad_op" || word == "shard_optimizer" ||
        word == "no_shard") {
      strategies.push_back(word);
    } else if (word == "auto_wrap") {
      plan.auto_wrap = true;
    } else if (word == "offload") {
      plan.offload = true;
    } else {
      throw InputError(fmt::format(
          "argument fsdp: {} is not allowed (allowed: full_shard, shard_grad_op, "
          "shard_optimizer, no_shard, auto_wrap, offload; hybrid_shard needs several nodes' "
          "groups, not built)",
          word));
    }
  }
  if (strategies.size() > 1) {
    throw InputError(fmt::format("argument fsdp: {} and {} are two strategies; choose one",
                                 strategies[0], strategies[1]));
  }
  if (strategies.empty() && (plan.auto_wrap || plan.offload)) {
    throw InputError(
        fmt::format("argument fsdp: \"{}\" names no strategy (add full_shard, shard_grad_op or "
                    "shard_optimizer)",
                    fsdp));
  }
  return strategies.empty() ? "" : strategies[0];
}

// One key of fsdp_config as given, and the error that names it.
struct Entry {
  const std::string& key;
  const json& value;

  InputError bad(const std::string& allowed) const {
    return InputError(fmt::format("argument fsdp_config: {} {} is not allowed ({})", key,
                                  base::shown(value), allowed));
  }
  // Transformers reads flags given as "true"/"false" too.
  bool flag() const {
    if (value.is_string() && (value == "true" || value == "false")) return value == "true";
    if (!value.is_boolean()) throw bad("true or false");
    return value.get<bool>();
  }
};

// Accelerate reads numbers given as 1e8 too.
int64_t read_min_num_params(const Entry& e) {
  const json& value = e.value;
  const bool integral = value.is_number() && value.get<double>() >= 0 &&
                        value.get<double>() <= 9e15 &&
                        value.get<double>() == std::floor(value.get<double>());
  if (!integral) throw e.bad("an integer >= 0");
  return static_cast<int64_t>(value.get<double>());
}

std::vector<std::string> read_layer_classes(const Entry& e) {
  std::vector<std::string> classes;
  if (e.value.is_string()) {
    // Accelerate's form: class names separated by commas.
    classes = base::comma_list(e.value.get<std::string>());
    if (classes.empty()) throw e.bad("a class name or a list of them");
  } else if (e.value.is_array() && !e.value.empty()) {
    for (const auto& item : e.value) {
      if (!item.is_string()) throw e.bad("a class name or a list of them");
      classes.push_back(item.get<std::string>());
    }
  } else {
    throw e.bad("a class name or a list of them");
  }
  return classes;
}

// backward_prefetch: whether BACKWARD_PRE (true) or NO_PREFETCH (false).
bool read_backward_prefetch(const Entry& e) {
  const std::string v = e.value.is_string() ? e.value.get<std::string>() : "";
  if (v == "backward_pre" || v == "BACKWARD_PRE") return true;
  if (v == "no_prefetch" || v == "NO_PREFETCH") return false;
  throw e.bad("backward_pre or no_prefetch; backward_post is not built");
}

// state_dict_type: whether SHARDED_STATE_DICT (true) or FULL_STATE_DICT (false).
bool read_sharded_state_dict(const Entry& e) {
  const std::string v = e.value.is_string() ? e.value.get<std::string>() : "";
  if (v == "FULL_STATE_DICT") return false;
  if (v == "SHARDED_STATE_DICT") return true;
  throw e.bad("FULL_STATE_DICT or SHARDED_STATE_DICT");
}

// One key of fsdp_config (`key`: without the "fsdp_" prefix) into `plan`.
void read_entry(const std::string& key, const Entry& e, FsdpPlan& plan) {
  if (key == "min_num_params") {
    plan.min_num_params = read_min_num_params(e);
  } else if (key == "transformer_layer_cls_to_wrap") {
    plan.layer_classes = read_layer_classes(e);
  } else if (key == "backward_prefetch") {
    plan.backward_prefetch = read_backward_prefetch(e);
  } else if (key == "forward_prefetch") {
    plan.forward_prefetch = e.flag();
  } else if (key == "sync_module_states") {
    plan.sync_module_states = e.flag();
  } else if (key == "limit_all_gathers" || key == "use_orig_params" ||
             key == "cpu_ram_efficient_loading") {
    // At most one all-gather is prefetched; the optimizer always sees the original
    // parameters' slices; every process reads the weights: each is what the value asks or
    // changes nothing here.
    e.flag();
  } else if (key == "offload_params") {
    plan.offload = e.flag();
  } else if (key == "state_dict_type") {
    plan.sharded_state_dict = read_sharded_state_dict(e);
  } else if (key == "activation_checkpointing" || key == "xla") {
    if (e.flag()) throw e.bad("false: not built");
  } else {
    throw InputError(
        fmt::format("argument fsdp_config: {} is not a key it takes (allowed: min_num_params, "
                    "transformer_layer_cls_to_wrap, backward_prefetch, forward_prefetch, "
                    "limit_all_gathers, sync_module_states, use_orig_params, state_dict_type, "
                    "cpu_ram_efficient_loading, offload_params, activation_checkpointing, xla)",
                    e.key));
  }
}

// Every key of fsdp_config into `plan`. Transformers drops the "fsdp_" prefix (the later of two
// spellings wins); two spellings of one key that disagree are refused rather than one chosen in
// silence.
void read_config(const json& fsdp_config, FsdpPlan& plan) {
  std::map<std::string, std::pair<std::string, json>> spelled;
  for (const auto& entry : fsdp_config.items()) {
    const std::string& raw_key = entry.key();
    const json& value = entry.value();
    const std::string key = raw_key.rfind("fsdp_", 0) == 0 ? raw_key.substr(5) : raw_key;
    if (auto [it, fresh] = spelled.try_emplace(key, raw_key, value);
        !fresh && it->second.second != value) {
      throw InputError(fmt::format(
          "argument fsdp_config: {} {} and {} {} name one setting; give it once", it->second.first,
          base::shown(it->second.second), raw_key, base::shown(value)));
    }
    read_entry(key, Entry{raw_key, value}, plan);
  }
}

// As Transformers: the wrapping rules choose auto_wrap's units, one at a time.
void check_wrapping(const FsdpPlan& plan) {
  if (plan.min_num_params > 0 && !plan.layer_classes.empty()) {
    throw InputError(
        "argument fsdp_config: min_num_params and transformer_layer_cls_to_wrap are mutually "
        "exclusive; give one");
  }
  if (!plan.auto_wrap && (plan.min_num_params > 0 || !plan.layer_classes.empty())) {
    throw InputError(fmt::format(
        "argument fsdp_config: {} chooses auto_wrap's units; add auto_wrap to fsdp (\"{} "
        "auto_wrap\")",
        plan.min_num_params > 0 ? "min_num_params" : "transformer_layer_cls_to_wrap",
        plan.strategy));
  }
}

}  // namespace

std::optional<FsdpPlan> parse_fsdp_plan(const std::string& fsdp, const json& fsdp_config) {
  FsdpPlan plan;
  const std::string strategy = read_words(fsdp, plan);
  if (strategy.empty() || strategy == "no_shard") {
    if (!fsdp_config.empty() && strategy.empty()) {
      throw InputError(
          "argument fsdp_config: used only with fsdp (full_shard, shard_grad_op or "
          "shard_optimizer)");
    }
    return std::nullopt;
  }
  plan.strategy = strategy;
  read_config(fsdp_config, plan);
  check_wrapping(plan);
  return plan;
}

}  // namespace trainer
