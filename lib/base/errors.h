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
class Interrupted : public std::runtime_error {
 public:
  Interrupted(int signal, const std::string& message)
      : std::runtime_error(message), signal_(signal) {}
  int signal() const { return signal_; }

 private:
  int signal_;
};

}  // namespace trainer
