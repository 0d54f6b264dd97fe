// The launcher's processes, with POSIX calls: fork, process groups, pipes and signals.
#include "lib/distributed/launcher_processes.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/runtime/signals.h"

namespace trainer::dist {
namespace {

int g_signal_pipe[2] = {-1, -1};
int g_watchdog_fd = -1;  // the launcher's end of the watchdog's pipe (closed in the ranks)

// Each signal becomes a byte on the pipe the launcher's loop polls.
void on_signal(int sig) {
  char c = static_cast<char>(sig);
  [[maybe_unused]] ssize_t n = ::write(g_signal_pipe[1], &c, 1);
}

// An executable regular file (a directory has the x bit too, but exec fails on it).
bool executable_file(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

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

std::string describe_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return fmt::format("was killed by signal {} ({})", sig, runtime::signal_name(sig));
  }
  return "ended";
}

SignalScope::SignalScope() {
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

SignalScope::~SignalScope() {
  for (size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &previous_[i], nullptr);
  ::sigaction(SIGPIPE, &previous_pipe_, nullptr);
  ::close(g_signal_pipe[0]);
  ::close(g_signal_pipe[1]);
  g_signal_pipe[0] = g_signal_pipe[1] = -1;
}

int SignalScope::read_fd() const { return g_signal_pipe[0]; }

int SignalScope::pending_interrupt() const {
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

sigset_t SignalScope::block() const {
  sigset_t blocked, previous;
  ::sigemptyset(&blocked);
  for (int sig : kSignals) ::sigaddset(&blocked, sig);
  ::sigprocmask(SIG_BLOCK, &blocked, &previous);
  return previous;
}

void SignalScope::restore_in_child(bool for_exec) const {
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

namespace {

// The watchdog's life after the fork: reads the groups to kill until the launcher says "done".
[[noreturn]] void watch_over(int in, int out) {
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

void send_to_watchdog(int32_t message) {
  [[maybe_unused]] ssize_t n = ::write(g_watchdog_fd, &message, sizeof message);
}

}  // namespace

Watchdog::Watchdog() {
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

Watchdog::~Watchdog() {
  send_to_watchdog(0);
  ::close(g_watchdog_fd);
  g_watchdog_fd = -1;
  ::waitpid(pid_, nullptr, 0);
}

void Watchdog::watch(pid_t group) { send_to_watchdog(group); }

void Watchdog::forget(pid_t group) { send_to_watchdog(-group); }

namespace {

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
  if (o.elastic_world_size > 0) {
    env.emplace_back("TRAINER_ELASTIC_WORLD_SIZE", std::to_string(o.elastic_world_size));
  }
  if (!std::getenv("OMP_NUM_THREADS")) {
    long cores = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
    env.emplace_back("OMP_NUM_THREADS", std::to_string(std::max(1L, cores / o.nproc_per_node)));
  }
  return env;
}

}  // namespace

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

}  // namespace trainer::dist
