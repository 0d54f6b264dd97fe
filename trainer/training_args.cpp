// TrainingArguments' outputs and derived values: training_args.json, the descriptions behind
// --help and docs/arguments.md, and the values Transformers derives from the arguments.
#include "trainer/training_args.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"
#include "lib/data/mnist_defaults.h"
#include "lib/models/lora_config.h"
#include "trainer/training_args_specs.h"

namespace trainer {

using json = nlohmann::ordered_json;
using args::specs;

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
      "Generated from the argument table in `trainer/training_args_table.h` "
      "(`TrainingArguments::arguments_markdown`); the test `Docs.ArgumentsMdIsUpToDate` fails when "
      "this file is stale, and `TRAINER_UPDATE_DOCS=1 build/bin/trainer_base_tests "
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

std::string TrainingArguments::best_metric_key() const {
  const std::string name = best_metric_name();
  return base::starts_with(name, "eval_") ? name : "eval_" + name;
}

bool TrainingArguments::best_metric_greater_is_better() const {
  if (greater_is_better_) return *greater_is_better_;
  const std::string name = best_metric_name();
  return !base::ends_with(name, "loss");
}

std::string TrainingArguments::effective_dataset_dir() const {
  if (!dataset_dir_.empty()) return dataset_dir_;
  return data::kFashionMnistDir;
}

models::LoraConfig TrainingArguments::lora_config() const {
  models::LoraConfig c;
  c.r = lora_r_;
  c.lora_alpha = lora_alpha_;
  c.lora_dropout = lora_dropout_;
  c.target_modules = target_modules_;
  c.bias = bias_;
  c.modules_to_save = modules_to_save_;
  c.use_rslora = use_rslora_;
  c.init_lora_weights = init_lora_weights_;
  return c;
}

std::optional<FsdpPlan> TrainingArguments::fsdp_plan() const {
  FsdpPlan plan;
  std::vector<std::string> strategies;
  // Transformers splits the string on white space.
  std::vector<std::string> words;
  for (size_t i = 0; i < fsdp_.size();) {
    size_t start = fsdp_.find_first_not_of(" \t", i);
    if (start == std::string::npos) break;
    size_t end = std::min(fsdp_.find_first_of(" \t", start), fsdp_.size());
    words.push_back(fsdp_.substr(start, end - start));
    i = end;
  }
  for (const std::string& word : words) {
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
  const bool any_config = !fsdp_config_.empty();
  if (strategies.empty() && (plan.auto_wrap || plan.offload)) {
    throw InputError(
        fmt::format("argument fsdp: \"{}\" names no strategy (add full_shard, shard_grad_op or "
                    "shard_optimizer)",
                    fsdp_));
  }
  if (strategies.empty() || strategies[0] == "no_shard") {
    if (any_config && strategies.empty()) {
      throw InputError(
          "argument fsdp_config: used only with fsdp (full_shard, shard_grad_op or "
          "shard_optimizer)");
    }
    return std::nullopt;
  }
  plan.strategy = strategies[0];
  // Transformers drops the "fsdp_" prefix (the later of two spellings wins); two spellings of one
  // key that disagree are refused rather than one chosen in silence.
  std::map<std::string, std::pair<std::string, nlohmann::ordered_json>> spelled;
  for (const auto& entry : fsdp_config_.items()) {
    // Named, not a structured binding: clang 14 (the fuzz build) cannot capture one in a lambda.
    const std::string& raw_key = entry.key();
    const auto& value = entry.value();
    const std::string key = raw_key.rfind("fsdp_", 0) == 0 ? raw_key.substr(5) : raw_key;
    if (auto [it, fresh] = spelled.try_emplace(key, raw_key, value);
        !fresh && it->second.second != value) {
      throw InputError(fmt::format(
          "argument fsdp_config: {} {} and {} {} name one setting; give it once", it->second.first,
          base::shown(it->second.second), raw_key, base::shown(value)));
    }
    auto bad = [&](const std::string& allowed) {
      return InputError(fmt::format("argument fsdp_config: {} {} is not allowed ({})", raw_key,
                                    base::shown(value), allowed));
    };
    // Transformers reads flags given as "true"/"false" too, and Accelerate numbers as 1e8.
    auto flag = [&]() {
      if (value.is_string() && (value == "true" || value == "false")) return value == "true";
      if (!value.is_boolean()) throw bad("true or false");
      return value.get<bool>();
    };
    if (key == "min_num_params") {
      const bool integral = value.is_number() && value.get<double>() >= 0 &&
                            value.get<double>() <= 9e15 &&
                            value.get<double>() == std::floor(value.get<double>());
      if (!integral) throw bad("an integer >= 0");
      plan.min_num_params = static_cast<int64_t>(value.get<double>());
    } else if (key == "transformer_layer_cls_to_wrap") {
      if (value.is_string()) {
        // Accelerate's form: class names separated by commas.
        plan.layer_classes = base::comma_list(value.get<std::string>());
        if (plan.layer_classes.empty()) throw bad("a class name or a list of them");
      } else if (value.is_array() && !value.empty()) {
        for (const auto& item : value) {
          if (!item.is_string()) throw bad("a class name or a list of them");
          plan.layer_classes.push_back(item.get<std::string>());
        }
      } else {
        throw bad("a class name or a list of them");
      }
    } else if (key == "backward_prefetch") {
      const std::string v = value.is_string() ? value.get<std::string>() : "";
      if (v == "backward_pre" || v == "BACKWARD_PRE") {
        plan.backward_prefetch = true;
      } else if (v == "no_prefetch" || v == "NO_PREFETCH") {
        plan.backward_prefetch = false;
      } else {
        throw bad("backward_pre or no_prefetch; backward_post is not built");
      }
    } else if (key == "forward_prefetch") {
      plan.forward_prefetch = flag();
    } else if (key == "sync_module_states") {
      plan.sync_module_states = flag();
    } else if (key == "limit_all_gathers" || key == "use_orig_params" ||
               key == "cpu_ram_efficient_loading") {
      // At most one all-gather is prefetched; the optimizer always sees the original
      // parameters' slices; every process reads the weights: each is what the value asks or
      // changes nothing here.
      flag();
    } else if (key == "offload_params") {
      plan.offload = flag();
    } else if (key == "state_dict_type") {
      const std::string v = value.is_string() ? value.get<std::string>() : "";
      if (v == "FULL_STATE_DICT") {
        plan.sharded_state_dict = false;
      } else if (v == "SHARDED_STATE_DICT") {
        plan.sharded_state_dict = true;
      } else {
        throw bad("FULL_STATE_DICT or SHARDED_STATE_DICT");
      }
    } else if (key == "activation_checkpointing" || key == "xla") {
      if (flag()) throw bad("false: not built");
    } else {
      throw InputError(
          fmt::format("argument fsdp_config: {} is not a key it takes (allowed: min_num_params, "
                      "transformer_layer_cls_to_wrap, backward_prefetch, forward_prefetch, "
                      "limit_all_gathers, sync_module_states, use_orig_params, state_dict_type, "
                      "cpu_ram_efficient_loading, offload_params, activation_checkpointing, xla)",
                      raw_key));
    }
  }
  // As Transformers: the wrapping rules choose auto_wrap's units, one at a time.
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
  return plan;
}

}  // namespace trainer
