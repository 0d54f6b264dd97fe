// A DeepSpeed config read as HfTrainerDeepSpeedConfig fills and checks it (torch-free): its "auto"
// values filled from the arguments and the given ones checked against them (the batch, clipping
// and precision keys, the optimizer and scheduler blocks); zero_optimization and the features not
// built are read apart (deepspeed_zero.cpp).
#include "lib/accelerate/deepspeed_plugin.h"
#include "lib/accelerate/deepspeed_reading.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/json_text.h"
#include "lib/base/warn.h"
#include "lib/distributed/env.h"

namespace trainer {

using namespace deepspeed;

namespace {

using Arguments = std::map<std::string, DeepSpeedArgument>;
using base::shown;

// What a key's value must be, as DeepSpeed's own config types it.
enum class Kind { kCount, kNonNegative, kFlag };

class Reader {
 public:
  Reader(const Arguments& arguments, DeepSpeedPlan& plan) : arguments_(arguments), plan_(plan) {}

  const DeepSpeedArgument& argument(const std::string& name) const {
    auto it = arguments_.find(name);
    if (it == arguments_.end()) throw std::logic_error("deepspeed: no argument " + name);
    return it->second;
  }

  // The argument's value after the config: what the config set, else the argument's own.
  json effective(const std::string& name) const {
    for (const auto& [set, value] : plan_.settings) {
      if (set == name) return value;
    }
    return argument(name).value;
  }

  // `key` (a dotted path) with `value` against argument `name`: "auto" (or nothing) keeps the
  // argument; another value must equal a given argument and sets one that was not given.
  void fill(const std::string& key, const json& value, const std::string& name, Kind kind) {
    if (value.is_null() || is_auto(value)) return;
    const json typed = checked(key, value, kind);
    const DeepSpeedArgument& arg = argument(name);
    if (auto earlier = set_by_.find(name); earlier != set_by_.end()) {
      if (typed == effective(name)) return;
      throw InputError(fmt::format("argument deepspeed: {} {} differs from {} {} (both set {})",
                                   key, shown(value), earlier->second, shown(effective(name)),
                                   name));
    }
    if (typed == arg.value) return;
    if (arg.given) {
      throw InputError(fmt::format(
          "argument deepspeed: {} {} differs from {} {} (give \"auto\" or the same value)", key,
          shown(value), name, shown(arg.value)));
    }
    set_by_.emplace(name, key);
    plan_.settings.emplace_back(name, typed);
  }

  // A string value of `key` against argument `name` (optim, lr_scheduler_type): `word` is what
  // the config's value means among the argument's words, `accepted` the argument's values that
  // agree with it.
  void fill_word(const std::string& key, const json& value, const std::string& name,
                 const std::string& word, const std::vector<std::string>& accepted) {
    const DeepSpeedArgument& arg = argument(name);
    if (arg.value.is_string() && contains(accepted, arg.value.get<std::string>())) return;
    if (arg.given) {
      throw InputError(fmt::format(
          "argument deepspeed: {} {} differs from {} {} (give the same, or leave out {})", key,
          shown(value), name, shown(arg.value), name));
    }
    plan_.settings.emplace_back(name, word);
  }

  void set(const std::string& name, const json& value) { plan_.settings.emplace_back(name, value); }

 private:
  static json checked(const std::string& key, const json& value, Kind kind) {
    switch (kind) {
      case Kind::kCount: {
        const auto whole = base::whole_number(value);
        if (!whole || *whole < 1 || *whole > 2147483647)
          throw refused(key, value, "an integer >= 1 or \"auto\"");
        return *whole;
      }
      case Kind::kNonNegative:
        if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < 0)
          throw refused(key, value, "a number >= 0 or \"auto\"");
        return value;
      case Kind::kFlag:
        if (!value.is_boolean()) throw refused(key, value, "true, false or \"auto\"");
        return value;
    }
    return value;
  }

  const Arguments& arguments_;
  DeepSpeedPlan& plan_;
  std::map<std::string, std::string> set_by_;  // argument -> the key that set it
};

// fp16 and bf16 (or its old name bfloat16): `enabled` against the arguments.
void read_precision(const json& config, Reader& r) {
  const json& fp16 = block(config, "fp16");
  json bf16 = block(config, "bf16");
  if (bf16.is_null()) bf16 = block(config, "bfloat16");
  const std::vector<std::string> fp16_keys = {"enabled",
                                              "auto_cast",
                                              "loss_scale",
                                              "initial_scale_power",
                                              "loss_scale_window",
                                              "hysteresis",
                                              "consecutive_hysteresis",
                                              "min_loss_scale",
                                              "fp16_master_weights_and_grads"};
  const std::vector<std::string> bf16_keys = {"enabled", "immediate_grad_update",
                                              "check_grad_overflow"};
  if (fp16.is_object()) {
    check_keys(fp16, "fp16", fp16_keys, "");
    const json& scale = field(fp16, "loss_scale");
    if (scale.is_number() && scale.get<double>() != 0) {
      throw refused("fp16.loss_scale", scale,
                    "0: dynamic loss scaling, the GradScaler's; a static scale is not built");
    }
    r.fill("fp16.enabled", field(fp16, "enabled"), "fp16", Kind::kFlag);
  }
  if (bf16.is_object()) {
    check_keys(bf16, config.contains("bf16") ? "bf16" : "bfloat16", bf16_keys, "");
    r.fill(config.contains("bf16") ? "bf16.enabled" : "bfloat16.enabled", field(bf16, "enabled"),
           "bf16", Kind::kFlag);
  }
  const bool fp16_on = r.effective("fp16") == true, bf16_on = r.effective("bf16") == true;
  const auto on = [](const json& b) { return b.is_object() && field(b, "enabled") == true; };
  if (on(fp16) && on(bf16))
    throw InputError("argument deepspeed: fp16.enabled and bf16.enabled are both true; choose one");
  // The config's precision turns off the other one where that was only a default.
  if (on(fp16) && bf16_on && !r.argument("bf16").given) r.set("bf16", false);
  if (on(bf16) && fp16_on && !r.argument("fp16").given) r.set("fp16", false);
}

// The optimizer block: AdamW (or Adam, AdamW in DeepSpeed unless adam_w_mode is false), its
// params against the arguments.
void read_optimizer(const json& config, Reader& r) {
  const json& optimizer = block(config, "optimizer");
  if (optimizer.is_null()) return;  // Transformers' optimizer, the optim argument's
  check_keys(optimizer, "optimizer", {"type", "params"}, "");
  const json& type = field(optimizer, "type");
  std::string name = type.is_string() ? type.get<std::string>() : "";
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (name != "adamw" && name != "adam") {
    throw refused("optimizer.type", type,
                  "AdamW or Adam: the optimizers sharded here are the AdamWs; leave out the "
                  "optimizer block to train with the optim argument's");
  }
  r.fill_word("optimizer.type", type, "optim", "adamw_torch_fused",
              {"adamw_torch_fused", "adamw_torch"});
  json params = block(optimizer, "params");
  if (params.is_null()) params = json::object();
  check_keys(params, "optimizer.params",
             {"lr", "betas", "eps", "weight_decay", "adam_w_mode", "torch_adam", "bias_correction",
              "amsgrad"},
             "");
  for (const char* key : {"lr", "betas", "eps", "weight_decay"}) {
    if (!params.contains(key)) {
      throw InputError(
          fmt::format("argument deepspeed: optimizer.params.{} is missing (DeepSpeed would use its "
                      "optimizer's default; give \"auto\" or a value)",
                      key));
    }
  }
  for (const auto& [key, wanted] :
       {std::pair{"adam_w_mode", true}, std::pair{"bias_correction", true},
        std::pair{"amsgrad", false}}) {
    const json& value = field(params, key);
    if (!value.is_null() && value != wanted) {
      throw refused(std::string("optimizer.params.") + key, value,
                    fmt::format("{}: the AdamW built here", wanted));
    }
  }
  const json& torch_adam = field(params, "torch_adam");
  if (!torch_adam.is_null() && !torch_adam.is_boolean())
    throw refused("optimizer.params.torch_adam", torch_adam, "true or false");
  r.fill("optimizer.params.lr", params["lr"], "learning_rate", Kind::kNonNegative);
  const json& betas = params["betas"];
  if (!is_auto(betas)) {
    const bool pair = betas.is_array() && betas.size() == 2 && betas[0].is_number() &&
                      betas[1].is_number() && betas[0].get<double>() >= 0 &&
                      betas[0].get<double>() < 1 && betas[1].get<double>() >= 0 &&
                      betas[1].get<double>() < 1;
    if (!pair) throw refused("optimizer.params.betas", betas, "two numbers in [0, 1), or \"auto\"");
    const json hf = {r.argument("adam_beta1").value, r.argument("adam_beta2").value};
    for (int i = 0; i < 2; ++i) {
      const std::string name = i == 0 ? "adam_beta1" : "adam_beta2";
      if (r.argument(name).given && betas[i] != r.argument(name).value) {
        throw InputError(fmt::format(
            "argument deepspeed: optimizer.params.betas {} differs from adam_beta1+adam_beta2 {} "
            "(give \"auto\" or the same values)",
            shown(betas), shown(hf)));
      }
      r.fill("optimizer.params.betas", betas[i], name, Kind::kNonNegative);
    }
  }
  r.fill("optimizer.params.eps", params["eps"], "adam_epsilon", Kind::kNonNegative);
  r.fill("optimizer.params.weight_decay", params["weight_decay"], "weight_decay",
         Kind::kNonNegative);
}

// The scheduler block: DeepSpeed's three schedules that are Transformers' with a linear warmup.
void read_scheduler(const json& config, Reader& r) {
  const json& scheduler = block(config, "scheduler");
  if (scheduler.is_null()) return;  // Transformers' schedule, lr_scheduler_type's
  check_keys(scheduler, "scheduler", {"type", "params"}, "");
  const json& type = field(scheduler, "type");
  const std::string name = type.is_string() ? type.get<std::string>() : "";
  const std::string schedule = name == "WarmupLR"         ? "constant_with_warmup"
                               : name == "WarmupDecayLR"  ? "linear"
                               : name == "WarmupCosineLR" ? "cosine"
                                                          : "";
  if (schedule.empty()) {
    throw refused("scheduler.type", type,
                  "WarmupLR, WarmupDecayLR or WarmupCosineLR: Transformers' "
                  "constant_with_warmup, linear and cosine; leave out the scheduler block to use "
                  "lr_scheduler_type");
  }
  r.fill_word("scheduler.type", type, "lr_scheduler_type", schedule, {schedule});
  json params = block(scheduler, "params");
  if (params.is_null()) params = json::object();
  const bool cosine = name == "WarmupCosineLR";
  std::vector<std::string> keys = {"warmup_num_steps", "warmup_type"};
  if (cosine) {
    keys.insert(keys.end(), {"total_num_steps", "warmup_min_ratio", "cos_min_ratio"});
  } else {
    keys.insert(keys.end(), {"warmup_min_lr", "warmup_max_lr"});
    if (name == "WarmupDecayLR") keys.push_back("total_num_steps");
  }
  check_keys(params, "scheduler.params", keys, "");
  const json& warmup_type = field(params, "warmup_type");
  if (warmup_type != "linear") {
    throw InputError(fmt::format(
        "argument deepspeed: scheduler.params.warmup_type {} is not allowed (\"linear\": "
        "DeepSpeed's default \"log\" warms up logarithmically, not built here)",
        warmup_type.is_null() ? "(left out: \"log\")" : shown(warmup_type)));
  }
  const json& min_lr = field(params, "warmup_min_lr");
  if (!min_lr.is_null() && !is_auto(min_lr) && min_lr != 0)
    throw refused("scheduler.params.warmup_min_lr", min_lr, "0 or \"auto\": warmup starts at 0");
  r.fill("scheduler.params.warmup_max_lr", field(params, "warmup_max_lr"), "learning_rate",
         Kind::kNonNegative);
  if (cosine) {
    const json& min_ratio = field(params, "warmup_min_ratio");
    if (!min_ratio.is_null() && min_ratio != 0)
      throw refused("scheduler.params.warmup_min_ratio", min_ratio, "0: warmup starts at 0");
    const json& cos_min = field(params, "cos_min_ratio");
    if (cos_min != 0) {
      throw InputError(fmt::format(
          "argument deepspeed: scheduler.params.cos_min_ratio {} is not allowed (0: Transformers' "
          "cosine decays to 0; DeepSpeed's default is 0.0001)",
          cos_min.is_null() ? "(left out: 0.0001)" : shown(cos_min)));
    }
  }
  const json& warmup = field(params, "warmup_num_steps");
  if (!warmup.is_null() && !is_auto(warmup)) {
    const auto steps = base::whole_number(warmup);
    if (!steps || *steps < 0)
      throw refused("scheduler.params.warmup_num_steps", warmup, "an integer >= 0 or \"auto\"");
    if (!r.argument("warmup_steps").given && r.argument("warmup_ratio").given &&
        r.argument("warmup_ratio").value != 0) {
      throw InputError(fmt::format(
          "argument deepspeed: scheduler.params.warmup_num_steps {} with warmup_ratio {} (give "
          "\"auto\", or warmup_steps)",
          shown(warmup), shown(r.argument("warmup_ratio").value)));
    }
    r.fill("scheduler.params.warmup_num_steps", *steps, "warmup_steps", Kind::kNonNegative);
  }
  const json& total = field(params, "total_num_steps");
  if (!total.is_null() && !is_auto(total)) {
    const DeepSpeedArgument& max_steps = r.argument("max_steps");
    if (!max_steps.given || total != max_steps.value) {
      throw InputError(fmt::format(
          "argument deepspeed: scheduler.params.total_num_steps {} differs from the run's steps "
          "(give \"auto\", or max_steps {})",
          shown(total), shown(total)));
    }
  }
}

}  // namespace

json load_deepspeed_config(const json& deepspeed) {
  if (deepspeed.is_object()) return deepspeed;
  if (!deepspeed.is_string() || deepspeed.get<std::string>().empty()) {
    throw InputError(fmt::format(
        "argument deepspeed: {} is not allowed (a DeepSpeed JSON file's path, or its object)",
        shown(deepspeed)));
  }
  const std::string path = deepspeed.get<std::string>();
  std::string text;
  try {
    // A DeepSpeed config is a few kilobytes; 64 MiB bounds what a wrong path can make us read.
    text = base::read_file(path, size_t{64} << 20, "DeepSpeed config ");
  } catch (const InputError& e) {
    throw InputError(fmt::format("argument deepspeed: {}", e.what()));
  }
  json config;
  try {
    config = base::parse_json(text, path);
  } catch (const InputError& e) {
    throw InputError(fmt::format("argument deepspeed: {}", e.what()));
  }
  if (!config.is_object()) {
    throw InputError(fmt::format("argument deepspeed: {} holds {}, expected a JSON object", path,
                                 base::a_type(config)));
  }
  return config;
}

DeepSpeedPlan parse_deepspeed_plan(const json& config, const Arguments& arguments,
                                   const std::function<int64_t()>& world_size) {
  DeepSpeedPlan plan;
  Reader r(arguments, plan);
  read_features(config);
  read_zero(config, plan);
  const bool find_batch = r.argument("auto_find_batch_size").value == true;
  // auto_find_batch_size halves the batch: Transformers then fills the batch keys without
  // checking them.
  if (!find_batch) {
    r.fill("train_micro_batch_size_per_gpu", field(config, "train_micro_batch_size_per_gpu"),
           "per_device_train_batch_size", Kind::kCount);
  }
  r.fill("gradient_accumulation_steps", field(config, "gradient_accumulation_steps"),
         "gradient_accumulation_steps", Kind::kCount);
  const json& total = field(config, "train_batch_size");
  if (!total.is_null() && !is_auto(total) && !find_batch) {
    const auto whole = base::whole_number(total);
    if (!whole || *whole < 1)
      throw refused("train_batch_size", total, "an integer >= 1 or \"auto\"");
    const int64_t world = world_size();
    const int64_t micro = r.effective("per_device_train_batch_size").get<int64_t>();
    const int64_t accumulation = r.effective("gradient_accumulation_steps").get<int64_t>();
    if (*whole != world * micro * accumulation) {
      throw InputError(fmt::format(
          "argument deepspeed: train_batch_size {} differs from the world size {} x "
          "per_device_train_batch_size {} x gradient_accumulation_steps {} = {} (give \"auto\" or "
          "the same value)",
          *whole, world, micro, accumulation, world * micro * accumulation));
    }
  }
  // DeepSpeed clips only where gradient_clipping says (its default 0: no clipping), and the
  // Trainer leaves clipping to it.
  const json& clipping = field(config, "gradient_clipping");
  const DeepSpeedArgument& norm = r.argument("max_grad_norm");
  if (clipping.is_null() && norm.given && norm.value != 0) {
    throw InputError(fmt::format(
        "argument deepspeed: gradient_clipping is left out (DeepSpeed's default 0: no clipping) "
        "while max_grad_norm is {} (give \"auto\" or the same value)",
        shown(norm.value)));
  }
  r.fill("gradient_clipping", clipping.is_null() ? json(0.0) : clipping, "max_grad_norm",
         Kind::kNonNegative);
  read_precision(config, r);
  if (plan.stage >= 1 && r.effective("fp16") == true) {
    throw InputError(fmt::format(
        "argument deepspeed: fp16 with ZeRO stage {} is not built (fp16's loss scaling would "
        "need every process's overflow check of the sharded gradients): use bf16",
        plan.stage));
  }
  read_optimizer(config, r);
  read_scheduler(config, r);
  return plan;
}

int64_t deepspeed_world_size() {
  const dist::DistEnv env = dist::read_dist_env();
  return env.elastic_world_size > 0 ? env.elastic_world_size : env.world_size;
}

}  // namespace trainer
