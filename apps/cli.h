// Command-line parsing of the `trainer` program (CLI11): the subcommand, the optional JSON
// config and the `--name value` overrides, with every TrainingArguments key in --help; the
// launcher's and `trainer plot`'s options.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lib/distributed/launcher.h"

namespace trainer::cli {

struct Command {
  std::string name;    // "train", "evaluate", "predict", "plot", "env" or "launch"
  std::string config;  // JSON file, or "" for defaults
  std::vector<std::pair<std::string, std::string>> overrides;
  dist::LaunchOptions launch;          // for "launch"
  std::vector<std::string> plot_dirs;  // for "plot": the runs' output_dirs
  std::string plot_output;             // for "plot": -o FILE, or ""
};

// Parses argv. Returns std::nullopt after printing help (exit 0). Throws InputError for unknown
// subcommands or options (naming the nearest known argument) and malformed values.
std::optional<Command> parse_command_line(int argc, char** argv);

}  // namespace trainer::cli
