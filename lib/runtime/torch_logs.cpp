// c10's log level and warning handler set once per process (see torch_logs.h).
#include "lib/runtime/torch_logs.h"

#include <cstdlib>
#include <mutex>
#include <set>

#include <c10/util/Exception.h>
#include <c10/util/Logging.h>

#include "lib/base/text.h"
#include "lib/base/warn.h"

namespace trainer::runtime {
namespace {

// Warnings about LibTorch's internals that no argument of ours can change, with the reason.
const char* const kSilentWarnings[] = {
    // c10d's Reducer, when autograd laid a parameter's gradient out unlike its bucket's view
    // (a transposed weight's gradient, say): the Reducer copies it into the bucket, which is
    // correct, only not free. Nothing a user sets changes it.
    "Grad strides do not match bucket view strides",
};

class WarningRouter : public c10::WarningHandler {
 public:
  void process(const c10::Warning& warning) override {
    const std::string line = torch_warning_line(warning.msg());
    if (!line.empty()) base::warn("LibTorch: {}", line);
  }
};

}  // namespace

std::string torch_warning_line(const std::string& message) {
  for (const char* silent : kSilentWarnings) {
    if (message.find(silent) != std::string::npos) return "";
  }
  std::string line = base::first_line(message);
  static std::mutex mutex;
  static std::set<std::string> printed;
  std::lock_guard<std::mutex> lock(mutex);
  return printed.insert(line).second ? line : "";
}

void route_torch_logs() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (std::getenv("TORCH_CPP_LOG_LEVEL") != nullptr) {
      c10::initLogging();  // LibTorch's own text, at the level asked for
      return;
    }
    // Above every level c10 logs at but FATAL, which aborts the process after printing.
    FLAGS_caffe2_log_level = c10::GLOG_FATAL;
    static WarningRouter router;
    c10::WarningUtils::set_warning_handler(&router);
  });
}

}  // namespace trainer::runtime
