// Elapsed wall time on the steady clock, for the runtimes and speeds in the metrics.
#pragma once

#include <chrono>

namespace trainer::base {

class Stopwatch {
 public:
  // Seconds since the stopwatch was made.
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace trainer::base
