// Error types shared by every layer. InputError is bad input from the user (arguments, files,
// environment): `main` turns it into one line on stderr and exit code 2. Library code throws.
#pragma once

#include <stdexcept>
#include <string>

namespace trainer {

class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The run stopped because of a signal (SIGINT, SIGTERM); main prints what() and exits
// 128 + signal().
// This process stops because another process of the run failed, as it learned through a
// collective (every process agrees whether one could not go on): the program exits with code 3
// (dist::kPeerFailureExitCode), so that a launcher names the process that failed, not its echo.
class PeerFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Interrupted : public std::runtime_error {
 public:
  Interrupted(int signal, const std::string& message)
      : std::runtime_error(message), signal_(signal) {}
  int signal() const { return signal_; }

 private:
  int signal_;
};

// Inside a catch block: the exception being handled said as one line on stderr and its exit code,
// as main reports an error: an Interrupted as "<prefix><what>" and 128 + its signal; an InputError
// as "<prefix>error: <its first line>" and 2; any other exception likewise and 1. (The LibTorch
// side's report_error, lib/accelerate/launch.h, names the distributed failures first.)
int report_error_line(const std::string& prefix);

}  // namespace trainer
