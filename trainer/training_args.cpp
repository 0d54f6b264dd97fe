// TrainingArguments' outputs and derived values: training_args.json, the descriptions behind
// --help and docs/arguments.md, and the values Transformers derives from the arguments.
#include "trainer/training_args.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "lib/base/text.h"
#include "lib/data/mnist_defaults.h"
#include "lib/models/lora_config.h"
#include "lib/optim/schedules.h"
#include "trainer/training_args_specs.h"

namespace trainer {

using json = nlohmann::ordered_json;
using args::specs;

std::string TrainingArguments::to_json() const {
  json out = json::object();
  for (const auto& spec : specs()) {
    // An SFTConfig's training_args.json has its SFT arguments, a DPOConfig's its own; a
    // TrainingArguments' neither.
    if (!takes(spec.name)) continue;
    out[spec.name] = spec.get(*this);
  }
  return out.dump(2) + "\n";
}

namespace {

// A TRL config's section of arguments.md: its head, its defaults and the keys it lists.
struct ConfigSection {
  std::string head;
  TrainingArguments defaults;
  std::vector<std::string> keys;
};

std::vector<std::string> joined(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

constexpr const char* kTableHead = "| Argument | Type | Default | Meaning |\n|---|---|---|---|\n";

std::vector<ConfigSection> config_sections() {
  using A = TrainingArguments;
  std::vector<ConfigSection> out;
  out.push_back(
      {"\n## `trainer sft`: TRL's SFTConfig\n\n"
       "`trainer sft` takes the arguments above with SFTConfig's defaults where they "
       "differ (learning_rate 2e-5, logging_steps 10, gradient_checkpointing true, bf16 "
       "true where the machine has bf16: a CUDA device, or a CPU with AVX512_BF16 or "
       "AMX), and these of SFTConfig's own, which `trainer train` refuses by name:\n\n",
       A::sft_defaults(false), A::sft_keys()});
  out.push_back(
      {"\n## `trainer dpo`: TRL's DPOConfig\n\n"
       "`trainer dpo` takes the Trainer's arguments with DPOConfig's defaults where they "
       "differ (learning_rate 1e-6, logging_steps 10, gradient_checkpointing true, bf16 "
       "as `trainer sft`), the SFT arguments DPOConfig has too, and DPOConfig's own; "
       "`trainer train` and `trainer sft` refuse these by name (`trainer sft` takes the "
       "SFT ones):\n\n",
       A::dpo_defaults(false), joined(A::dpo_shared_keys(), A::dpo_keys())});
  out.push_back(
      {"\n## `trainer grpo`: TRL's GRPOConfig\n\n"
       "`trainer grpo` takes the Trainer's arguments with GRPOConfig's defaults where "
       "they differ (learning_rate 1e-6, logging_steps 10, gradient_checkpointing true, "
       "bf16 as `trainer sft`), the SFT and DPO arguments GRPOConfig has too (with its "
       "defaults: loss_type dapo, beta 0, disable_dropout false, shuffle_dataset true), "
       "GRPOConfig's own and the script's reward_funcs; the other commands refuse these "
       "by name:\n\n",
       A::grpo_defaults(false), joined(A::grpo_shared_keys(), A::grpo_keys())});
  out.push_back(
      {"\n## `trainer reward`: TRL's RewardConfig\n\n"
       "`trainer reward` takes the Trainer's arguments with RewardConfig's defaults "
       "where they differ (learning_rate 1e-4, logging_steps 10, gradient_checkpointing "
       "true, bf16 as `trainer sft`), the SFT and DPO arguments RewardConfig has too "
       "(max_length filters pairs instead of cutting them; disable_dropout true) and "
       "RewardConfig's own; the other commands refuse center_rewards_coefficient by "
       "name:\n\n",
       A::reward_defaults(false), joined(A::reward_shared_keys(), A::reward_keys())});
  const A rloo = A::rloo_defaults(false);
  std::vector<std::string> rloo_keys;
  for (const std::string& key :
       joined(joined(A::grpo_shared_keys(), A::grpo_keys()), A::rloo_keys())) {
    if (rloo.takes(key)) rloo_keys.push_back(key);
  }
  out.push_back(
      {"\n## `trainer rloo`: TRL's RLOOConfig\n\n"
       "`trainer rloo` takes GRPOConfig's arguments above but those RLOOConfig lacks "
       "(loss_type, importance_sampling_level, scale_rewards, "
       "multi_objective_aggregation, delta, the sapo, vespo and entropy keys, ...), "
       "with RLOOConfig's defaults where they differ (beta 0.05, num_generations 2), "
       "and RLOOConfig's own:\n\n",
       rloo, rloo_keys});
  out.push_back(
      {"\n## `trainer sft` and `trainer dpo`: TRL's script arguments\n\n"
       "What `trl sft` and `trl dpo` read beside their configs (ScriptArguments, "
       "ModelConfig), as keys of a JSON or YAML config (`trainer sft recipe.yaml`, "
       "`--config recipe.yaml`) or `--name value`; `trainer train` refuses them by name. "
       "TRL's dataset_name, dataset_config and use_peft, lora_r, lora_alpha, "
       "lora_dropout, use_rslora are the rows above.\n\n",
       A::sft_defaults(false), A::script_keys()});
  return out;
}

// A table cell: pipes escaped, so help text cannot split a row.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

}  // namespace

std::string TrainingArguments::arguments_markdown() {
  std::string out =
      "# Training arguments\n\n"
      "Generated from the argument table in `trainer/training_args_table.h` "
      "(`TrainingArguments::arguments_markdown`); the test `Docs.ArgumentsMdIsUpToDate` fails when "
      "this file is stale, and `TRAINER_UPDATE_DOCS=1 build/bin/trainer_base_tests "
      "--gtest_filter=Docs.*` rewrites it.\n\n"
      "Each is a key of the JSON config or a `--name value` option of `trainer train`, `trainer "
      "sft` and "
      "`trainer evaluate`, with Transformers' name and meaning.\n\n";
  out += kTableHead;
  // Each section's rows with that configuration's defaults.
  auto rows = [&](const TrainingArguments& defaults, const std::vector<std::string>& keys) {
    for (const auto& d : describe(defaults)) {
      const bool listed = std::find(keys.begin(), keys.end(), d.name) != keys.end();
      const bool trainer_row = keys.empty() && TrainingArguments().takes(d.name);
      if (!listed && !trainer_row) continue;
      out += fmt::format("| `{}` | {} | `{}` | {} |\n", d.name, cell(d.kind), cell(d.default_json),
                         cell(d.help));
    }
  };
  rows(TrainingArguments(), {});
  for (const ConfigSection& section : config_sections()) {
    out += section.head + kTableHead;
    rows(section.defaults, section.keys);
  }
  out += "\nOther names, read as the argument they name (both given must agree):\n\n";
  for (const auto& [old_name, name] : other_names()) {
    out += fmt::format("- `{}`: `{}`\n", old_name, name);
  }
  out +=
      "\n## Removed from Transformers\n\n"
      "Transformers' `TrainingArguments` had these keys before 5.x; a config or option naming one "
      "is an error (exit 2) naming what replaced it. Every key of Transformers 5.24 is in the "
      "tables above: those that ask for the Hugging Face Hub, torch.compile or trackio are "
      "accepted when they ask for nothing (false, null, their default) and otherwise refused in "
      "one line saying why.\n\n";
  for (const auto& [key, replacement] : removed_keys()) {
    out +=
        fmt::format("- `{}`{}\n", key, replacement.empty() ? "" : fmt::format(": {}", replacement));
  }
  return out;
}

std::vector<TrainingArguments::Description> TrainingArguments::describe() {
  return describe(TrainingArguments());
}

std::vector<TrainingArguments::Description> TrainingArguments::describe(
    const TrainingArguments& defaults) {
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
  // As Transformers sets metric_for_best_model for these.
  return load_best_model_at_end_ || lr_scheduler_type_ == optim::kReduceLrOnPlateau ? "loss" : "";
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
  std::optional<FsdpPlan> plan = parse_fsdp_plan(fsdp_, fsdp_config_);
  if (deepspeed_.is_null()) return plan;
  // As Transformers: DeepSpeed's stage chooses the sharding.
  if (plan) {
    throw InputError(
        fmt::format("argument deepspeed: not with fsdp \"{}\" (zero_optimization.stage chooses the "
                    "sharding; leave out fsdp)",
                    fsdp_));
  }
  return deepspeed_plan()->fsdp;
}

std::map<std::string, DeepSpeedArgument> TrainingArguments::deepspeed_arguments() const {
  std::map<std::string, DeepSpeedArgument> out;
  for (const char* name :
       {"per_device_train_batch_size", "gradient_accumulation_steps", "max_grad_norm",
        "learning_rate", "adam_beta1", "adam_beta2", "adam_epsilon", "weight_decay", "bf16", "fp16",
        "optim", "lr_scheduler_type", "warmup_steps", "warmup_ratio", "max_steps",
        "auto_find_batch_size"}) {
    out[name] = DeepSpeedArgument{args::lookup(name).get(*this), given(name)};
  }
  return out;
}

std::optional<DeepSpeedPlan> TrainingArguments::deepspeed_plan() const {
  if (deepspeed_.is_null()) return std::nullopt;
  const json config =
      deepspeed_config_of_ == deepspeed_ ? deepspeed_config_ : load_deepspeed_config(deepspeed_);
  return parse_deepspeed_plan(config, deepspeed_arguments(), deepspeed_world_size);
}

int TrainingArguments::process_log_level(bool local_main, bool world_main) const {
  const bool main = log_on_each_node_ ? local_main : world_main;
  const std::string& name = main ? log_level_ : log_level_replica_;
  if (name == "debug") return 10;
  if (name == "info") return 20;
  if (name == "error") return 40;
  if (name == "critical") return 50;
  return 30;  // warning, passive
}

}  // namespace trainer
