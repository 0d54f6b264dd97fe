// The `trainer` program: `trainer train`, `evaluate` and `predict` on any registered data set, with
// Transformers' arguments, outputs and printed metrics, on one process or on every process a
// launcher started (only the main one prints and writes); `trainer launch` starts them; `trainer
// plot` draws runs' curves; `trainer generate` samples from a trained gpt; `trainer tokenize` shows
// a tokenizer.json's ids; `trainer env` prints the versions a bug report needs. Bad input exits 2
// with one line. Each command is a file of its own.
#include <csignal>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

#include <fmt/format.h>

#include "apps/trainer/cli.h"
#include "apps/trainer/commands.h"
#include "apps/trainer/generate.h"
#include "lib/accelerate/launch.h"
#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/distributed/launcher.h"
#include "lib/distributed/rendezvous.h"
#include "lib/report/plot.h"
#include "lib/runtime/allocator.h"
#include "lib/runtime/omp_env.h"
#include "lib/runtime/signals.h"
#include "lib/runtime/torch_logs.h"

namespace trainer::cli {

int plot_command(const std::vector<std::string>& output_dirs, const std::string& output,
                 double smoothing) {
  auto [svg, html] = report::write_plot(output_dirs, output, smoothing);
  fmt::print("Wrote {} and {}\n", svg, html);
  return 0;
}

namespace {

// Runs before every library's initialiser (the executable's .preinit_array comes first): libgomp's
// reads OMP_NUM_THREADS and would print a complaint of its own about a value it cannot read, so
// such a value is bad input here, said in one line before anything else runs. The environment
// as the loader passes it (environ is not set yet), write(2) and _exit: nothing of the C or C++
// runtime is needed this early.
void check_omp_num_threads(int, char**, char** environment) {
  const char* value = nullptr;
  constexpr char kName[] = "OMP_NUM_THREADS=";
  for (char** entry = environment; entry && *entry && !value; ++entry) {
    if (std::strncmp(*entry, kName, sizeof kName - 1) == 0) value = *entry + sizeof kName - 1;
  }
  if (value == nullptr || runtime::omp_num_threads_is_valid(value)) return;
  const char* parts[] = {"trainer: error: OMP_NUM_THREADS is '", value,
                         "', which is not a number of threads (a whole number from 1, or a "
                         "comma-separated list of them)\n"};
  for (const char* part : parts) {
    [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, part, std::strlen(part));
  }
  ::_exit(2);
}

[[gnu::section(".preinit_array"),
  gnu::used]] void (*const kCheckOmpNumThreads)(int, char**, char**) = check_omp_num_threads;

}  // namespace

}  // namespace trainer::cli

using namespace trainer;
using namespace trainer::cli;

int main(int argc, char** argv) {
  trainer::base::open_standard_streams();
  trainer::runtime::configure_allocator();
  trainer::runtime::route_torch_logs();
  trainer::runtime::catch_interrupts("trainer: ");
  // A closed stdout (trainer train ... | head -1) makes writes fail instead of killing the run.
  std::signal(SIGPIPE, SIG_IGN);
  try {
    auto command = cli::parse_command_line(argc, argv);
    if (!command) return 0;
    if (command->name == "launch") {
      if (const char* rank = std::getenv("RANK")) {
        throw InputError(fmt::format(
            "trainer launch runs inside a distributed run already (RANK={}); start it once per "
            "node, outside any launcher",
            rank));
      }
      command->launch.rendezvous = dist::make_tcp_rendezvous;
      return dist::launch(command->launch);
    }
    if (command->name == "env") return env_command();
    if (command->name == "generate") return generate_text(command->generate);
    if (command->name == "tokenize") return tokenize_command(command->tokenize);
    if (command->name == "chat-template") return chat_template_command(command->chat_template);
    if (command->name == "chat") return chat_command(command->generate);
    if (command->name == "merge") return merge_command(command->merge);
    if (command->name == "plot") {
      return plot_command(command->plot_dirs, command->plot_output, command->plot_smoothing);
    }
    if (command->name == "sft") return sft_command(command->config, command->overrides);
    if (command->name == "dpo") return dpo_command(command->config, command->overrides);
    TrainingArguments args = TrainingArguments::parse(command->config, command->overrides);
    if (command->name == "predict") return predict_command(args);
    return command->name == "train" ? train_command(args) : evaluate_command(args);
  } catch (...) {
    // The launcher's SIGTERM to the other ranks may reach this one as it ends: one line only.
    runtime::defer_interrupts();
    return report_error("trainer: ");
  }
}
