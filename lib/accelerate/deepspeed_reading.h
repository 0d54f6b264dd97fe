// What the readers of a DeepSpeed config share (internal to lib/accelerate/deepspeed_*.cpp): a
// refusal naming the key, "auto", a key's value, an object-valued block, the keys a block takes;
// and zero_optimization's reading and the refusal of the features not built (deepspeed_zero.cpp).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/accelerate/deepspeed_plugin.h"
#include "lib/base/errors.h"

namespace trainer::deepspeed {

using json = nlohmann::ordered_json;

// "argument deepspeed: <key> <value> is not allowed (<allowed>)".
InputError refused(const std::string& key, const json& value, const std::string& allowed);
bool is_auto(const json& value);
bool contains(const std::vector<std::string>& list, const std::string& item);
// object[key], or null.
const json& field(const json& object, const char* key);
// An object-valued key (or none); anything else is refused.
const json& block(const json& config, const char* key);
// Refuses a key of `object` (at `where`) that is not `allowed`, with `note` after the list.
void check_keys(const json& object, const std::string& where,
                const std::vector<std::string>& allowed, const std::string& note);

// zero_optimization: the stage as a plan, offloading, and what ZeRO++ and MiCS would add.
void read_zero(const json& config, DeepSpeedPlan& plan);
// Top-level blocks of DeepSpeed features not built here: refused unless "enabled" is false.
void read_features(const json& config);

}  // namespace trainer::deepspeed
