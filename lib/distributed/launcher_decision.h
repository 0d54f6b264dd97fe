// What the launcher does after each attempt (torch-free, no processes): finish, end the run,
// start a new round of the nodes, or restart every rank. run_ranks (launcher.cpp) gathers how the
// attempt ended, asks decide_after_attempt, and acts on its answer.
#pragma once

#include <optional>
#include <string>

#include "lib/distributed/launcher.h"
#include "lib/distributed/launcher_attempt.h"

namespace trainer::dist {

// How long a restart waits for the previous attempt's TCPStore port to be free again.
inline constexpr double kPortWaitSeconds = 10.0;

// Everything the decision depends on.
struct AttemptEnd {
  Attempt attempt;          // how this node's ranks ended
  bool rendezvous = false;  // several nodes agree on each round through a NodeRendezvous
  // What every node learned when this node reported its ranks' failure (report_failure: called
  // when should_report_failure says so); none when it did not report.
  std::optional<NodeRendezvous::Stop> stop;
  bool given_up = false;  // a node gave up in this round (NodeRendezvous::given_up)
  int restarts = 0;       // restarts after a failure so far
  // Asked only when a first decision is kRestart (then decided again): a SIGINT or SIGTERM that
  // came since the attempt ended, and the master port still busy kPortWaitSeconds later.
  int late_signal = 0;
  bool port_busy = false;
};

// Whether this node must tell the other nodes that its ranks failed (they did, on their own:
// not interrupted, not stopped by the rendezvous).
inline bool should_report_failure(const Attempt& a) {
  return !a.interrupted && a.stopped_for.empty() && a.exit_code != 0;
}

enum class NextStep {
  kFinish,    // every rank ended well: the run is over (exit code 0)
  kEnd,       // the run ends with `exit_code` and `message`
  kNewRound,  // the nodes stop for a new round (another node failed or was lost, or one joins)
  kRestart,   // this node's ranks failed: start every rank again
};

struct Decision {
  NextStep step = NextStep::kFinish;
  int exit_code = 0;    // kFinish, kEnd: LaunchResult::exit_code
  std::string message;  // kEnd: LaunchResult::message; kNewRound, kRestart: the line to print
  std::string give_up;  // what to tell the other nodes (NodeRendezvous::give_up); "": nothing
  bool counts = false;  // kNewRound, kRestart: a restart counted against max_restarts
};

// What follows an attempt of the ranks `o` describes (the round's options: name, node_rank,
// master_port, max_restarts): bad input (exit code 2) and an interruption end the run; a failure
// restarts every rank while restarts are left; a stop the rendezvous asked for starts a new round
// (counted unless it only takes in a joining node) unless a node gave up.
Decision decide_after_attempt(const LaunchOptions& o, const AttemptEnd& end);

}  // namespace trainer::dist
