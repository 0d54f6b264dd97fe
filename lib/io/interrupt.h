// SIGINT and SIGTERM as a request to stop: a program that wants it (the trainer CLI) installs a
// handler that ends the process at once with one line until defer_interrupts() (called when the
// training loop starts), and from then on only sets a flag that the
// training and evaluation loops check between steps and answer by throwing Interrupted. A second
// signal ends the process at once, as the default action would.
#pragma once

#include <stdexcept>
#include <string>

namespace trainer {

// The run stopped because of a signal; main prints what() and exits 128 + signal().
class Interrupted : public std::runtime_error {
 public:
  Interrupted(int signal, const std::string& message)
      : std::runtime_error(message), signal_(signal) {}
  int signal() const { return signal_; }

 private:
  int signal_;
};

namespace io {

// Installs the handlers (SIGINT, SIGTERM) for the rest of the process's life; a signal that is
// ignored when this is called stays ignored. Until defer_interrupts(), the handler writes
// "<prefix>interrupted by SIGTERM; nothing was saved" and exits 128 + signal.
void catch_interrupts(const std::string& prefix);

// From now on, for the rest of the process (the loop, the saving after it, the exit), a signal
// only sets the flag interrupt_signal() reads.
void defer_interrupts();

// The signal that asked to stop, or 0.
int interrupt_signal();

// "SIGTERM" for SIGTERM.
std::string signal_name(int signal);

}  // namespace io
}  // namespace trainer
