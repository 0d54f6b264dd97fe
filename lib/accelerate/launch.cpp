// trainer::launch: the in-process launcher over dist::run_ranks.
#include "lib/accelerate/launch.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/base/text.h"
#include "lib/distributed/process_group.h"
#include "lib/runtime/signals.h"

namespace trainer {

int report_error(const std::string& prefix) {
  std::string message;
  int status = dist::kPeerFailureExitCode;
  try {
    throw;
  } catch (const dist::DistError& e) {
    message = e.what();
  } catch (const PeerFailure& e) {
    message = e.what();
  } catch (const dist::LaunchError& e) {
    message = e.what();
    status = e.status();
  } catch (const c10::DistError& e) {  // gloo's and NCCL's own, raised inside DDP's backward
    message = e.what_without_backtrace();
  } catch (const c10::Error& e) {
    message = e.what_without_backtrace();
    status = 1;
  } catch (const std::exception& e) {
    // gloo's own IoException ("[.../gloo/transport/tcp/pair.cc:538] Read error [host]:port:
    // Connection reset by peer"), raised through DDP's Reducer: a peer died or timed out.
    const std::string what = e.what();
    const size_t end = what.find("] ");
    if (what.rfind('[', 0) != 0 || end == std::string::npos || what.find("/gloo/") >= end) {
      return report_error_line(prefix);  // InputError, Interrupted, the rest
    }
    // The process group may be gone by now (unwound): the place from the environment.
    dist::DistEnv env;
    try {
      env = dist::read_dist_env();
    } catch (const std::exception&) {
    }
    message = fmt::format("a collective failed on rank {} of {}: {}", env.rank, env.world_size,
                          what.substr(end + 2));
  } catch (...) {
    return report_error_line(prefix);
  }
  std::fprintf(stderr, "%serror: %s\n", prefix.c_str(), base::first_line(message).c_str());
  std::fflush(stderr);
  return status;
}

void launch(const std::function<void()>& fn, int num_processes, dist::LaunchOptions options) {
  if (num_processes < 1) {
    throw InputError(fmt::format("trainer::launch: num_processes {} is not allowed (must be >= 1)",
                                 num_processes));
  }
  if (num_processes == 1) {
    fn();
    return;
  }
  if (int threads = dist::count_threads(); threads > 1) {
    throw std::logic_error(fmt::format(
        "trainer::launch: this process already runs {} threads (LibTorch's thread pool or a CUDA "
        "context), which its forked ranks could not use: call trainer::launch before any tensor "
        "work, first thing in main",
        threads));
  }
  options.nproc_per_node = num_processes;
  options.nnodes = 1;
  options.node_rank = 0;
  options.command.clear();
  dist::LaunchResult result = dist::run_ranks(options, [&fn](const dist::RankInfo&) {
    // OpenMP read OMP_NUM_THREADS when this program started, before the launcher set it.
    if (const char* threads = std::getenv("OMP_NUM_THREADS")) {
      torch::set_num_threads(std::max(1, std::atoi(threads)));
    }
    try {
      fn();
      return 0;
    } catch (...) {
      return report_error("");
    }
  });
  if (result.exit_code != 0) throw dist::LaunchError(result.message, result.exit_code);
}

}  // namespace trainer
