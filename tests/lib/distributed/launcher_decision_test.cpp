// The launcher's decision after an attempt (decide_after_attempt), without processes: success
// finishes, a failure restarts while restarts are left, bad input and signals end the run, a
// busy port stops a restart, and on several nodes a stop the rendezvous asked for starts a new
// round (a joining node's not counted) unless a node gave up, with what the others are told.
#include "lib/distributed/launcher_decision.h"

#include <csignal>

#include <gtest/gtest.h>

namespace trainer::dist {
namespace launcher_decision_test {

const std::string kFailure = "rank 1 (local rank 1, pid 42) exited with code 1: boom";
const std::string kNodeFailed = "node 1 (192.0.2.2): rank 3 exited with code 1";

LaunchOptions options(int max_restarts) {
  LaunchOptions o;
  o.max_restarts = max_restarts;
  return o;
}

// This node's ranks ended with `exit_code` (the failure above unless 0) after `restarts`.
AttemptEnd ended(int exit_code, int restarts = 0) {
  AttemptEnd end;
  end.attempt.exit_code = exit_code;
  if (exit_code != 0) {
    end.attempt.failure = kFailure;
    end.attempt.failed_rank = 1;
  }
  end.restarts = restarts;
  return end;
}

// The rendezvous stopped this node's ranks: `why`.
AttemptEnd stopped(const std::string& why, int restarts = 0) {
  AttemptEnd end;
  end.rendezvous = true;
  end.attempt.exit_code = 1;
  end.attempt.stopped_for = why;
  end.restarts = restarts;
  return end;
}

TEST(LauncherDecision, EveryRankEndingWellFinishes) {
  const Decision d = decide_after_attempt(options(3), ended(0));
  EXPECT_EQ(d.step, NextStep::kFinish);
  EXPECT_EQ(d.exit_code, 0);
  EXPECT_EQ(d.message, "");
  EXPECT_EQ(d.give_up, "");
}

TEST(LauncherDecision, AFailureRestartsWhileRestartsAreLeftThenGivesUp) {
  Decision d = decide_after_attempt(options(2), ended(1, 1));
  EXPECT_EQ(d.step, NextStep::kRestart);
  EXPECT_TRUE(d.counts);
  EXPECT_EQ(d.message, "trainer launch: " + kFailure + "; restarting every rank (restart 2 of 2)");
  d = decide_after_attempt(options(2), ended(1, 2));
  EXPECT_EQ(d.step, NextStep::kEnd);
  EXPECT_EQ(d.exit_code, 1);
  EXPECT_EQ(d.message, "trainer launch: " + kFailure + "; gave up after 2 restarts");
  EXPECT_EQ(decide_after_attempt(options(1), ended(1, 1)).message,
            "trainer launch: " + kFailure + "; gave up after 1 restart");
  // Without --max-restarts: the first failure ends the run.
  d = decide_after_attempt(options(0), ended(1));
  EXPECT_EQ(d.step, NextStep::kEnd);
  EXPECT_EQ(d.message, "trainer launch: " + kFailure + "; stopping the other ranks");
  EXPECT_EQ(d.give_up, "");  // one node: nobody to tell
}

TEST(LauncherDecision, BadInputIsNotRestarted) {
  const Decision d = decide_after_attempt(options(5), ended(2));
  EXPECT_EQ(d.step, NextStep::kEnd);
  EXPECT_EQ(d.exit_code, 2);
  EXPECT_EQ(d.message, "trainer launch: " + kFailure + "; stopping the other ranks");
}

TEST(LauncherDecision, ASignalEndsTheRunDuringAnAttemptOrBeforeARestart) {
  AttemptEnd end = ended(1);
  end.attempt.interrupted = SIGTERM;
  Decision d = decide_after_attempt(options(3), end);
  EXPECT_EQ(d.step, NextStep::kEnd);
  EXPECT_EQ(d.exit_code, 128 + SIGTERM);
  EXPECT_EQ(d.message, "trainer launch: interrupted by SIGTERM; stopped every rank");
  // Asked before a restart: the same end.
  end = ended(1);
  end.late_signal = SIGINT;
  d = decide_after_attempt(options(3), end);
  EXPECT_EQ(d.exit_code, 128 + SIGINT);
  EXPECT_EQ(d.message, "trainer launch: interrupted by SIGINT; stopped every rank");
  // With no restart to make, the failure is what ends the run.
  EXPECT_EQ(decide_after_attempt(options(0), end).message,
            "trainer launch: " + kFailure + "; stopping the other ranks");
  // On several nodes the others are told.
  end = ended(1);
  end.rendezvous = true;
  end.attempt.interrupted = SIGINT;
  EXPECT_EQ(decide_after_attempt(options(3), end).give_up, "node 0 was interrupted");
}

TEST(LauncherDecision, APortStillBusyStopsTheRestart) {
  AttemptEnd end = ended(1);
  end.port_busy = true;
  const Decision d = decide_after_attempt(options(3), end);
  EXPECT_EQ(d.step, NextStep::kEnd);
  EXPECT_EQ(d.exit_code, 1);
  EXPECT_EQ(d.message, "trainer launch: " + kFailure +
                           "; not restarting: --master-port 29500 was still busy 10 s later");
}

TEST(LauncherDecision, AnotherNodesStopStartsANewRoundCountedAsARestart) {
  Decision d = decide_after_attempt(options(3), stopped(kNodeFailed, 1));
  EXPECT_EQ(d.step, NextStep::kNewRound);
  EXPECT_TRUE(d.counts);
  EXPECT_EQ(d.message, "trainer launch: " + kNodeFailed +
                           "; stopped every rank; restarting every rank (restart 2 of 3)");
  // None left: this node gives up, and tells the others why.
  d = decide_after_attempt(options(3), stopped(kNodeFailed, 3));
  EXPECT_EQ(d.step, NextStep::kEnd);
  EXPECT_EQ(d.exit_code, 1);
  EXPECT_EQ(d.message,
            "trainer launch: " + kNodeFailed + "; stopped every rank; gave up after 3 restarts");
  EXPECT_EQ(d.give_up, kNodeFailed);
  EXPECT_EQ(decide_after_attempt(options(0), stopped(kNodeFailed)).message,
            "trainer launch: " + kNodeFailed + "; stopped every rank");
}

TEST(LauncherDecision, ANodeWaitingToJoinIsANewRoundNotARestart) {
  const std::string join = join_request("192.0.2.9");
  const Decision d = decide_after_attempt(options(0), stopped(join));
  EXPECT_EQ(d.step, NextStep::kNewRound);
  EXPECT_FALSE(d.counts);
  EXPECT_EQ(d.message, "trainer launch: " + join + "; stopped every rank; a new round takes it in");
  // This node's ranks failed too, but every node learned of the join first: all decide alike.
  AttemptEnd end = ended(1);
  end.rendezvous = true;
  end.stop = NodeRendezvous::Stop{join, "", false};
  EXPECT_EQ(decide_after_attempt(options(0), end).step, NextStep::kNewRound);
}

TEST(LauncherDecision, ANodeThatGaveUpEndsTheRunOnEveryNode) {
  AttemptEnd end = stopped(kNodeFailed);
  end.given_up = true;
  const Decision d = decide_after_attempt(options(3), end);
  EXPECT_EQ(d.step, NextStep::kEnd);
  EXPECT_EQ(d.exit_code, 1);
  EXPECT_EQ(d.message, "trainer launch: " + kNodeFailed + "; stopped every rank");
  EXPECT_EQ(d.give_up, "");  // it knows already
  // Learned when reporting this node's failure (final): no restart, whatever is left.
  end = ended(1);
  end.rendezvous = true;
  end.stop = NodeRendezvous::Stop{"node 1 gave up", "", true};
  EXPECT_EQ(decide_after_attempt(options(3), end).step, NextStep::kEnd);
}

TEST(LauncherDecision, ALostNodeIsNamedBeforeThisNodesFailure) {
  AttemptEnd end = ended(1, 2);
  end.rendezvous = true;
  const std::string lost = "node 1 (192.0.2.2) was lost: no heartbeat for 30 s";
  end.stop = NodeRendezvous::Stop{"this node's ranks failed", lost, false};
  Decision d = decide_after_attempt(options(2), end);
  EXPECT_EQ(d.step, NextStep::kEnd);
  EXPECT_EQ(d.message, "trainer launch: " + lost + "; " + kFailure + "; gave up after 2 restarts");
  EXPECT_EQ(d.give_up, "node 0 gave up: " + lost + "; " + kFailure);
  end.restarts = 0;
  d = decide_after_attempt(options(2), end);
  EXPECT_EQ(d.step, NextStep::kRestart);
  EXPECT_EQ(d.message, "trainer launch: " + lost + "; " + kFailure +
                           "; restarting every rank (restart 1 of 2)");
  EXPECT_EQ(d.give_up, "");
}

}  // namespace launcher_decision_test
}  // namespace trainer::dist
