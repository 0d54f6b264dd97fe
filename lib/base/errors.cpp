// The one line main prints for an error, and its exit code.
#include "lib/base/errors.h"

#include <cstdio>
#include <exception>

#include "lib/base/text.h"

namespace trainer {

int report_error_line(const std::string& prefix) {
  std::string message = "unknown error";
  int status = 1;
  try {
    throw;
  } catch (const Interrupted& e) {
    std::fprintf(stderr, "%s%s\n", prefix.c_str(), e.what());
    std::fflush(stderr);
    return 128 + e.signal();
  } catch (const InputError& e) {
    message = e.what();
    status = 2;
  } catch (const std::exception& e) {
    message = e.what();
  } catch (...) {
  }
  std::fprintf(stderr, "%serror: %s\n", prefix.c_str(), base::first_line(message).c_str());
  std::fflush(stderr);
  return status;
}

}  // namespace trainer
