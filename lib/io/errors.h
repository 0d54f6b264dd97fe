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

}  // namespace trainer
