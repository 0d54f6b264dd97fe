// trainer::launch, Accelerate's notebook_launcher in C++: runs a function in N processes of this
// machine with torchrun's environment, so that an Accelerator (or a Trainer) built inside it
// trains on all of them. It forks before LibTorch has started any thread or CUDA context, and
// shares its process handling (output prefixes, stopping every rank when one fails) with
// `trainer launch`.
#pragma once

#include <functional>
#include <string>

#include "lib/distributed/launcher.h"

namespace trainer {

// For a `catch (...)` block in main or in a rank: prints "<prefix>error: <message>" (its first
// line: LibTorch's errors carry a backtrace after it) on stderr and returns the exit status this
// project uses: 2 for an InputError (bad input), dist::kPeerFailureExitCode (3) for a
// collective that failed (dist::DistError, c10::DistError: most often a peer died), a
// dist::LaunchError's status, 1 for anything else.
int report_error(const std::string& prefix);

// The options trainer::launch starts from: one node, a free master port.
inline dist::LaunchOptions in_process_launch_options() {
  dist::LaunchOptions options;
  options.master_port = 0;
  options.name = "trainer::launch";
  return options;
}

// Runs `fn` in `num_processes` forked processes (ranks 0..N-1, each with RANK, LOCAL_RANK,
// WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ... set and, unless OMP_NUM_THREADS is set, cores / N
// threads) and returns when all have finished. Their output comes through with "[rankN]: "
// prefixes. With num_processes == 1, calls fn() here (never restarted), as notebook_launcher does.
// Throws dist::LaunchError naming the rank that failed (fn threw: exit status 1, 2 for an
// InputError, 3 for a DistError, which names another failed rank first as more likely the
// cause; or it was killed) after stopping the others, and after options.max_restarts restarts of
// every rank when that is above 0 (each restart forks `fn` anew); std::logic_error when this
// process already runs other threads (LibTorch's thread pool, a CUDA context: call
// trainer::launch first thing in main); InputError for a bad num_processes.
void launch(const std::function<void()>& fn, int num_processes,
            dist::LaunchOptions options = in_process_launch_options());

}  // namespace trainer
