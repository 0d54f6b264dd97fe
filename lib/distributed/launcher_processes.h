// The launcher's processes (torch-free): a rank's process and pipes, forking one with torchrun's
// environment, the launcher's signal handling while it runs, and the watchdog that kills every
// rank's process group if the launcher itself dies.
#pragma once

#include <array>
#include <csignal>
#include <string>
#include <vector>

#include <sys/types.h>

#include "lib/distributed/launcher.h"

namespace trainer::dist {

// One rank of this node: its process (the leader of its own process group) and the read ends of
// its stdout and stderr, with the text not yet forwarded.
struct Rank {
  int global_rank = 0;
  int local_rank = 0;
  pid_t pid = -1;
  int out_fd = -1;
  int err_fd = -1;
  std::string out_buffer, err_buffer;
  std::string last_error_line;  // the last line it wrote on stderr that is not blank
  bool exited = false;
  int status = 0;
};

// "exited with code C", "was killed by signal 9 (SIGKILL)".
std::string describe_status(int status);

// Whether `program` is an executable file, or one on PATH when it has no '/'.
bool program_exists(const std::string& program);

// The launcher's signal handling for its lifetime: SIGINT and SIGTERM are forwarded to the ranks,
// SIGCHLD wakes the loop (each signal becomes a byte on a pipe the loop polls); the previous
// handlers come back when it ends. One at a time.
class SignalScope {
 public:
  SignalScope();
  ~SignalScope();
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

  // The pipe's read end, for poll.
  int read_fd() const;
  // The first SIGINT or SIGTERM on the pipe that no attempt has acted on (0: none); the other
  // signals' bytes (SIGCHLD) are dropped.
  int pending_interrupt() const;

  // Blocks the launcher's signals, returning the mask to set back (in the launcher right after
  // fork; in a rank once restore_in_child and its own stdout and stderr are in place). Before
  // that, a rank would run the launcher's handler, and the SIGTERM that stops a rank just
  // started would reach the launcher's pipe as the launcher's own interruption.
  sigset_t block() const;

  // In a forked rank: the handlers the launcher's caller had, and none of the launcher's fds.
  // An ignored SIGINT, SIGTERM or SIGCHLD (a shell's background job has SIGINT ignored) comes
  // back as the default: the launcher's forwarded signals must reach the rank, and a rank must
  // be able to wait for its own children; exec keeps ignored signals ignored. A rank that will
  // exec (`for_exec`) gets the defaults, as exec would leave a handled signal: one that arrives
  // before exec then ends it quietly, not through the handler of the launcher's caller.
  void restore_in_child(bool for_exec) const;

 private:
  static constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGCHLD};
  std::array<struct sigaction, 3> previous_{};
  struct sigaction previous_pipe_ {};
};

// A process that outlives the launcher by a moment: when the launcher dies without saying so,
// even by SIGKILL, it kills every rank's process group, so that nothing a rank started is left
// running (PR_SET_PDEATHSIG reaches only the ranks themselves). It learns each rank's pid (its
// process group) through a pipe, forgets one whose rank was reaped (its pid may be reused; a
// restart's ranks are new groups), and waits for the launcher's "done" (a 0) or the pipe's end.
class Watchdog {
 public:
  Watchdog();
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void watch(pid_t group);
  // The rank that leads `group` was reaped, and its group killed.
  void forget(pid_t group);

 private:
  pid_t pid_ = -1;
};

// Forks `rank` (its own process group, stdout and stderr into pipes, torchrun's variables in its
// environment) and runs rank_main there; `ranks` are the node's other ranks, whose pipes the child
// closes. Throws std::runtime_error when a pipe or fork fails.
void spawn(const LaunchOptions& o, Rank& rank, int world_size, int restart_count,
           const RankMain& rank_main, const SignalScope& signals, const std::vector<Rank>& ranks);

// `sig` to the process group of every rank still running.
void signal_all(std::vector<Rank>& ranks, int sig);

}  // namespace trainer::dist
