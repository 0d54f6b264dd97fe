// The handler behind catch_interrupts: async-signal-safe (a flag, or write + _exit with a line
// prepared when it was installed).
#include "lib/runtime/signals.h"

#include <csignal>
#include <cstring>

#include <unistd.h>

namespace trainer::runtime {
namespace {

volatile std::sig_atomic_t g_signal = 0;
volatile std::sig_atomic_t g_deferred = 0;
char g_int_line[256] = "";
char g_term_line[256] = "";

void on_interrupt(int sig) {
  if (g_deferred) {
    if (g_signal == 0) g_signal = sig;
    return;
  }
  const char* line = sig == SIGINT ? g_int_line : g_term_line;
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, line, std::strlen(line));
  ::_exit(128 + sig);
}

void prepare(char* buffer, size_t size, const std::string& prefix, int sig) {
  std::string line = prefix + "interrupted by " + signal_name(sig) + "; nothing was saved\n";
  std::strncpy(buffer, line.c_str(), size - 1);
  buffer[size - 1] = '\0';
}

}  // namespace

void catch_interrupts(const std::string& prefix) {
  prepare(g_int_line, sizeof g_int_line, prefix, SIGINT);
  prepare(g_term_line, sizeof g_term_line, prefix, SIGTERM);
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  action.sa_flags = SA_RESTART | SA_RESETHAND;
  ::sigemptyset(&action.sa_mask);
  for (int sig : {SIGINT, SIGTERM}) {
    // A signal ignored from the start stays ignored (nohup, a shell's background job), as
    // Python leaves an ignored SIGINT alone.
    struct sigaction previous {};
    ::sigaction(sig, nullptr, &previous);
    if (previous.sa_handler != SIG_IGN) ::sigaction(sig, &action, nullptr);
  }
}

void defer_interrupts() { g_deferred = 1; }

int interrupt_signal() { return g_signal; }

std::string signal_name(int signal) {
  const char* name = ::sigabbrev_np(signal);
  return name ? std::string("SIG") + name : "signal " + std::to_string(signal);
}

}  // namespace trainer::runtime
