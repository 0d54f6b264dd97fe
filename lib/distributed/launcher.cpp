// The launcher's entry points: its options checked, `trainer launch`'s exec of each rank, and the
// restart loop of run_ranks around one attempt at a time (launcher_attempt.cpp): what follows an
// attempt decided apart from the processes (decide_after_attempt, launcher_decision.h).
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
#include "lib/distributed/launcher_decision.h"
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

namespace {

// After a stop the rendezvous asked for (`stopped_for`: another node failed or was lost, or one
// waits to join): a new round, counted as a restart when a node failed or was lost.
Decision after_stop(const LaunchOptions& o, const AttemptEnd& end, const std::string& stopped_for) {
  Decision d;
  if (end.rendezvous && end.given_up) {
    d.step = NextStep::kEnd;
    d.exit_code = 1;
    d.message = fmt::format("{}: {}; stopped every rank", o.name, stopped_for);
    return d;
  }
  const bool joining = is_join_request(stopped_for);
  if (!joining && end.restarts >= o.max_restarts) {
    d.step = NextStep::kEnd;
    d.exit_code = 1;
    d.message = o.max_restarts > 0
                    ? fmt::format("{}: {}; stopped every rank; gave up after {} restart{}", o.name,
                                  stopped_for, end.restarts, end.restarts == 1 ? "" : "s")
                    : fmt::format("{}: {}; stopped every rank", o.name, stopped_for);
    if (end.rendezvous) d.give_up = stopped_for;
    return d;
  }
  d.step = NextStep::kNewRound;
  d.counts = !joining;
  d.message = fmt::format("{}: {}; stopped every rank; {}", o.name, stopped_for,
                          joining ? "a new round takes it in"
                                  : fmt::format("restarting every rank (restart {} of {})",
                                                end.restarts + 1, o.max_restarts));
  return d;
}

// After this node's ranks failed or the launcher was interrupted. Bad input (exit code 2: every
// rank read the same arguments) and an interruption end the run: a restart could not help.
Decision after_failure(const LaunchOptions& o, const AttemptEnd& end) {
  const Attempt& a = end.attempt;
  const bool final = end.stop && end.stop->final;
  const std::string what =
      end.stop && !end.stop->lost.empty() ? end.stop->lost + "; " + a.failure : a.failure;
  const bool restart =
      !a.interrupted && !final && a.exit_code != 2 && end.restarts < o.max_restarts;
  const int interrupted = a.interrupted ? a.interrupted : restart ? end.late_signal : 0;
  const std::string failure = fmt::format("{}: {}", o.name, what);
  Decision d;
  d.step = NextStep::kEnd;
  d.exit_code = a.exit_code;
  if (end.rendezvous && (interrupted || !restart)) {
    d.give_up = interrupted ? fmt::format("node {} was interrupted", o.node_rank)
                            : fmt::format("node {} gave up: {}", o.node_rank, what);
  }
  if (interrupted) {
    d.exit_code = 128 + interrupted;
    d.message = fmt::format("{}: interrupted by {}; stopped every rank", o.name,
                            runtime::signal_name(interrupted));
  } else if (!restart) {
    d.message = o.max_restarts > 0 && a.exit_code != 2
                    ? fmt::format("{}; gave up after {} restart{}", failure, end.restarts,
                                  end.restarts == 1 ? "" : "s")
                    : failure + "; stopping the other ranks";
  } else if (end.port_busy) {
    d.message = fmt::format("{}; not restarting: --master-port {} was still busy {} s later",
                            failure, o.master_port, kPortWaitSeconds);
  } else {
    d.step = NextStep::kRestart;
    d.exit_code = 0;
    d.counts = true;
    d.message = fmt::format("{}; restarting every rank (restart {} of {})", failure,
                            end.restarts + 1, o.max_restarts);
  }
  return d;
}

// Joins the next round of the rendezvous: this node's place in it into `o`, the round's line
// printed. Returns the round's number (its ranks' TORCHELASTIC_RESTART_COUNT).
int join_round(NodeRendezvous& rendezvous, const LaunchOptions& options, const SignalScope& signals,
               LaunchOptions& o) {
  NodeRendezvous::Round round = rendezvous.join([&signals] { return signals.pending_interrupt(); });
  o.node_rank = round.node_rank;
  o.nnodes = round.nnodes;
  o.master_addr = round.master_addr;
  o.master_port = round.master_port;
  if (is_elastic(options)) o.elastic_world_size = options.nnodes * options.nproc_per_node;
  if (round.number > 0 || o.elastic_world_size > 0) {
    write_stderr(fmt::format("{}: round {}: {} node{} ({}), world size {}; this is node {}\n",
                             o.name, round.number, round.nnodes, round.nnodes == 1 ? "" : "s",
                             fmt::join(round.addresses, ", "), round.nnodes * o.nproc_per_node,
                             round.node_rank));
  }
  return round.number;
}

}  // namespace

Decision decide_after_attempt(const LaunchOptions& o, const AttemptEnd& end) {
  const Attempt& a = end.attempt;
  if (!a.interrupted && a.exit_code == 0 && a.stopped_for.empty()) return Decision{};
  // Every node learns the round's first reason to stop, so that all decide alike (another node's
  // may have come before this node's failure: a node waiting to join).
  std::string stopped_for = a.stopped_for;
  if (end.stop && !end.stop->final && is_join_request(end.stop->reason))
    stopped_for = end.stop->reason;
  if (!a.interrupted && !stopped_for.empty()) return after_stop(o, end, stopped_for);
  return after_failure(o, end);
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
  // Restarts after a failure count against max_restarts; a round that only took in a node that
  // waited to join does not.
  int restarts = 0;
  while (true) {
    LaunchOptions o = options;
    const int attempt_number = rendezvous ? join_round(*rendezvous, options, signals, o) : restarts;
    if (o.master_port == 0) o.master_port = free_port();  // a fresh one for each attempt
    StopPoll poll;
    if (rendezvous) poll = [&rendezvous] { return rendezvous->poll(); };
    AttemptEnd end;
    end.attempt = run_attempt(o, o.nnodes * o.nproc_per_node, attempt_number, rank_main, signals,
                              watchdog, poll);
    end.rendezvous = rendezvous != nullptr;
    end.restarts = restarts;
    if (rendezvous && should_report_failure(end.attempt))
      end.stop = rendezvous->report_failure(end.attempt.failure);
    if (rendezvous) end.given_up = rendezvous->given_up();
    Decision next = decide_after_attempt(o, end);
    if (next.step == NextStep::kRestart) {
      // What a restart needs, asked only now: no signal since, and (one node, a port of its
      // own) the previous attempt's port free again.
      end.late_signal = signals.pending_interrupt();
      if (!end.late_signal && !rendezvous && o.node_rank == 0 && options.master_port != 0) {
        end.port_busy =
            !wait_for_free_port(o.master_port, kPortWaitSeconds, signals, end.late_signal);
      }
      next = decide_after_attempt(o, end);
    }
    if (rendezvous && next.step == NextStep::kFinish) rendezvous->finished();
    if (rendezvous && !next.give_up.empty()) rendezvous->give_up(next.give_up);
    if (next.step == NextStep::kFinish || next.step == NextStep::kEnd) {
      LaunchResult result;
      result.exit_code = next.exit_code;
      result.message = next.message;
      result.failed_rank = end.attempt.failed_rank;
      result.restarts = restarts;
      return result;
    }
    if (next.counts) ++restarts;
    write_stderr(next.message + "\n");
  }
}

}  // namespace trainer::dist
