// SIGINT and SIGTERM as a request to stop: a program that wants it (the trainer CLI) lets them
// set a flag, which the training and evaluation loops check between steps and answer by throwing
// Interrupted; a second signal ends the process at once, as the default would.
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
// ignored when this is called stays ignored.
void catch_interrupts();

// The signal that asked to stop, or 0.
int interrupt_signal();

// "SIGTERM" for SIGTERM.
std::string signal_name(int signal);

}  // namespace io
}  // namespace trainer
