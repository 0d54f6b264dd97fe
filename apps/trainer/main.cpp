// The `trainer` program. It runs here, without LibTorch, what needs none: the command line itself
// (its help, and one line for an argument it cannot read), `trainer tokenize`, `trainer
// chat-template` and `trainer plot`, which therefore start in milliseconds rather than the half
// second that loading LibTorch takes; every other command it hands to `trainer-torch` beside it
// (main_torch.cpp), with the same arguments, in the same process (exec). Bad input exits 2 with
// one line.
#include <cerrno>
#include <csignal>
#include <cstring>
#include <string>

#include <unistd.h>

#include <fmt/format.h>

#include "apps/trainer/cli.h"
#include "apps/trainer/commands.h"
#include "lib/base/errors.h"
#include "lib/base/files.h"

namespace trainer::cli {
namespace {

// trainer-torch, the program beside this one (its real path's folder).
std::string torch_program() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) throw std::runtime_error("cannot find this program's path (/proc/self/exe)");
  return base::join_path(base::parent_dir(std::string(path, static_cast<size_t>(n))),
                         "trainer-torch");
}

int run(int argc, char** argv) {
  try {
    auto command = parse_command_line(argc, argv);
    if (!command) return 0;
    if (command->name == "tokenize") return tokenize_command(command->tokenize);
    if (command->name == "chat-template") return chat_template_command(command->chat_template);
    if (command->name == "plot") {
      return plot_command(command->plot_dirs, command->plot_output, command->plot_smoothing);
    }
    const std::string program = torch_program();
    ::execv(program.c_str(), argv);
    throw std::runtime_error(fmt::format("cannot run {} (the commands that need LibTorch): {}",
                                         program, std::strerror(errno)));
  } catch (...) {
    return report_error_line("trainer: ");
  }
}

}  // namespace
}  // namespace trainer::cli

int main(int argc, char** argv) {
  trainer::base::open_standard_streams();
  // A closed stdout (trainer tokenize ... | head -1) makes writes fail instead of killing it.
  std::signal(SIGPIPE, SIG_IGN);
  return trainer::cli::run(argc, argv);
}
