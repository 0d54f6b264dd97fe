// A reward program kept alive behind two pipes: JSON lines out, numbers back, with a timeout and
// the program's end said in one line.
#include "trl/reward_program.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <ctime>

#include <fmt/format.h>

#include "lib/base/text.h"

extern char** environ;

namespace trainer::trl {
namespace {

std::string trimmed(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

// write() whose closed reader is EPIPE and never SIGPIPE, whatever the host process does with
// the signal (the trainer ignores it; a test binary or a user's program may not): the signal is
// blocked on this thread for the call and, if the write raised it, taken back.
ssize_t write_without_sigpipe(int fd, const char* data, size_t size) {
  sigset_t pipe_only, previous, pending;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  sigemptyset(&pending);
  ::sigpending(&pending);
  const bool already_pending = sigismember(&pending, SIGPIPE) == 1;
  ::pthread_sigmask(SIG_BLOCK, &pipe_only, &previous);
  const ssize_t n = ::write(fd, data, size);
  const int error = errno;
  if (n < 0 && error == EPIPE && !already_pending) {
    const timespec now{0, 0};
    while (::sigtimedwait(&pipe_only, nullptr, &now) < 0 && errno == EINTR) {
    }
  }
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  errno = error;
  return n;
}

}  // namespace

RewardAnswer parse_reward_answer(const std::string& line) {
  const std::string text = trimmed(line);
  RewardAnswer answer;
  if (text == "null" || text == "None") {
    answer.ok = true;
    return answer;
  }
  std::string lower;
  for (char c : text)
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (lower == "nan") {
    answer = {true, std::nan("")};
    return answer;
  }
  if (lower == "inf" || lower == "infinity" || lower == "-inf" || lower == "-infinity") {
    answer = {true, lower[0] == '-' ? -INFINITY : INFINITY};
    return answer;
  }
  if (text.empty()) return answer;
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  // strtod's own words (nan(...), hex floats) are not numbers a JSON line holds.
  if (end != text.c_str() + text.size() || text.find_first_of("xXnN") != std::string::npos)
    return answer;
  answer = {true, value};
  return answer;
}

RewardProgram::RewardProgram(std::string command, double timeout_seconds)
    : command_(std::move(command)), timeout_(timeout_seconds) {
  int to_child[2], from_child[2];
  if (::pipe2(to_child, O_CLOEXEC) != 0) fail(std::strerror(errno), "");
  if (::pipe2(from_child, O_CLOEXEC) != 0) {
    ::close(to_child[0]);
    ::close(to_child[1]);
    fail(std::strerror(errno), "");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, to_child[0], 0);
  posix_spawn_file_actions_adddup2(&actions, from_child[1], 1);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  // The trainer ignores SIGPIPE; the program gets the default back.
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  // A process group of its own: what the shell starts ends with it (a child left running would
  // hold the trainer's stderr open).
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  const char* argv[] = {"/bin/sh", "-c", command_.c_str(), nullptr};
  const int error = ::posix_spawn(&pid_, "/bin/sh", &actions, &attributes,
                                  const_cast<char* const*>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  ::close(to_child[0]);
  ::close(from_child[1]);
  in_ = to_child[1];
  out_ = from_child[0];
  group_ = pid_;
  if (error != 0) {
    pid_ = group_ = -1;
    fail(fmt::format("could not start /bin/sh: {}", std::strerror(error)), "");
  }
  ::fcntl(in_, F_SETFL, ::fcntl(in_, F_GETFL) | O_NONBLOCK);
  ::fcntl(out_, F_SETFL, ::fcntl(out_, F_GETFL) | O_NONBLOCK);
}

RewardProgram::~RewardProgram() {
  if (in_ >= 0) ::close(in_);
  if (out_ >= 0) ::close(out_);
  // A second to end on its own after its stdin closed, then SIGKILL to its whole group (what
  // the shell started and left behind too).
  for (int i = 0; pid_ > 0 && i < 100; ++i) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) pid_ = -1;
    if (pid_ > 0) ::usleep(10000);
  }
  if (group_ > 0) ::kill(-group_, SIGKILL);
  if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
}

std::string RewardProgram::exit_status() {
  if (pid_ <= 0) return "has ended";
  int status = 0;
  // It closed its stdout or stdin: give it a moment to be reaped.
  pid_t done = 0;
  for (int i = 0; i < 200 && done == 0; ++i) {
    done = ::waitpid(pid_, &status, WNOHANG);
    if (done == 0) ::usleep(5000);
  }
  if (done != pid_) return "closed its output";
  pid_ = -1;
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("was killed by signal {}", WTERMSIG(status));
  return "has ended";
}

void RewardProgram::fail(const std::string& what, const std::string& row) {
  throw RewardProgramError(fmt::format("reward program exec:{} {}{}", command_, what,
                                       row.empty() ? "" : fmt::format(" (at {})", row)));
}

std::vector<std::optional<double>> RewardProgram::score(
    const std::vector<nlohmann::ordered_json>& requests, const std::vector<std::string>& rows) {
  std::string outgoing;
  for (const auto& request : requests) {
    outgoing += request.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    outgoing += '\n';
  }
  std::vector<std::optional<double>> answers;
  answers.reserve(requests.size());
  size_t written = 0;
  bool input_closed = false;
  auto row_of = [&](size_t i) { return i < rows.size() ? rows[i] : std::string(); };
  auto last = std::chrono::steady_clock::now();
  while (answers.size() < requests.size()) {
    // Whole lines already read.
    size_t newline;
    while (answers.size() < requests.size() &&
           (newline = pending_.find('\n')) != std::string::npos) {
      const std::string line = pending_.substr(0, newline);
      pending_.erase(0, newline + 1);
      const RewardAnswer answer = parse_reward_answer(line);
      if (!answer.ok) {
        fail(fmt::format("answered '{}' (allowed: one number or null a line)",
                         base::shown_text(line.size() > 80 ? line.substr(0, 80) + "..." : line)),
             row_of(answers.size()));
      }
      answers.push_back(answer.value);
    }
    if (answers.size() == requests.size()) break;
    pollfd fds[2] = {{out_, POLLIN, 0}, {in_, POLLOUT, 0}};
    const nfds_t count = written < outgoing.size() ? 2 : 1;
    const auto waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - last);
    const double left = timeout_ - waited.count();
    if (left <= 0) {
      fail(input_closed ? std::string("closed its input before reading every request")
                        : fmt::format("gave no answer within {} s", base::python_float(timeout_)),
           row_of(answers.size()));
    }
    const int ready = ::poll(fds, count, static_cast<int>(std::min(left, 1.0) * 1000) + 1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) fail(std::strerror(errno), row_of(answers.size()));
    if (count == 2 && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t n =
          write_without_sigpipe(in_, outgoing.data() + written, outgoing.size() - written);
      // Its input is gone: what it still answers is read, and its end (the usual case: it
      // exited) is said when its output closes.
      if (n < 0 && errno == EPIPE) {
        input_closed = true;
        written = outgoing.size();
      }
      if (n > 0) {
        written += static_cast<size_t>(n);
        last = std::chrono::steady_clock::now();
      }
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      char buffer[65536];
      const ssize_t n = ::read(out_, buffer, sizeof buffer);
      if (n == 0) fail(exit_status(), row_of(answers.size()));
      if (n > 0) {
        pending_.append(buffer, static_cast<size_t>(n));
        last = std::chrono::steady_clock::now();
      }
    }
  }
  return answers;
}

}  // namespace trainer::trl
