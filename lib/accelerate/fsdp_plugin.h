// The fsdp and fsdp_config arguments read as Accelerate's FullyShardedDataParallelPlugin reads
// them (torch-free): the sharding strategy, auto_wrap's units, prefetching and the state dict
// type, every word and key checked. The Accelerator's sharding options are made from the plan.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainer {

// What the fsdp and fsdp_config arguments ask for, read and checked.
struct FsdpPlan {
  // "full_shard", "shard_grad_op" or "shard_optimizer" (no_shard is DDP: no plan).
  std::string strategy = "full_shard";
  bool auto_wrap = false;
  bool offload = false;
  int64_t min_num_params = 0;
  std::vector<std::string> layer_classes;  // transformer_layer_cls_to_wrap
  bool backward_prefetch = true;
  bool forward_prefetch = false;
  bool sync_module_states = true;
  bool sharded_state_dict = false;  // state_dict_type SHARDED_STATE_DICT
};

// The sharding `fsdp` (Transformers' words, split on white space) and `fsdp_config` (a JSON
// object; the "fsdp_" prefix of Accelerate's keys accepted) ask for; nothing without fsdp or with
// no_shard. Throws InputError ("argument fsdp: ..." or "argument fsdp_config: ...") naming a bad
// word, key or value.
std::optional<FsdpPlan> parse_fsdp_plan(const std::string& fsdp,
                                        const nlohmann::ordered_json& fsdp_config);

}  // namespace trainer
