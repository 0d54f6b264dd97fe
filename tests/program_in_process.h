// The `trainer` program run inside the test process (cli::run_program, the program without its
// process set-up), for the sanitizer build's checks of bad input: each run costs a call rather
// than a process loading LibTorch (seconds each under AddressSanitizer). Only the LibTorch test
// binary links the program's commands.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace trainer::testing {

// argv split from a shell command line that is only the program and its arguments: the first word
// `program`, words made of plain text, '...' and "..." (a backslash escaping inside "..." and
// outside quotes); nullopt when the line needs a shell (a variable assignment first, a pipe, a
// redirection, &&, ;, $, a backquote or parentheses outside quotes, or another first word).
std::optional<std::vector<std::string>> plain_command_words(const std::string& line,
                                                            const std::string& program);

// `trainer ARGS...` (args without the program's name) run in-process: run_program's exit code,
// with what it wrote to stdout and stderr (file descriptors 1 and 2 captured for the call, the
// C and C++ streams flushed around it). Not for commands that start processes (launch) or wait
// on signals.
ProcessResult run_trainer_in_process(const std::vector<std::string>& args);

}  // namespace trainer::testing
