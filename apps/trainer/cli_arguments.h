// Inside the command line (apps/trainer/cli.cpp): the `--name value` reader of train, evaluate and
// predict, which names the argument of a missing, empty or repeated value instead of misreading it;
// numbers from option text; the launcher's options (cli_launch.cpp).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "apps/trainer/cli.h"

namespace CLI {
class App;
}  // namespace CLI

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

// An option's text as a number in [low, high] (an integer with `integer`): "--nproc-per-node abc"
// is one line naming the option, its value and `allowed`.
double number_option(const std::string& option, const std::string& text, double low, double high,
                     bool integer, const std::string& allowed);

// Options whose values CLI11 keeps as text until number_option reads them.
using OptionText = std::map<std::string, std::string>;

// `trainer launch` under CLI11, described by `help` (cli_launch.cpp): its options into `text`.
CLI::App* add_launch(CLI::App& app, const std::string& help, Command& command, OptionText& text);
// The launcher's options read from `text` and the PROGRAM after them into command.launch; argv
// is the whole command line (a flag's value mistaken for PROGRAM is refused by name).
void finish_launch(Command& command, OptionText& text, const std::vector<std::string>& program,
                   int argc, char** argv);

}  // namespace trainer::cli
