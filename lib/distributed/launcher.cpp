// The launcher's entry points: its options checked, `trainer launch`'s exec of each rank, and the
// restart loop of run_ranks around one attempt at a time (launcher_attempt.cpp).
#include "lib/distributed/launcher.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include "lib/base/errors.h"
#include "lib/base/text.h"
#include "lib/distributed/launcher_attempt.h"
#include "lib/distributed/launcher_network.h"
#include "lib/distributed/launcher_processes.h"
#include "lib/runtime/signals.h"

namespace trainer::dist {
namespace {

using Clock = std::chrono::steady_clock;

// One line of the launcher's own on stderr, unbuffered (the ranks write there too).
void write_stderr(const std::string& line) {
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
}

// How long a restart waits for the previous attempt's TCPStore port to be free again.
constexpr double kPortWaitSeconds = 10.0;

// Waits until nothing holds `port` on this machine (the next attempt's rank 0 binds it), at most
// `seconds`; returns whether it is free. Returns at once, with `interrupted` set, when SIGINT or
// SIGTERM arrives meanwhile.
bool wait_for_free_port(int port, double seconds, const SignalScope& signals, int& interrupted) {
  auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (port_is_busy(port)) {
    if (Clock::now() >= deadline) return false;
    pollfd fd{signals.read_fd(), POLLIN, 0};
    ::poll(&fd, 1, 50);
    if ((interrupted = signals.pending_interrupt())) return false;
  }
  return true;
}

}  // namespace

std::string join_request(const std::string& address) {
  return fmt::format("a node ({}) waits to join", address);
}

bool is_join_request(const std::string& reason) {
  return base::starts_with(reason, "a node (") && base::ends_with(reason, ") waits to join");
}

namespace {

// The counts of nodes and ranks, and this node's place among them.
void check_counts(const LaunchOptions& o) {
  if (o.nproc_per_node < 1) {
    throw InputError(
        fmt::format("--nproc-per-node {} is not allowed (must be >= 1)", o.nproc_per_node));
  }
  if (o.nnodes < 1)
    throw InputError(fmt::format("--nnodes {} is not allowed (must be >= 1)", o.nnodes));
  const bool elastic = is_elastic(o);
  if (o.min_nnodes < 0 || o.min_nnodes > o.nnodes) {
    throw InputError(fmt::format("--nnodes {}:{} is not allowed (MIN:MAX with 1 <= MIN <= MAX)",
                                 o.min_nnodes, o.nnodes));
  }
  if (!std::isfinite(o.rdzv_last_call_seconds) || o.rdzv_last_call_seconds < 0) {
    throw InputError(
        fmt::format("--rdzv-last-call {} is not allowed (seconds, a finite number >= 0)",
                    o.rdzv_last_call_seconds));
  }
  if (elastic && !o.rendezvous) {
    throw InputError(fmt::format("{}: --nnodes {}:{} (elastic) needs the trainer program", o.name,
                                 o.min_nnodes, o.nnodes));
  }
  if (!elastic && (o.node_rank < 0 || o.node_rank >= o.nnodes)) {
    throw InputError(
        fmt::format("--node-rank {} is not allowed (must be in [0, {}) for --nnodes {})",
                    o.node_rank, o.nnodes, o.nnodes));
  }
}

// The master's address and port, the times, the restarts and the program, as given.
void check_values(const LaunchOptions& o) {
  if (o.master_addr.empty()) {
    throw InputError("--master-addr \"\" is not allowed (a host name or address of node 0)");
  }
  if (!std::isfinite(o.grace_seconds) || o.grace_seconds < 0) {
    throw InputError(fmt::format("--grace-period {} is not allowed (seconds, a finite number >= 0)",
                                 o.grace_seconds));
  }
  if (o.max_restarts < 0 || o.max_restarts > kMaxRestarts) {
    throw InputError(fmt::format("--max-restarts {} is not allowed (must be in 0..{})",
                                 o.max_restarts, kMaxRestarts));
  }
  if (!std::isfinite(o.rdzv_timeout_seconds) || o.rdzv_timeout_seconds < 0) {
    throw InputError(fmt::format("--rdzv-timeout {} is not allowed (seconds, a finite number >= 0)",
                                 o.rdzv_timeout_seconds));
  }
  if (o.master_port < (o.nnodes == 1 ? 0 : 1) || o.master_port > 65535) {
    throw InputError(fmt::format(
        "--master-port {} is not allowed (must be in 1..65535, or 0 for a free port on one node)",
        o.master_port));
  }
  if (std::error_code ec; !o.command.empty() && !program_exists(o.command[0])) {
    throw InputError(
        fmt::format("program {} is not an executable file or on PATH{}", o.command[0],
                    std::filesystem::is_directory(o.command[0], ec) ? " (a directory)" : ""));
  }
}

// The network: node 0's master port free, or the master reachable from the other nodes.
void check_master(const LaunchOptions& o) {
  if (is_elastic(o)) {
    // The node whose address is the master's hosts the rendezvous (the first to bind it, when
    // several nodes share a machine); every other node must reach it.
    if (!resolves(o.master_addr)) {
      throw InputError(
          fmt::format("--master-addr {} is not a known host name or address", o.master_addr));
    }
    if (!is_local_address(o.master_addr) &&
        !reachable(o.master_addr, o.master_port, o.rdzv_timeout_seconds)) {
      throw InputError(
          fmt::format("--master-addr {}:{} was not reachable within {} s (is its node running?)",
                      o.master_addr, o.master_port, o.rdzv_timeout_seconds));
    }
  } else if (o.node_rank == 0) {
    if (o.master_port != 0 && port_is_busy(o.master_port)) {
      throw InputError(
          fmt::format("--master-port {} is busy on this machine (another run or program holds it; "
                      "choose a free port)",
                      o.master_port));
    }
  } else {
    if (!resolves(o.master_addr)) {
      throw InputError(
          fmt::format("--master-addr {} is not a known host name or address", o.master_addr));
    }
    if (!reachable(o.master_addr, o.master_port, o.rdzv_timeout_seconds)) {
      throw InputError(
          fmt::format("--master-addr {}:{} was not reachable within {} s (is node 0 running?)",
                      o.master_addr, o.master_port, o.rdzv_timeout_seconds));
    }
  }
}

}  // namespace

void validate_launch(const LaunchOptions& o) {
  check_counts(o);
  check_values(o);
  check_master(o);
}

int count_threads() {
  std::error_code ec;
  int n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/task", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

int launch(const LaunchOptions& o) {
  if (o.command.empty())
    throw InputError("launch needs a PROGRAM to run (trainer launch [OPTIONS] PROGRAM [ARGS...])");
  std::vector<std::string> command = o.command;
  LaunchResult result = run_ranks(o, [&command](const RankInfo&) {
    std::vector<char*> argv;
    for (auto& a : command) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "cannot execute %s: %s\n", argv[0], std::strerror(errno));
    return 127;
  });
  if (!result.message.empty()) write_stderr(result.message + "\n");
  return result.exit_code;
}

LaunchResult run_ranks(const LaunchOptions& options, const RankMain& rank_main) {
  validate_launch(options);
  // Several nodes agree on each attempt through the rendezvous (node 0's launcher hosts it).
  // Reaching it (bounded by --rdzv-timeout) runs before the launcher catches any signal: a
  // SIGINT or SIGTERM then ends it at once, as it ends any program.
  std::unique_ptr<NodeRendezvous> rendezvous;
  if ((options.nnodes > 1 || is_elastic(options)) && options.rendezvous)
    rendezvous = options.rendezvous(options);
  // SIGINT and SIGTERM are caught from here: at the rendezvous too, where a launcher waits for
  // the other nodes (join ends with Interrupted).
  SignalScope signals;
  Watchdog watchdog;  // one for every attempt: it watches each attempt's ranks
  LaunchResult result;
  // Restarts after a failure count against max_restarts; a round that only took in a node that
  // waited to join does not.
  int restarts = 0;
  while (true) {
    LaunchOptions o = options;
    int attempt_number = restarts;
    if (rendezvous) {
      NodeRendezvous::Round round =
          rendezvous->join([&signals] { return signals.pending_interrupt(); });
      o.node_rank = round.node_rank;
      o.nnodes = round.nnodes;
      o.master_addr = round.master_addr;
      o.master_port = round.master_port;
      attempt_number = round.number;
      if (is_elastic(options)) o.elastic_world_size = options.nnodes * options.nproc_per_node;
      if (round.number > 0 || o.elastic_world_size > 0) {
        write_stderr(fmt::format("{}: round {}: {} node{} ({}), world size {}; this is node {}\n",
                                 o.name, round.number, round.nnodes, round.nnodes == 1 ? "" : "s",
                                 fmt::join(round.addresses, ", "), round.nnodes * o.nproc_per_node,
                                 round.node_rank));
      }
    }
    const int world_size = o.nnodes * o.nproc_per_node;
    if (o.master_port == 0) o.master_port = free_port();  // a fresh one for each attempt
    StopPoll poll;
    if (rendezvous) poll = [&rendezvous] { return rendezvous->poll(); };
    Attempt attempt =
        run_attempt(o, world_size, attempt_number, rank_main, signals, watchdog, poll);
    result.exit_code = attempt.exit_code;
    result.failed_rank = attempt.failed_rank;
    result.restarts = restarts;
    int interrupted = attempt.interrupted;
    if (!interrupted && attempt.exit_code == 0 && attempt.stopped_for.empty()) {
      if (rendezvous) rendezvous->finished();
      return result;
    }
    // This node's ranks failed: every node learns the round's first reason to stop, so that all
    // decide alike (another node's may have come first: a node waiting to join).
    std::string lost;
    bool final = false;
    if (rendezvous && !interrupted && attempt.stopped_for.empty() && attempt.exit_code != 0) {
      NodeRendezvous::Stop stop = rendezvous->report_failure(attempt.failure);
      lost = stop.lost;
      final = stop.final;
      if (!final && is_join_request(stop.reason)) {
        attempt.stopped_for = stop.reason;
      }
    }
    if (rendezvous && !interrupted && !attempt.stopped_for.empty() && rendezvous->given_up()) {
      result.exit_code = 1;
      result.message = fmt::format("{}: {}; stopped every rank", o.name, attempt.stopped_for);
      return result;
    }
    if (!interrupted && !attempt.stopped_for.empty()) {
      // Another node asked every node to stop: a new round, counted as a restart when a node
      // failed or was lost.
      const bool joining = is_join_request(attempt.stopped_for);
      if (!joining && restarts >= o.max_restarts) {
        if (rendezvous) rendezvous->give_up(attempt.stopped_for);
        result.exit_code = 1;
        result.message =
            o.max_restarts > 0
                ? fmt::format("{}: {}; stopped every rank; gave up after {} restart{}", o.name,
                              attempt.stopped_for, restarts, restarts == 1 ? "" : "s")
                : fmt::format("{}: {}; stopped every rank", o.name, attempt.stopped_for);
        return result;
      }
      if (!joining) ++restarts;
      write_stderr(fmt::format("{}: {}; stopped every rank; {}\n", o.name, attempt.stopped_for,
                               joining ? "a new round takes it in"
                                       : fmt::format("restarting every rank (restart {} of {})",
                                                     restarts, o.max_restarts)));
      continue;
    }
    if (!lost.empty()) attempt.failure = lost + "; " + attempt.failure;
    // Bad input (exit code 2: every rank read the same arguments) and an interruption end the
    // run: a restart could not help.
    bool restart = !interrupted && !final && attempt.exit_code != 2 && restarts < o.max_restarts;
    bool port_free = true;
    if (restart) interrupted = signals.pending_interrupt();
    if (restart && !interrupted && !rendezvous && o.node_rank == 0 && options.master_port != 0)
      port_free = wait_for_free_port(o.master_port, kPortWaitSeconds, signals, interrupted);
    std::string failure = fmt::format("{}: {}", o.name, attempt.failure);
    if (rendezvous && (interrupted || !restart)) {
      rendezvous->give_up(interrupted
                              ? fmt::format("node {} was interrupted", o.node_rank)
                              : fmt::format("node {} gave up: {}", o.node_rank, attempt.failure));
    }
    if (interrupted) {
      result.message = fmt::format("{}: interrupted by {}; stopped every rank", o.name,
                                   runtime::signal_name(interrupted));
      result.exit_code = 128 + interrupted;
      return result;
    }
    if (!restart) {
      result.message = o.max_restarts > 0 && attempt.exit_code != 2
                           ? fmt::format("{}; gave up after {} restart{}", failure, restarts,
                                         restarts == 1 ? "" : "s")
                           : failure + "; stopping the other ranks";
      return result;
    }
    if (!port_free) {
      result.message = fmt::format("{}; not restarting: --master-port {} was still busy {} s later",
                                   failure, o.master_port, kPortWaitSeconds);
      return result;
    }
    ++restarts;
    write_stderr(fmt::format("{}; restarting every rank (restart {} of {})\n", failure, restarts,
                             o.max_restarts));
  }
}

}  // namespace trainer::dist
