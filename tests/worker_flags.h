// The flags of the worker programs the multi-process tests start: `worker MODE --name value ...`.
#pragma once

#include <string>

namespace trainer::testing {

// The value after `name` among argv[2..], or `fallback` when it is not given.
inline std::string flag(int argc, char** argv, const std::string& name,
                        const std::string& fallback) {
  for (int i = 2; i + 1 < argc; ++i) {
    if (argv[i] == name) return argv[i + 1];
  }
  return fallback;
}

}  // namespace trainer::testing
