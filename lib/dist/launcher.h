// The launcher behind `trainer launch`, torchrun's job in C++: start this node's ranks with
// torchrun's environment, prefix and forward their output, and when one fails (non-zero exit or
// a signal) stop the others (SIGTERM, then SIGKILL after a grace period) so no process is left.
// Torch-free: it only starts and watches processes.
#pragma once

#include <string>
#include <vector>

namespace trainer::dist {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool rank0_only = false;     // forward only rank 0's stdout (every rank's stderr still shows)
  double grace_seconds = 5.0;  // between SIGTERM and SIGKILL when stopping ranks
  double rdzv_timeout_seconds = 60.0;  // how long a node > 0 waits to reach the master
  std::vector<std::string> command;    // PROGRAM [ARGS...]
};

// Checks the options (InputError, exit 2 in main): counts that do not add up, a node_rank outside
// [0, nnodes), a port outside 1..65535, a master port already bound on node 0, an unknown or
// unreachable master address on other nodes, a program that cannot be found.
void validate_launch(const LaunchOptions& options);

// Runs the ranks to completion. Returns 0 when every rank exited 0; otherwise 1 after printing
// one line naming the first rank that failed and how (or 128 + signal when the launcher itself
// was interrupted by SIGINT/SIGTERM, which it forwards to every rank).
int launch(const LaunchOptions& options);

}  // namespace trainer::dist
