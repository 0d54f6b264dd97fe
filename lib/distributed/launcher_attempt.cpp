// One attempt of the launcher as a loop of named steps: reap the ranks that ended (naming the
// failure), stop the others, pump their output, and stop waiting for output that a process a rank
// started outside its group still holds.
#include "lib/distributed/launcher_attempt.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

namespace trainer::dist {
namespace {

using Clock = std::chrono::steady_clock;

// How long the other ranks may end by themselves after a rank exited only because it lost its
// peers, before they are stopped.
constexpr auto kEchoWait = std::chrono::seconds(2);

// The longest stretch of a rank's last line that a failure quotes.
constexpr size_t kQuotedLineLength = 400;

// Writes complete lines of `buffer` to `fd` with `prefix`; the rest stays for later (or all of it
// at `flush`). `last_line` becomes the last of them that is not blank.
void emit_lines(std::string& buffer, int fd, const std::string& prefix, bool show, bool flush,
                std::string& last_line) {
  auto emit = [&](std::string text) {
    if (show) {
      std::string line = prefix + text + "\n";
      [[maybe_unused]] ssize_t n = ::write(fd, line.data(), line.size());
    }
    while (!text.empty() && (text.back() == '\r' || text.back() == ' ')) text.pop_back();
    if (!text.empty()) last_line = text.substr(0, kQuotedLineLength);
  };
  size_t start = 0;
  while (true) {
    size_t nl = buffer.find('\n', start);
    if (nl == std::string::npos) break;
    emit(buffer.substr(start, nl - start));
    start = nl + 1;
  }
  buffer.erase(0, start);
  if (flush && !buffer.empty()) {
    emit(buffer);
    buffer.clear();
  }
}

// The attempt while it runs.
class AttemptRun {
 public:
  AttemptRun(const LaunchOptions& o, const SignalScope& signals, Watchdog& watchdog,
             const StopPoll& poll)
      : o_(o), signals_(signals), watchdog_(watchdog), poll_(poll) {}

  // Forks every rank of this node; on a failure, kills those already started and rethrows.
  void start_ranks(int world_size, int restart_count, const RankMain& rank_main) {
    ranks_.resize(static_cast<size_t>(o_.nproc_per_node));
    for (int i = 0; i < o_.nproc_per_node; ++i) {
      ranks_[i].local_rank = i;
      ranks_[i].global_rank = o_.node_rank * o_.nproc_per_node + i;
      try {
        spawn(o_, ranks_[i], world_size, restart_count, rank_main, signals_, ranks_);
        watchdog_.watch(ranks_[i].pid);
      } catch (...) {
        for (int j = 0; j < i; ++j) {
          ::kill(-ranks_[j].pid, SIGKILL);
          ::waitpid(ranks_[j].pid, nullptr, 0);
          watchdog_.forget(ranks_[j].pid);
          ::close(ranks_[j].out_fd);
          ::close(ranks_[j].err_fd);
        }
        throw;
      }
    }
  }

  // Until every rank is reaped and its pipes are closed.
  Attempt run() {
    while (true) {
      reap_exited();
      const bool all_exited =
          std::all_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.exited; });
      const bool pipes_open = std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) {
        return r.out_fd >= 0 || r.err_fd >= 0;
      });
      if (all_exited && !pipes_open) break;
      // The rendezvous: a heartbeat on every pass (it keeps beating while ranks stop), and a
      // request from another node to stop every rank.
      if (poll_) {
        std::string why = poll_();
        if (!why.empty() && !all_exited && attempt_.stopped_for.empty() && !attempt_.interrupted &&
            attempt_.failure.empty()) {
          attempt_.stopped_for = why;
          stop_all();
        }
      }
      if (kill_at_ && Clock::now() >= *kill_at_) {
        signal_all(ranks_, SIGKILL);
        kill_at_ = Clock::now() + std::chrono::hours(24);
      }
      pump(all_exited ? 50 : 200);
      // A rank whose pipes closed but that has not exited yet is reaped on the next pass. Once
      // every rank has exited, a process one of them started outside its process group (setsid)
      // may still hold its output: that is read for the grace period, then no longer waited for.
      if (all_exited && pipes_open) {
        if (!drain_until_) {
          drain_until_ = after_grace();
        } else if (Clock::now() >= *drain_until_) {
          abandon_held_output();
        }
      }
    }
    return attempt_;
  }

 private:
  // When a grace period starting now ends (SIGKILL after SIGTERM, output drained after exit).
  Clock::time_point after_grace() const {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(o_.grace_seconds));
  }

  // SIGTERM to every rank, SIGKILL after the grace period (once).
  void stop_all() {
    if (kill_at_) return;
    signal_all(ranks_, SIGTERM);
    kill_at_ = after_grace();
  }

  // Reaps the ranks that ended; a failure (not after an interruption) is recorded and stops the
  // others.
  void reap_exited() {
    for (auto& r : ranks_) {
      if (r.exited) continue;
      // Seen exited but not yet reaped, the rank's pid cannot be reused: its process group is
      // still its own when whatever the rank started is killed with it.
      siginfo_t info{};
      if (::waitid(P_PID, static_cast<id_t>(r.pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
          info.si_pid != r.pid) {
        continue;
      }
      ::kill(-r.pid, SIGKILL);
      int status = 0;
      if (::waitpid(r.pid, &status, 0) != r.pid) {
        // Not reaped after all: what waitid saw, in waitpid's encoding.
        status = info.si_code == CLD_EXITED ? (info.si_status & 0xff) << 8 : info.si_status & 0x7f;
      }
      watchdog_.forget(r.pid);
      r.exited = true;
      r.status = status;
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (ok || attempt_.interrupted || !attempt_.stopped_for.empty()) continue;
      // What the rank wrote before it ended is in its pipes: read before naming why it failed,
      // and before the others are stopped (their own last lines may never come).
      drain(r);
      record_failure(r, status);
      // A rank that only lost its peers usually exits a moment before the rank that failed (whose
      // sockets closed while it unwound, before it could say why): the others are left a moment
      // to end by themselves, so that the failure named is the cause, not its echo.
      if (failure_priority_ == 1) {
        if (!stop_at_) stop_at_ = Clock::now() + kEchoWait;
      } else {
        stop_all();
      }
    }
    if (stop_at_ && Clock::now() >= *stop_at_) stop_all();
  }

  // Which failure to name: a rank that failed by itself before one that only lost its peers (it
  // may well exit first: its peers' sockets close as soon as the first one unwinds), and either
  // before a rank the launcher stopped.
  void record_failure(const Rank& r, int status) {
    const int priority = WIFEXITED(status) && WEXITSTATUS(status) == kPeerFailureExitCode ? 1
                         : kill_at_ && WIFSIGNALED(status)                                ? 0
                                                                                          : 2;
    if (priority <= failure_priority_) return;
    failure_priority_ = priority;
    // Why, in the words of a rank that ended itself: its last line on stderr (a program's error
    // is its last word; a killed rank's last line is not why it was killed).
    const bool quoted = WIFEXITED(status) && !r.last_error_line.empty();
    attempt_.failure =
        fmt::format("rank {} (local rank {}, pid {}) {}{}", r.global_rank, r.local_rank, r.pid,
                    describe_status(status), quoted ? ": " + r.last_error_line : "");
    attempt_.failed_rank = r.global_rank;
    // Bad input (every rank read the same arguments) keeps its exit code 2.
    attempt_.exit_code = WIFEXITED(status) && WEXITSTATUS(status) == 2 ? 2 : 1;
  }

  // Waits up to `timeout_ms` for the signal pipe or a rank's output, and acts on what came.
  void pump(int timeout_ms) {
    std::vector<pollfd> fds;
    std::vector<std::pair<Rank*, bool>> owners;  // rank, is_stdout
    fds.push_back({signals_.read_fd(), POLLIN, 0});
    owners.emplace_back(nullptr, false);
    for (auto& r : ranks_) {
      if (r.out_fd >= 0) {
        fds.push_back({r.out_fd, POLLIN, 0});
        owners.emplace_back(&r, true);
      }
      if (r.err_fd >= 0) {
        fds.push_back({r.err_fd, POLLIN, 0});
        owners.emplace_back(&r, false);
      }
    }
    ::poll(fds.data(), fds.size(), timeout_ms);
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buffer[65536];
      ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (i == 0) {
        on_signal_bytes(buffer, n);
      } else {
        forward_output(*owners[i].first, owners[i].second, buffer, n);
      }
    }
  }

  // Forwards what `r`'s pipes hold now, without waiting for more (and at most a few pipes' worth:
  // a process the rank started may still be writing to them).
  void drain(Rank& r) {
    for (bool is_out : {true, false}) {
      const int& fd = is_out ? r.out_fd : r.err_fd;
      for (int reads = 0; fd >= 0 && reads < 16; ++reads) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 0) <= 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR))) break;
        char buffer[65536];
        forward_output(r, is_out, buffer, ::read(fd, buffer, sizeof buffer));
      }
    }
  }

  // The first SIGINT or SIGTERM to the launcher goes to every rank, with SIGKILL after the grace.
  void on_signal_bytes(const char* bytes, ssize_t n) {
    for (ssize_t k = 0; k < n; ++k) {
      int sig = static_cast<unsigned char>(bytes[k]);
      if ((sig == SIGINT || sig == SIGTERM) && !attempt_.interrupted) {
        attempt_.interrupted = sig;
        signal_all(ranks_, sig);
        kill_at_ = kill_at_ ? std::min(*kill_at_, after_grace()) : after_grace();
      }
    }
  }

  // What a read of a rank's stdout or stderr gave (`n` bytes; 0 or an error: the pipe's end).
  void forward_output(Rank& r, bool is_out, const char* bytes, ssize_t n) {
    std::string& buf = is_out ? r.out_buffer : r.err_buffer;
    const std::string prefix = fmt::format("[rank{}]: ", r.global_rank);
    const bool show = !is_out || !o_.rank0_only || r.global_rank == 0;
    const int target = is_out ? STDOUT_FILENO : STDERR_FILENO;
    int& fd = is_out ? r.out_fd : r.err_fd;
    std::string ignored;
    std::string& last_line = is_out ? ignored : r.last_error_line;
    if (n > 0) {
      buf.append(bytes, static_cast<size_t>(n));
      emit_lines(buf, target, prefix, show, false, last_line);
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      emit_lines(buf, target, prefix, show, true, last_line);
      ::close(fd);
      fd = -1;
    }
  }

  // Every rank exited, yet some pipe is still held open: closed, with one line each.
  void abandon_held_output() {
    for (auto& r : ranks_) {
      if (r.out_fd < 0 && r.err_fd < 0) continue;
      std::string line = fmt::format(
          "{}: rank {} exited but a process it started still holds its output; not waiting for "
          "it\n",
          o_.name, r.global_rank);
      [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
      for (int* fd : {&r.out_fd, &r.err_fd}) {
        if (*fd >= 0) ::close(*fd), *fd = -1;
      }
    }
  }

  const LaunchOptions& o_;
  const SignalScope& signals_;
  Watchdog& watchdog_;
  const StopPoll& poll_;
  std::vector<Rank> ranks_;
  Attempt attempt_;
  int failure_priority_ = -1;
  std::optional<Clock::time_point> kill_at_;
  std::optional<Clock::time_point> stop_at_;  // when to stop the others after a peer's echo
  std::optional<Clock::time_point> drain_until_;
};

}  // namespace

Attempt run_attempt(const LaunchOptions& o, int world_size, int restart_count,
                    const RankMain& rank_main, const SignalScope& signals, Watchdog& watchdog,
                    const StopPoll& poll) {
  AttemptRun attempt(o, signals, watchdog, poll);
  attempt.start_ranks(world_size, restart_count, rank_main);
  return attempt.run();
}

}  // namespace trainer::dist
