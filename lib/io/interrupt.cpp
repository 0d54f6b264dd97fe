// A signal handler that records the first SIGINT or SIGTERM and gives the default action back,
// so that the second one ends the process.
#include "lib/io/interrupt.h"

#include <csignal>
#include <cstring>

namespace trainer::io {
namespace {

volatile std::sig_atomic_t g_signal = 0;

void on_interrupt(int sig) {
  if (g_signal == 0) g_signal = sig;
}

}  // namespace

void catch_interrupts() {
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

int interrupt_signal() { return g_signal; }

std::string signal_name(int signal) {
  const char* name = ::sigabbrev_np(signal);
  return name ? std::string("SIG") + name : "signal " + std::to_string(signal);
}

}  // namespace trainer::io
