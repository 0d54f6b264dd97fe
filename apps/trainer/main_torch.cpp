// `trainer-torch`, the `trainer` program's commands that need LibTorch, which `trainer` (main.cpp)
// hands its arguments to: `trainer train`, `evaluate` and `predict` on any registered data set,
// with Transformers' arguments, outputs and printed metrics, on one process or on every process a
// launcher started (only the main one prints and writes); `trainer launch` starts them; `trainer
// generate` samples from a model; `trainer env` prints the versions a bug report needs. Bad input
// exits 2 with one line. The process is set up here; run_program (program.cpp) runs the command.
#include <csignal>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

#include "apps/trainer/commands.h"
#include "lib/base/files.h"
#include "lib/runtime/allocator.h"
#include "lib/runtime/omp_env.h"
#include "lib/runtime/signals.h"
#include "lib/runtime/torch_logs.h"

namespace trainer::cli {
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

int main(int argc, char** argv) {
  trainer::base::open_standard_streams();
  trainer::runtime::configure_allocator();
  trainer::runtime::route_torch_logs();
  trainer::runtime::catch_interrupts("trainer: ");
  // A closed stdout (trainer train ... | head -1) makes writes fail instead of killing the run.
  std::signal(SIGPIPE, SIG_IGN);
  return trainer::cli::run_program(argc, argv);
}
