// LibTorch's errors as one line: c10::Error's message without the C++ backtrace LibTorch
// appends, cut at its first line.
#pragma once

#include <exception>
#include <string>

#include <c10/util/Exception.h>

#include "lib/base/text.h"

namespace trainer::runtime {

inline std::string error_line(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  return base::first_line(c10_error ? c10_error->what_without_backtrace() : e.what());
}

}  // namespace trainer::runtime
