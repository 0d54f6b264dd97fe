// Inside TrainingArguments (not part of its interface): one Spec per row of the argument table,
// with the JSON conversions of its type, and the lookup of a key that names the nearest known
// one. Shared by the parsing, the docs and training_args.json.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainer/training_args.h"

namespace trainer::args {

// One argument: its name and help, what its values must be ("an integer", ...), its value as
// JSON, setting it from JSON (InputError naming the key on a wrong type), and reading
// command-line text as JSON of its type.
struct Spec {
  std::string name;
  std::string help;
  const char* kind;
  std::function<nlohmann::ordered_json(const TrainingArguments&)> get;
  std::function<void(TrainingArguments&, const nlohmann::ordered_json&)> set;
  std::function<nlohmann::ordered_json(const std::string&)> parse_text;
};

// The kind of the arguments whose value is a JSON object of options (model_config, ...).
inline constexpr const char* kJsonObjectKind = "a JSON object";
// The kind of deepspeed: a file's path or the JSON object itself.
inline constexpr const char* kPathOrJsonObjectKind = "a path or a JSON object";

// Every argument, in the table's order.
const std::vector<Spec>& specs();

// The spec of `key` (evaluation_strategy is eval_strategy's old name). Throws InputError for a
// key Transformers has that this trainer does not support, and for an unknown key, naming the
// nearest known one.
const Spec& lookup(const std::string& key);

}  // namespace trainer::args
