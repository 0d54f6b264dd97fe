// SIGINT and SIGTERM as a request to stop: a program that wants it (the trainer CLI) installs a
// handler that ends the process at once with one line until defer_interrupts() (called when the
// training loop starts), and from then on only sets a flag that the
// training and evaluation loops check between steps and answer by throwing Interrupted. A second
// signal ends the process at once, as the default action would.
#pragma once

#include "lib/base/errors.h"  // Interrupted, which the loops throw

#include <string>

namespace trainer::runtime {

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

}  // namespace trainer::runtime
