// The examples, one per level of the API, run as a user runs them: accelerate_basic (the
// tutorial's train_ddp_accelerate) alone, under `trainer launch` and through trainer::launch, and
// custom_loss (the tutorial's MyTrainer) on 2 processes through trainer::launch.
#include <regex>

#include <gtest/gtest.h>

#include "lib/data/mnist_defaults.h"
#include "tests/test_util.h"

namespace trainer {
namespace examples_test {

using testing::run;

// The accuracy accelerate_basic printed, checking it printed it once.
double accuracy_of(const testing::ProcessResult& result) {
  std::smatch m;
  std::regex line("Accuracy: ([0-9.]+)\n");
  EXPECT_TRUE(std::regex_search(result.out, m, line)) << result.out << result.err;
  auto begin = std::sregex_iterator(result.out.begin(), result.out.end(), line);
  EXPECT_EQ(std::distance(begin, std::sregex_iterator()), 1) << result.out;
  return m.size() == 2 ? std::stod(m[1]) : 0.0;
}

const std::string kSmall = " --max-train-samples 1280 --max-eval-samples 1000";

TEST(Examples, AccelerateBasicRunsAloneUnderTheLauncherAndThroughTrainerLaunch) {
  auto alone = run("OMP_NUM_THREADS=1 " + testing::kAccelerateBasicBin + kSmall);
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  auto launched =
      run(testing::launch("--nproc-per-node 2 " + testing::kAccelerateBasicBin + kSmall));
  ASSERT_EQ(launched.exit_code, 0) << launched.err;
  auto in_process = run(testing::kAccelerateBasicBin + " --num-processes 2" + kSmall);
  ASSERT_EQ(in_process.exit_code, 0) << in_process.err;
  // 20 steps of 64 (or 10 of 2 x 64): far above chance (10%) on 1,000 test images.
  EXPECT_GT(accuracy_of(alone), 40.0);
  EXPECT_GT(accuracy_of(launched), 40.0);
  // Launched either way, the two processes make the same run.
  EXPECT_EQ(accuracy_of(launched), accuracy_of(in_process));
  EXPECT_NE(in_process.out.find("[rank0]: Throughput: "), std::string::npos);
  EXPECT_NE(in_process.out.find("(2 processes,"), std::string::npos) << in_process.out;
}

TEST(Examples, CustomLossTrainsOnTwoProcessesThroughTrainerLaunch) {
  testing::TempDir dir;
  auto result =
      run(testing::kCustomLossBin + " " + data::kFashionMnistDir + " 1280 2 " + dir.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("[rank0]:   Total train batch size (w. parallel, distributed & "
                            "accumulation) = 128\n[rank0]:   Gradient Accumulation steps = 1\n"
                            "[rank0]:   Total optimization steps = 10\n"),
            std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("[rank0]: Epoch     Training Loss  Validation Loss  Accuracy\n"),
            std::string::npos)
      << result.out;
  EXPECT_EQ(result.out.find("[rank1]"), std::string::npos) << result.out;
  EXPECT_NE(testing::slurp(dir.file("trainer_state.json")).find("\"global_step\": 10"),
            std::string::npos);
}

TEST(Examples, BadArgumentsAreOneLineAndExitTwo) {
  struct Case {
    std::string command, message;
  };
  const std::vector<Case> cases = {
      {testing::kAccelerateBasicBin + " --num-processes 2x",
       "accelerate_basic: error: --num-processes 2x is not allowed (an integer from 1 to 1024)"},
      {testing::kAccelerateBasicBin + " --max-train-samples 0",
       "accelerate_basic: error: --max-train-samples 0 is not allowed (an integer >= 1, or -1 for "
       "all)"},
      {testing::kAccelerateBasicBin + " extra",
       "accelerate_basic: error: unexpected argument extra (see --help)"},
      {testing::kCustomLossBin + " /nonexistent -3",
       "custom_loss: error: MAX_TRAIN_SAMPLES -3 is not allowed (an integer >= 1, or -1 for all)"},
      {testing::kCustomLossBin + " /nonexistent 10 2.5",
       "custom_loss: error: NUM_PROCESSES 2.5 is not allowed (an integer from 1 to 1024)"},
      {testing::kDdpBasicBin + " --overlap yes",
       "ddp_basic: error: --overlap yes is not allowed (0 or 1)"},
      {testing::kDdpBasicBin + " --shared-memory 2",
       "ddp_basic: error: --shared-memory 2 is not allowed (0 or 1)"},
  };
  for (const auto& c : cases) {
    auto result = run(c.command);
    EXPECT_EQ(result.exit_code, 2) << c.command;
    EXPECT_EQ(result.err, c.message + "\n") << c.command;
  }
}

}  // namespace examples_test
}  // namespace trainer
