// The deepspeed argument read as Transformers' HfTrainerDeepSpeedConfig and Accelerate's
// DeepSpeedPlugin read a DeepSpeed JSON config (torch-free), run on our own sharding: ZeRO's stage
// as an FsdpPlan, its "auto" values filled from the arguments, the values it sets checked against
// them, and what DeepSpeed would do that is not built here refused by name.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/accelerate/fsdp_plugin.h"

namespace trainer {

// One TrainingArguments value a DeepSpeed config fills or checks, and whether it was given (in
// the arguments' config or on the command line) rather than left at its default.
struct DeepSpeedArgument {
  nlohmann::ordered_json value;
  bool given = false;
};

// What a DeepSpeed config asks for, read and checked against the arguments.
struct DeepSpeedPlan {
  int stage = 0;                 // zero_optimization.stage
  std::optional<FsdpPlan> fsdp;  // stage 1, 2, 3: shard_optimizer, shard_grad_op, full_shard
  // The arguments the config sets (a non-"auto" value where the argument was not given), by
  // argument name, in the config's order.
  std::vector<std::pair<std::string, nlohmann::ordered_json>> settings;
};

// The config the deepspeed argument names: the JSON object itself, or the object in the file a
// string names. Throws InputError "argument deepspeed: ..." (a file that cannot be read, is not
// valid JSON or holds no object; a value that is neither).
nlohmann::ordered_json load_deepspeed_config(const nlohmann::ordered_json& deepspeed);

// Reads `config` (a JSON object) against `arguments` (per_device_train_batch_size,
// gradient_accumulation_steps, max_grad_norm, learning_rate, adam_beta1, adam_beta2,
// adam_epsilon, weight_decay, bf16, fp16, optim, lr_scheduler_type, warmup_steps, warmup_ratio,
// max_steps, auto_find_batch_size). "auto" takes the argument's value; another value must equal
// a given argument and sets one that was not given. `world_size` is asked only for a
// train_batch_size that is not "auto". Throws InputError "argument deepspeed: ..." naming the key,
// its value and what is allowed; warns of a top-level key DeepSpeed does not read.
DeepSpeedPlan parse_deepspeed_plan(const nlohmann::ordered_json& config,
                                   const std::map<std::string, DeepSpeedArgument>& arguments,
                                   const std::function<int64_t()>& world_size);

// The world size the arguments' batch is meant for, from the launcher's environment (an elastic
// run's largest world).
int64_t deepspeed_world_size();

}  // namespace trainer
