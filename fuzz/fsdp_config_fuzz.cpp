// libFuzzer target for FSDP's plugin (parse_fsdp_plan): the input read as fsdp's words, and, when
// it is a JSON object, as fsdp_config under each strategy. Only trainer::InputError may come out,
// and an accepted plan must be one the Accelerator can build: a sharding strategy, at most one
// wrapping rule, and that one only with auto_wrap.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "lib/accelerate/fsdp_plugin.h"
#include "lib/base/errors.h"
#include "lib/base/json_text.h"

namespace {

void check(const std::optional<trainer::FsdpPlan>& plan, const std::string& fsdp) {
  if (!plan) return;
  const bool strategy = plan->strategy == "full_shard" || plan->strategy == "shard_grad_op" ||
                        plan->strategy == "shard_optimizer";
  const bool rules = plan->min_num_params > 0 || !plan->layer_classes.empty();
  const bool ok = strategy && plan->min_num_params >= 0 &&
                  !(plan->min_num_params > 0 && !plan->layer_classes.empty()) &&
                  (plan->auto_wrap || !rules);
  if (!ok) {
    std::fprintf(stderr, "fsdp \"%s\" accepted a plan it should refuse: %s, min_num_params %lld\n",
                 fsdp.c_str(), plan->strategy.c_str(),
                 static_cast<long long>(plan->min_num_params));
    abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    check(trainer::parse_fsdp_plan(text, nlohmann::ordered_json::object()), text);
  } catch (const trainer::InputError&) {
  }
  nlohmann::ordered_json config;
  try {
    // As a config's fsdp_config is read: the one JSON reader, with its depth limit; an object.
    config = trainer::base::parse_json(text, "fuzz");
  } catch (const trainer::InputError&) {
    return 0;
  }
  if (!config.is_object()) return 0;
  for (const char* fsdp : {"", "no_shard", "full_shard", "shard_grad_op auto_wrap",
                           "shard_optimizer offload auto_wrap"}) {
    try {
      check(trainer::parse_fsdp_plan(fsdp, config), fsdp);
    } catch (const trainer::InputError&) {
    }
  }
  return 0;
}
