// The `trainer` program's commands as its help lists them (apps/trainer/cli_help.cpp): `trainer
// --help` prints them all, and each command's own --help starts with its line.
#pragma once

#include <string>
#include <vector>

namespace trainer::cli {

// A command: its name, how it is called, and what it does.
struct CommandHelp {
  std::string name, usage, summary;
};
// Every command, in the order --help lists them.
const std::vector<CommandHelp>& command_helps();
// `trainer --help`: what the program is, then each command's call and summary, once.
std::string top_help();
// A command's call and summary ("" for a name that is no command).
std::string help_of(const std::string& name);

}  // namespace trainer::cli
