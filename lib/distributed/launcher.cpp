// Starts, watches and stops the ranks of one node, with torchrun's environment.
#include "lib/distributed/launcher.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/base/errors.h"
#include "lib/runtime/signals.h"

namespace trainer::dist {
namespace {

using Clock = std::chrono::steady_clock;

int g_signal_pipe[2] = {-1, -1};
int g_watchdog_fd = -1;  // the launcher's end of the watchdog's pipe (closed in the ranks)

// Each signal becomes a byte on the pipe the launcher's loop polls.
void on_signal(int sig) {
  char c = static_cast<char>(sig);
  [[maybe_unused]] ssize_t n = ::write(g_signal_pipe[1], &c, 1);
}

// True when something already listens on (or holds) `port` on this machine.
bool port_is_busy(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool busy =
      ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 && errno == EADDRINUSE;
  ::close(fd);
  return busy;
}

}  // namespace

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(fmt::format("socket failed: {}", std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) != 0) {
    int error = errno;
    ::close(fd);
    throw std::runtime_error(fmt::format("no free port: {}", std::strerror(error)));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

namespace {

// Waits until a TCP connection to host:port succeeds, or the deadline passes.
bool reachable(const std::string& host, int port, double seconds) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  do {
    addrinfo* found = nullptr;
    if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) == 0) {
      for (addrinfo* a = found; a; a = a->ai_next) {
        int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0) continue;
        bool ok = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0;
        ::close(fd);
        if (ok) {
          ::freeaddrinfo(found);
          return true;
        }
      }
      ::freeaddrinfo(found);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  } while (Clock::now() < deadline);
  return false;
}

// An executable regular file (a directory has the x bit too, but exec fails on it).
bool executable_file(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

bool program_exists(const std::string& program) {
  if (program.find('/') != std::string::npos) return executable_file(program);
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    if (executable_file((dir.empty() ? "." : dir) + "/" + program)) return true;
    start = end + 1;
  }
  return false;
}

struct Rank {
  int global_rank = 0;
  int local_rank = 0;
  pid_t pid = -1;
  int out_fd = -1;
  int err_fd = -1;
  std::string out_buffer, err_buffer;
  bool exited = false;
  int status = 0;
};

std::string describe_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return fmt::format("was killed by signal {} ({})", sig, runtime::signal_name(sig));
  }
  return "ended";
}

// Writes complete lines of `buffer` to `fd` with `prefix`; the rest stays for later (or all of it
// at `flush`).
void emit_lines(std::string& buffer, int fd, const std::string& prefix, bool show, bool flush) {
  size_t start = 0;
  while (true) {
    size_t nl = buffer.find('\n', start);
    if (nl == std::string::npos) break;
    if (show) {
      std::string line = prefix + buffer.substr(start, nl - start + 1);
      [[maybe_unused]] ssize_t n = ::write(fd, line.data(), line.size());
    }
    start = nl + 1;
  }
  buffer.erase(0, start);
  if (flush && !buffer.empty()) {
    if (show) {
      std::string line = prefix + buffer + "\n";
      [[maybe_unused]] ssize_t n = ::write(fd, line.data(), line.size());
    }
    buffer.clear();
  }
}

// The launcher's signal handling for its lifetime: SIGINT and SIGTERM are forwarded to the ranks,
// SIGCHLD wakes the loop; the previous handlers come back when it ends.
class SignalScope {
 public:
  SignalScope() {
    if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
      throw std::runtime_error("launch: pipe failed");
    struct sigaction action {};
    action.sa_handler = on_signal;
    ::sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &action, &previous_[i]);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    ::sigemptyset(&ignore.sa_mask);
    ::sigaction(SIGPIPE, &ignore, &previous_pipe_);
  }
  ~SignalScope() {
    for (size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &previous_[i], nullptr);
    ::sigaction(SIGPIPE, &previous_pipe_, nullptr);
    ::close(g_signal_pipe[0]);
    ::close(g_signal_pipe[1]);
    g_signal_pipe[0] = g_signal_pipe[1] = -1;
  }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

  // Blocks the launcher's signals, returning the mask to set back (in the launcher right after
  // fork; in a rank once restore_in_child and its own stdout and stderr are in place). Before
  // that, a rank would run the launcher's handler, and the SIGTERM that stops a rank just
  // started would reach the launcher's pipe as the launcher's own interruption.
  sigset_t block() const {
    sigset_t blocked, previous;
    ::sigemptyset(&blocked);
    for (int sig : kSignals) ::sigaddset(&blocked, sig);
    ::sigprocmask(SIG_BLOCK, &blocked, &previous);
    return previous;
  }

  // In a forked rank: the handlers the launcher's caller had, and none of the launcher's fds.
  // An ignored SIGINT, SIGTERM or SIGCHLD (a shell's background job has SIGINT ignored) comes
  // back as the default: the launcher's forwarded signals must reach the rank, and a rank must
  // be able to wait for its own children; exec keeps ignored signals ignored. A rank that will
  // exec (`for_exec`) gets the defaults, as exec would leave a handled signal: one that arrives
  // before exec then ends it quietly, not through the handler of the launcher's caller.
  void restore_in_child(bool for_exec) const {
    for (size_t i = 0; i < kSignals.size(); ++i) {
      struct sigaction action = previous_[i];
      if (action.sa_handler == SIG_IGN || for_exec) action.sa_handler = SIG_DFL;
      ::sigaction(kSignals[i], &action, nullptr);
    }
    ::sigaction(SIGPIPE, &previous_pipe_, nullptr);
    ::close(g_signal_pipe[0]);
    ::close(g_signal_pipe[1]);
    if (g_watchdog_fd >= 0) ::close(g_watchdog_fd);
  }

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
  Watchdog() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("launch: pipe failed");
    pid_ = ::fork();
    if (pid_ < 0) {
      ::close(fds[0]);
      ::close(fds[1]);
      throw std::runtime_error(fmt::format("launch: fork failed: {}", std::strerror(errno)));
    }
    if (pid_ == 0) watch_over(fds[0], fds[1]);
    ::close(fds[0]);
    g_watchdog_fd = fds[1];
  }
  ~Watchdog() {
    int32_t done = 0;
    [[maybe_unused]] ssize_t n = ::write(g_watchdog_fd, &done, sizeof done);
    ::close(g_watchdog_fd);
    g_watchdog_fd = -1;
    ::waitpid(pid_, nullptr, 0);
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void watch(pid_t group) { send(group); }
  // The rank that leads `group` was reaped, and its group killed.
  void forget(pid_t group) { send(-group); }

 private:
  [[noreturn]] static void watch_over(int in, int out) {
    ::close(out);
    ::setpgid(0, 0);  // out of the terminal's job: Ctrl-C goes to the launcher, not here
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) ::signal(sig, SIG_IGN);
    // Nothing of the launcher's stays open here: a pipe reader waiting for the launcher's output
    // to end must not wait for this process.
    int null = ::open("/dev/null", O_RDWR);
    for (int fd = 0; fd <= 2; ++fd) ::dup2(null, fd);
    ::dup2(in, 3);
    ::close_range(4, ~0U, 0);
    std::vector<pid_t> groups;
    int32_t pid = 0;
    while (true) {
      ssize_t n = ::read(3, &pid, sizeof pid);
      if (n < 0 && errno == EINTR) continue;
      if (n == sizeof pid && pid == 0) ::_exit(0);  // the launcher ended normally
      if (n == sizeof pid && pid > 0) {
        groups.push_back(pid);
        continue;
      }
      if (n == sizeof pid) {
        groups.erase(std::remove(groups.begin(), groups.end(), -pid), groups.end());
        continue;
      }
      break;  // the launcher is gone
    }
    for (pid_t group : groups) ::kill(-group, SIGKILL);
    ::_exit(0);
  }

  static void send(int32_t message) {
    [[maybe_unused]] ssize_t n = ::write(g_watchdog_fd, &message, sizeof message);
  }

  pid_t pid_ = -1;
};

// torchrun's variables for one rank of the attempt after `restart_count` restarts.
std::vector<std::pair<std::string, std::string>> rank_environment(const LaunchOptions& o,
                                                                  const Rank& rank, int world_size,
                                                                  int restart_count) {
  std::vector<std::pair<std::string, std::string>> env = {
      {"RANK", std::to_string(rank.global_rank)},
      {"LOCAL_RANK", std::to_string(rank.local_rank)},
      {"GROUP_RANK", std::to_string(o.node_rank)},
      {"ROLE_RANK", std::to_string(rank.global_rank)},
      {"WORLD_SIZE", std::to_string(world_size)},
      {"LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node)},
      {"ROLE_WORLD_SIZE", std::to_string(world_size)},
      {"MASTER_ADDR", o.master_addr},
      {"MASTER_PORT", std::to_string(o.master_port)},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(restart_count)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(o.max_restarts)},
      {"TORCHELASTIC_USE_AGENT_STORE", "False"}};
  if (!std::getenv("OMP_NUM_THREADS")) {
    long cores = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
    env.emplace_back("OMP_NUM_THREADS", std::to_string(std::max(1L, cores / o.nproc_per_node)));
  }
  return env;
}

void spawn(const LaunchOptions& o, Rank& rank, int world_size, int restart_count,
           const RankMain& rank_main, const SignalScope& signals, const std::vector<Rank>& ranks) {
  int out[2] = {-1, -1}, err[2] = {-1, -1};
  auto close_pipes = [&] {
    for (int fd : {out[0], out[1], err[0], err[1]}) {
      if (fd >= 0) ::close(fd);
    }
  };
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    int error = errno;
    close_pipes();
    throw std::runtime_error(fmt::format("{}: pipe failed: {}", o.name, std::strerror(error)));
  }
  auto env = rank_environment(o, rank, world_size, restart_count);
  std::fflush(nullptr);  // nothing buffered is written twice, by the parent and by the child
  pid_t parent = ::getpid();
  sigset_t mask = signals.block();
  pid_t pid = ::fork();
  if (pid != 0) ::sigprocmask(SIG_SETMASK, &mask, nullptr);
  if (pid < 0) {
    int error = errno;
    close_pipes();
    throw std::runtime_error(fmt::format("{}: fork failed: {}", o.name, std::strerror(error)));
  }
  if (pid == 0) {
    ::setpgid(0, 0);  // its own process group, so stopping it stops what it started too
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    signals.restore_in_child(!o.command.empty());
    for (const Rank& other : ranks) {
      for (int fd : {other.out_fd, other.err_fd}) {
        if (fd >= 0) ::close(fd);
      }
    }
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    for (int fd : {out[0], out[1], err[0], err[1]}) {
      if (fd > STDERR_FILENO) ::close(fd);  // a launcher started without stdout may have got 1 or 2
    }
    // The parent has no other thread (fork copied only this one), so changing the environment
    // and allocating here are safe.
    for (const auto& [name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);
    std::setvbuf(stdout, nullptr, _IOLBF, 0);    // whole lines reach the launcher as they come
    ::sigprocmask(SIG_SETMASK, &mask, nullptr);  // a SIGTERM sent meanwhile arrives now
    int code = 1;
    try {
      code = rank_main({rank.global_rank, rank.local_rank, world_size});
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "error: an exception that is not a std::exception\n");
    }
    std::fflush(nullptr);
    ::_exit(code);  // never back into the caller's stack, destructors or atexit handlers
  }
  ::setpgid(pid, pid);
  ::close(out[1]);
  ::close(err[1]);
  rank.pid = pid;
  rank.out_fd = out[0];
  rank.err_fd = err[0];
}

void signal_all(std::vector<Rank>& ranks, int sig) {
  for (auto& r : ranks) {
    if (!r.exited && r.pid > 0) ::kill(-r.pid, sig);
  }
}

}  // namespace

void validate_launch(const LaunchOptions& o) {
  if (o.nproc_per_node < 1) {
    throw InputError(
        fmt::format("--nproc-per-node {} is not allowed (must be >= 1)", o.nproc_per_node));
  }
  if (o.nnodes < 1)
    throw InputError(fmt::format("--nnodes {} is not allowed (must be >= 1)", o.nnodes));
  if (o.node_rank < 0 || o.node_rank >= o.nnodes) {
    throw InputError(
        fmt::format("--node-rank {} is not allowed (must be in [0, {}) for --nnodes {})",
                    o.node_rank, o.nnodes, o.nnodes));
  }
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
  if (o.node_rank == 0) {
    if (o.master_port != 0 && port_is_busy(o.master_port)) {
      throw InputError(
          fmt::format("--master-port {} is busy on this machine (another run or program holds it; "
                      "choose a free port)",
                      o.master_port));
    }
  } else {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(o.master_addr.c_str(), nullptr, &hints, &found) != 0) {
      throw InputError(
          fmt::format("--master-addr {} is not a known host name or address", o.master_addr));
    }
    ::freeaddrinfo(found);
    if (!reachable(o.master_addr, o.master_port, o.rdzv_timeout_seconds)) {
      throw InputError(
          fmt::format("--master-addr {}:{} was not reachable within {} s (is node 0 running?)",
                      o.master_addr, o.master_port, o.rdzv_timeout_seconds));
    }
  }
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
  if (!result.message.empty()) {
    std::string line = result.message + "\n";
    [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
  }
  return result.exit_code;
}

namespace {

// How one attempt (every rank of this node started once) ended.
struct Attempt {
  int exit_code = 0;    // 0; 1 when a rank failed; 2 when the rank named exited 2 (bad input)
  std::string failure;  // "rank N (local rank L, pid P) exited with code C"; empty on success
  int failed_rank = -1;
  int interrupted = 0;  // SIGINT or SIGTERM to the launcher, forwarded to every rank
};

// Starts this node's ranks (the attempt after `restart_count` restarts), forwards their output,
// stops them all when one fails or the launcher is interrupted, and returns once every rank is
// reaped and its output drained.
Attempt run_attempt(const LaunchOptions& o, int world_size, int restart_count,
                    const RankMain& rank_main, const SignalScope& signals, Watchdog& watchdog) {
  std::vector<Rank> ranks(static_cast<size_t>(o.nproc_per_node));
  for (int i = 0; i < o.nproc_per_node; ++i) {
    ranks[i].local_rank = i;
    ranks[i].global_rank = o.node_rank * o.nproc_per_node + i;
    try {
      spawn(o, ranks[i], world_size, restart_count, rank_main, signals, ranks);
      watchdog.watch(ranks[i].pid);
    } catch (...) {
      for (int j = 0; j < i; ++j) {
        ::kill(-ranks[j].pid, SIGKILL);
        ::waitpid(ranks[j].pid, nullptr, 0);
        watchdog.forget(ranks[j].pid);
        ::close(ranks[j].out_fd);
        ::close(ranks[j].err_fd);
      }
      throw;
    }
  }

  Attempt attempt;
  int failure_priority = -1;
  int& interrupted = attempt.interrupted;
  std::optional<Clock::time_point> kill_at;
  std::optional<Clock::time_point> drain_until;  // see the end of the loop
  // When a grace period starting now ends (SIGKILL after SIGTERM, output drained after exit).
  auto after_grace = [&]() {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(o.grace_seconds));
  };
  auto stop_all = [&]() {
    if (kill_at) return;
    signal_all(ranks, SIGTERM);
    kill_at = after_grace();
  };

  while (true) {
    // Reap ranks that ended.
    for (auto& r : ranks) {
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
      watchdog.forget(r.pid);
      r.exited = true;
      r.status = status;
      bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (ok || interrupted) continue;
      // Which failure to name: a rank that failed by itself before one that only lost its peers
      // (it may well exit first: its peers' sockets close as soon as the first one unwinds),
      // and either before a rank the launcher stopped.
      int priority = WIFEXITED(status) && WEXITSTATUS(status) == kPeerFailureExitCode ? 1
                     : kill_at && WIFSIGNALED(status)                                 ? 0
                                                                                      : 2;
      if (priority > failure_priority) {
        failure_priority = priority;
        attempt.failure = fmt::format("rank {} (local rank {}, pid {}) {}", r.global_rank,
                                      r.local_rank, r.pid, describe_status(status));
        attempt.failed_rank = r.global_rank;
        // Bad input (every rank read the same arguments) keeps its exit code 2.
        attempt.exit_code = WIFEXITED(status) && WEXITSTATUS(status) == 2 ? 2 : 1;
      }
      stop_all();
    }
    bool all_exited =
        std::all_of(ranks.begin(), ranks.end(), [](const Rank& r) { return r.exited; });
    bool pipes_open = std::any_of(ranks.begin(), ranks.end(),
                                  [](const Rank& r) { return r.out_fd >= 0 || r.err_fd >= 0; });
    if (all_exited && !pipes_open) break;
    if (kill_at && Clock::now() >= *kill_at) {
      signal_all(ranks, SIGKILL);
      kill_at = Clock::now() + std::chrono::hours(24);
    }

    std::vector<pollfd> fds;
    std::vector<std::pair<Rank*, bool>> owners;  // rank, is_stdout
    fds.push_back({g_signal_pipe[0], POLLIN, 0});
    owners.emplace_back(nullptr, false);
    for (auto& r : ranks) {
      if (r.out_fd >= 0) {
        fds.push_back({r.out_fd, POLLIN, 0});
        owners.emplace_back(&r, true);
      }
      if (r.err_fd >= 0) {
        fds.push_back({r.err_fd, POLLIN, 0});
        owners.emplace_back(&r, false);
      }
    }
    int timeout_ms = all_exited ? 50 : 200;
    ::poll(fds.data(), fds.size(), timeout_ms);
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buffer[65536];
      ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (i == 0) {
        for (ssize_t k = 0; k < n; ++k) {
          int sig = static_cast<unsigned char>(buffer[k]);
          if ((sig == SIGINT || sig == SIGTERM) && !interrupted) {
            interrupted = sig;
            signal_all(ranks, interrupted);
            kill_at = kill_at ? std::min(*kill_at, after_grace()) : after_grace();
          }
        }
        continue;
      }
      Rank& r = *owners[i].first;
      bool is_out = owners[i].second;
      std::string& buf = is_out ? r.out_buffer : r.err_buffer;
      std::string prefix = fmt::format("[rank{}]: ", r.global_rank);
      bool show = !is_out || !o.rank0_only || r.global_rank == 0;
      int target = is_out ? STDOUT_FILENO : STDERR_FILENO;
      if (n > 0) {
        buf.append(buffer, static_cast<size_t>(n));
        emit_lines(buf, target, prefix, show, false);
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        emit_lines(buf, target, prefix, show, true);
        ::close(fds[i].fd);
        (is_out ? r.out_fd : r.err_fd) = -1;
      }
    }
    // A rank whose pipes closed but that has not exited yet is reaped on the next pass. Once
    // every rank has exited, a process one of them started outside its process group (setsid)
    // may still hold its output: that is read for the grace period, then no longer waited for.
    if (all_exited && pipes_open) {
      if (!drain_until) {
        drain_until = after_grace();
      } else if (Clock::now() >= *drain_until) {
        for (auto& r : ranks) {
          if (r.out_fd < 0 && r.err_fd < 0) continue;
          std::string line = fmt::format(
              "{}: rank {} exited but a process it started still holds its output; "
              "not waiting for it\n",
              o.name, r.global_rank);
          [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
          for (int* fd : {&r.out_fd, &r.err_fd}) {
            if (*fd >= 0) ::close(*fd), *fd = -1;
          }
        }
      }
    }
  }
  return attempt;
}

// The first SIGINT or SIGTERM on the signal pipe that no attempt has acted on (0: none); the
// other signals' bytes (SIGCHLD) are dropped.
int pending_interrupt() {
  int found = 0;
  char buffer[64];
  ssize_t n = 0;
  while ((n = ::read(g_signal_pipe[0], buffer, sizeof buffer)) > 0) {
    for (ssize_t k = 0; k < n; ++k) {
      int sig = static_cast<unsigned char>(buffer[k]);
      if (!found && (sig == SIGINT || sig == SIGTERM)) found = sig;
    }
  }
  return found;
}

// How long a restart waits for the previous attempt's TCPStore port to be free again.
constexpr double kPortWaitSeconds = 10.0;

// Waits until nothing holds `port` on this machine (the next attempt's rank 0 binds it), at most
// `seconds`; returns whether it is free. Returns at once, with `interrupted` set, when SIGINT or
// SIGTERM arrives meanwhile.
bool wait_for_free_port(int port, double seconds, int& interrupted) {
  auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (port_is_busy(port)) {
    if (Clock::now() >= deadline) return false;
    pollfd fd{g_signal_pipe[0], POLLIN, 0};
    ::poll(&fd, 1, 50);
    if ((interrupted = pending_interrupt())) return false;
  }
  return true;
}

}  // namespace

LaunchResult run_ranks(const LaunchOptions& options, const RankMain& rank_main) {
  validate_launch(options);
  const int world_size = options.nnodes * options.nproc_per_node;
  SignalScope signals;
  Watchdog watchdog;  // one for every attempt: it watches each attempt's ranks
  LaunchResult result;
  for (int restarts = 0;; ++restarts) {
    LaunchOptions o = options;
    if (o.master_port == 0) o.master_port = free_port();  // a fresh one for each attempt
    Attempt attempt = run_attempt(o, world_size, restarts, rank_main, signals, watchdog);
    result.exit_code = attempt.exit_code;
    result.failed_rank = attempt.failed_rank;
    result.restarts = restarts;
    int interrupted = attempt.interrupted;
    if (!interrupted && attempt.exit_code == 0) return result;
    // Bad input (exit code 2: every rank read the same arguments) and an interruption end the
    // run: a restart could not help.
    bool restart = !interrupted && attempt.exit_code != 2 && restarts < o.max_restarts;
    bool port_free = true;
    if (restart) interrupted = pending_interrupt();
    if (restart && !interrupted && o.node_rank == 0 && options.master_port != 0)
      port_free = wait_for_free_port(o.master_port, kPortWaitSeconds, interrupted);
    std::string failure = fmt::format("{}: {}", o.name, attempt.failure);
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
    std::string line = fmt::format("{}; restarting every rank (restart {} of {})\n", failure,
                                   restarts + 1, o.max_restarts);
    [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
  }
}

}  // namespace trainer::dist
