// The launcher behind `trainer launch` and the in-process trainer::launch, torchrun's job in C++:
// start this node's ranks with torchrun's environment, prefix and forward their output, and when
// one fails (non-zero exit or a signal) stop the others (SIGTERM, then SIGKILL after a grace
// period) so no process is left, then start them all again up to max_restarts times.
// Torch-free: it only starts and watches processes.
#pragma once

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace trainer::dist {

// The ranks of an in-process launch (trainer::launch) failed or were interrupted.
class LaunchError : public std::runtime_error {
 public:
  LaunchError(const std::string& message, int status)
      : std::runtime_error(message), status_(status) {}
  // What `trainer launch` would exit with: 1 when a rank failed, 128 + signal when interrupted.
  int status() const { return status_; }

 private:
  int status_;
};

class NodeRendezvous;
struct LaunchOptions;

// Makes the rendezvous of a run on several nodes (nnodes > 1 or min_nnodes < nnodes); set by the
// programs that link c10d (make_tcp_rendezvous), absent in torch-free callers.
using RendezvousFactory = std::function<std::unique_ptr<NodeRendezvous>(const LaunchOptions&)>;

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;  // with min_nnodes: the most nodes (torchrun's --nnodes MIN:MAX)
  // Elastic runs: the fewest nodes a round may start with (0: nnodes, a static run). Nodes then
  // take their node rank from the rendezvous, in the order they joined.
  int min_nnodes = 0;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;     // 0 (one node only): a port that is free when the ranks start
  bool rank0_only = false;     // forward only rank 0's stdout (every rank's stderr still shows)
  double grace_seconds = 5.0;  // between SIGTERM and SIGKILL when stopping ranks
  // torchrun's --max-restarts: after a rank fails, stop every rank and start them all again, at
  // most this many times (0..kMaxRestarts). Not after bad input (the rank named exited 2) or an
  // interruption. Each attempt's ranks see TORCHELASTIC_RESTART_COUNT = restarts so far.
  int max_restarts = 0;
  double rdzv_timeout_seconds = 60.0;  // how long a node > 0 waits to reach the master
  // Elastic runs: once min_nnodes have joined a round, how long it stays open for more.
  double rdzv_last_call_seconds = 5.0;
  RendezvousFactory rendezvous;
  // Set by run_ranks for an elastic run's ranks (TRAINER_ELASTIC_WORLD_SIZE): the world size of
  // the most nodes, for which the arguments' batch is meant.
  int elastic_world_size = 0;
  std::vector<std::string> command;     // PROGRAM [ARGS...] (trainer launch only)
  std::string name = "trainer launch";  // how the launcher's own lines begin
};

// The nodes of a run agreeing, before each attempt, on who takes part (torchrun's rendezvous),
// and learning while the ranks run that every node must stop them: one node's ranks failed, a
// node was lost (no heartbeat), or a node waits to join (elastic).
class NodeRendezvous {
 public:
  virtual ~NodeRendezvous() = default;
  struct Round {
    int number = 0;  // the same on every node of the round; the ranks' TORCHELASTIC_RESTART_COUNT
    int node_rank = 0;
    int nnodes = 1;
    std::string master_addr;  // where the round's rank 0 hosts the ranks' TCPStore
    int master_port = 0;
    std::vector<std::string> addresses;  // every node's address, by node rank
  };
  // Blocks until a round closes with this node in it. Throws std::runtime_error (one line) when
  // none does within the rendezvous timeout or the rendezvous is lost, and Interrupted as soon
  // as `interrupted` (asked between waits, about every 100 ms) names a signal (SIGINT, SIGTERM).
  virtual Round join(const std::function<int()>& interrupted) = 0;
  // Called while this node's ranks run (often; it reaches the network about once a second): a
  // heartbeat, and why every node must stop its ranks now ("" while none).
  virtual std::string poll() = 0;
  // What every node of a round learns when it ends early.
  struct Stop {
    std::string reason;  // the round's first reason to stop (the same on every node)
    std::string lost;    // the nodes found lost ("node 1 (192.0.2.2) was lost: ..."), or ""
    bool final = false;  // a node gave up (gave_up): no node starts another round
  };
  // This node's ranks failed (`what`): tells the other nodes, and returns what they all learn.
  virtual Stop report_failure(const std::string& what) = 0;
  // This node will not start another round (bad input, no restarts left, interrupted): every
  // other node ends too instead of waiting for it.
  virtual void give_up(const std::string& why) = 0;
  // Whether a node gave up in this round (known from poll or report_failure).
  virtual bool given_up() const = 0;
  // This node's ranks all ended well: the host keeps the rendezvous until every node has left
  // (a rendezvous destroyed for any other reason leaves the same way: the host then keeps it
  // until every node that is still reporting its own end has done so).
  virtual void finished() = 0;
};

// Whether `o` is an elastic run (--nnodes MIN:MAX with MIN < MAX).
inline bool is_elastic(const LaunchOptions& o) {
  return o.min_nnodes > 0 && o.min_nnodes < o.nnodes;
}

// The reason a node gives when it waits to join a running round: every node stops its ranks for
// a new round that takes it in, which is no failure (not counted against max_restarts).
std::string join_request(const std::string& address);
bool is_join_request(const std::string& reason);

// The largest LaunchOptions::max_restarts allowed.
inline constexpr int kMaxRestarts = 1000;

// The exit status of a rank whose collective failed because a peer died or timed out: when
// several ranks fail, the launcher names one that failed with another status first, since it is
// more likely the cause.
inline constexpr int kPeerFailureExitCode = 3;

// One rank as its process sees it.
struct RankInfo {
  int global_rank = 0;
  int local_rank = 0;
  int world_size = 1;
};

// What a forked rank runs, with torchrun's variables already in its environment: returns the
// rank's exit status.
using RankMain = std::function<int(const RankInfo&)>;

struct LaunchResult {
  // Of the last attempt: 0 when every rank exited 0; 1 when one failed (2 when the rank named
  // exited 2: bad input); 128 + signal when the launcher was interrupted by SIGINT or SIGTERM
  // (which it forwarded to every rank).
  int exit_code = 0;
  // The last attempt's first failure, "<name>: rank N (local rank L, pid P) exited with code C[:
  // the rank's last line on stderr]; stopping the other ranks" ("...; gave up after R restarts"
  // when max_restarts > 0 and all were made), or the interruption; empty on success.
  std::string message;
  int failed_rank = -1;
  int restarts = 0;  // how many times every rank was started again after a failure
};

// Checks the options (InputError, exit 2 in main): counts that do not add up, a node_rank outside
// [0, nnodes), max_restarts outside 0..kMaxRestarts, a port outside 1..65535, a master port already
// bound on node 0, an unknown or unreachable master address on other nodes, a program that cannot
// be found (when `command` is given).
void validate_launch(const LaunchOptions& options);

// Starts this node's ranks, each a forked copy of this process that sets torchrun's environment
// (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_*, and
// OMP_NUM_THREADS = cores / ranks unless set) and calls `rank_main`; forwards their output with
// "[rankN]: " prefixes and waits for all of them. When a rank fails and fewer than
// options.max_restarts restarts were made (and it did not exit 2, and no SIGINT/SIGTERM came),
// stops every rank, prints "<name>: rank N (local rank L, pid P) <how it ended>; restarting every
// rank (restart K of R)" on stderr, and starts them all again (TORCHELASTIC_RESTART_COUNT = K;
// the same master port, once it is free again, or a fresh one when master_port is 0). The
// calling process must have no other thread (fork copies only the calling thread). Throws
// InputError from validate_launch.
LaunchResult run_ranks(const LaunchOptions& options, const RankMain& rank_main);

// `trainer launch`: runs options.command as every rank (run_ranks with exec). Returns the exit
// code after printing the result's message, if any, on stderr.
int launch(const LaunchOptions& options);

// The number of threads this process runs (from /proc/self/task).
int count_threads();

// A TCP port nothing listens on at the moment (the kernel's choice for port 0). Throws
// std::runtime_error when no socket can be bound.
int free_port();

}  // namespace trainer::dist
