// LibTorch's own text on stderr, routed through ours: c10's log lines (TCPStore's "recvValue
// failed ... Exception raised from ... frame #0", Gloo's, the process groups') are silent, since
// whatever of them matters reaches the user as an exception we turn into one line; c10's
// warnings (TORCH_WARN) become one "trainer: warning: LibTorch: ..." line each, without source
// location or backtrace, or nothing where they say nothing a user can act on.
// TORCH_CPP_LOG_LEVEL (PyTorch's own switch) brings LibTorch's text back as LibTorch prints it.
#pragma once

#include <string>

namespace trainer::runtime {

// Installs the routing once per process; later calls do nothing. Called by the trainer program,
// the process groups, DistributedDataParallel, the Accelerator and the Trainer; a C++ program of
// its own can call it first thing.
void route_torch_logs();

// The line a LibTorch warning's message becomes (its first line), or "" for a warning that is
// silent: one that repeats a line already printed by this process, or one of those LibTorch
// prints about its own internals (listed in torch_logs.cpp with the reason).
std::string torch_warning_line(const std::string& message);

}  // namespace trainer::runtime
