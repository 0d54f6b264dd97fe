// One attempt of the launcher (torch-free): every rank of this node started once, their output
// forwarded line by line with "[rankN]: ", all of them stopped when one fails or the launcher is
// interrupted, and the failure to name chosen.
#pragma once

#include <functional>
#include <string>

#include "lib/distributed/launcher.h"
#include "lib/distributed/launcher_processes.h"

namespace trainer::dist {

// How one attempt ended.
struct Attempt {
  int exit_code = 0;  // 0; 1 when a rank failed; 2 when the rank named exited 2 (bad input)
  // "rank N (local rank L, pid P) exited with code C[: its last line on stderr]"; empty on
  // success.
  std::string failure;
  int failed_rank = -1;
  int interrupted = 0;  // SIGINT or SIGTERM to the launcher, forwarded to every rank
  // Why the rendezvous stopped every rank (another node's failure, a lost node, a node waiting
  // to join); empty when it did not.
  std::string stopped_for;
};

// Asked while the ranks run: why every rank must stop now, or "".
using StopPoll = std::function<std::string()>;

// Starts this node's ranks (the attempt after `restart_count` restarts), forwards their output,
// stops them all when one fails or the launcher is interrupted, and returns once every rank is
// reaped and its output drained. Throws std::runtime_error when a rank cannot be started (the
// ranks already started are killed first).
Attempt run_attempt(const LaunchOptions& o, int world_size, int restart_count,
                    const RankMain& rank_main, const SignalScope& signals, Watchdog& watchdog,
                    const StopPoll& poll = nullptr);

}  // namespace trainer::dist
