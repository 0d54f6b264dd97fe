// LibTorch's own text routed through ours (lib/runtime/torch_logs.h): a warning becomes one
// "trainer: warning: LibTorch: ..." line once, its first line only; the Reducer's note on gradient
// strides and c10's log lines (c10d's among them) print nothing.
#include "lib/runtime/torch_logs.h"

#include <sys/wait.h>

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/logging.h>
#include <torch/torch.h>

#include "tests/test_util.h"

namespace trainer {
namespace torch_logs_test {

TEST(TorchLogs, AWarningIsOneLineOnceAndC10LogLinesAreSilent) {
  runtime::route_torch_logs();
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 2; ++i) TORCH_WARN("a warning's first line\nand its second");
  TORCH_WARN_ONCE(
      "Grad strides do not match bucket view strides. This may indicate grad was not "
      "created according to the gradient layout contract");
  LOG(WARNING) << "a c10 log line";
  LOG(ERROR) << "a c10 error line";
  C10D_WARNING("recvValue failed on {}: {}", "SocketImpl(fd=3)",
               "Connection reset by peer\nException raised from recvBytes at Utils.hpp:682 (most "
               "recent call first):\nframe #0: c10::Error::Error(...)");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "trainer: warning: LibTorch: a warning's first line\n");
  EXPECT_EQ(testing::libtorch_text(err), "");
}

TEST(TorchLogs, TheCheckOfTheTestsFindsLibTorchsTextBehindARankPrefix) {
  EXPECT_EQ(testing::libtorch_text("trainer: warning: x\n[rank1]: [W1203 05:01:35.123456 42 "
                                   "TCPStore.cpp:125] [c10d] recvValue failed\n"),
            "[rank1]: [W1203 05:01:35.123456 42 TCPStore.cpp:125] [c10d] recvValue failed");
  EXPECT_EQ(testing::libtorch_text("a\nframe #0: c10::Error::Error(...)\n"),
            "frame #0: c10::Error::Error(...)");
  EXPECT_EQ(testing::libtorch_text("[rank0]: Exception raised from recvBytes at x.hpp:1\n"),
            "[rank0]: Exception raised from recvBytes at x.hpp:1");
  EXPECT_EQ(testing::libtorch_text("[rank0]: trainer: error: [W] is a fine name\n[Warning]\n"), "");
  // What a program of ours prints through run(), or into start()'s files, is checked.
  const std::string c10_line = "echo '[W1203 05:01:35.123456 42 TCPStore.cpp:125] [c10d] x' >&2";
  EXPECT_NONFATAL_FAILURE(testing::run(": " + testing::kTrainerBin + "; " + c10_line),
                          "LibTorch's own text in the output of");
  EXPECT_NONFATAL_FAILURE(
      {
        testing::TempDir dir;
        const int pid = testing::start({"/bin/sh", "-c", c10_line + " # " + testing::kTrainerBin},
                                       dir.file("out"), dir.file("err"));
        ::waitpid(pid, nullptr, 0);
      },
      "LibTorch's own text in the output of");
}

}  // namespace torch_logs_test
}  // namespace trainer
