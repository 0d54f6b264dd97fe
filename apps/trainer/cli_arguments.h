// Inside the command line (apps/trainer/cli.cpp): the `--name value` reader of train, evaluate and
// predict, which names the argument of a missing, empty or repeated value instead of misreading it.
#pragma once

#include <string>
#include <vector>

#include "apps/trainer/cli.h"

namespace trainer::cli {

// A flag's value as HfArgumentParser's string_to_bool reads it (yes/no, true/false, t/f, y/n,
// 1/0, any case): "true", "false", or "" for anything else.
std::string bool_word(std::string text);

// Whether `token` is an option: a token that reads as a negative number is a value
// (--learning_rate -1).
bool looks_like_option(const std::string& token);

// train/evaluate/predict: [CONFIG.json] and `--name value` pairs into command.config and
// command.overrides, each name once; a flag (a boolean argument) alone means true. Throws
// InputError naming the argument (the nearest known one for a misspelt name).
void read_training_arguments(const std::vector<std::string>& tokens, Command& command);

}  // namespace trainer::cli
