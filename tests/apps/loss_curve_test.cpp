// The per-step loss curve through the real programs: a run at the default logging_steps keeps
// every step's loss, equal to a run that logs every step; a resumed run's curve is whole; two
// processes keep the mean over ranks; NumPy reads the file; the run's last line names its picture.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/report/curve.h"
#include "tests/test_util.h"

namespace trainer {
namespace loss_curve_test {

using testing::run;
using testing::slurp;
using testing::TempDir;

// 938 training images: one epoch at batch size 1 is the demo's 938 steps.
class LossCurve : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir();
    testing::write_mnist_dir(tmp_->file("data"), 938, 32, false);
  }
  static void TearDownTestSuite() { delete tmp_; }

  static std::string train(const std::string& out, const std::string& batch,
                           const std::string& extra) {
    return testing::command_line(
               testing::train_argv(tmp_->file("data"), out,
                                   {"--per_device_train_batch_size", batch, "--disable_tqdm",
                                    "true", "--learning_rate", "1e-3"})) +
           extra;
  }
  static report::StepCurve curve_of(const std::string& out) {
    return report::read_step_curve(out + "/loss_curve.npy");
  }
  static nlohmann::json history_of(const std::string& out) {
    return nlohmann::json::parse(slurp(out + "/trainer_state.json"))["log_history"];
  }

  static TempDir* tmp_;
};
TempDir* LossCurve::tmp_ = nullptr;

TEST_F(LossCurve, EveryStepAtTheDefaultLoggingStepsEqualsARunThatLogsEveryStep) {
  const std::string quiet = tmp_->file("quiet"), every = tmp_->file("every");
  // 501 of the 938 images: one epoch of 501 steps passes the default logging_steps 500 once.
  auto a = run(train(quiet, "1", "--num_train_epochs 1 --max_train_samples 501"));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  // The last line of the run names its picture.
  ASSERT_FALSE(a.out.empty());
  const std::string last = a.out.substr(a.out.rfind('\n', a.out.size() - 2) + 1);
  EXPECT_EQ(last, "Training curves: " + quiet + "/loss.svg\n");
  // log_history has one training loss (step 500); the curve has all 501.
  int logged = 0;
  for (const auto& entry : history_of(quiet)) logged += entry.contains("loss");
  EXPECT_EQ(logged, 1);
  const report::StepCurve curve = curve_of(quiet);
  ASSERT_EQ(curve.size(), 501u);
  for (size_t i = 0; i < curve.size(); ++i) ASSERT_EQ(curve.step[i], static_cast<double>(i + 1));

  auto b = run(train(every, "1", "--num_train_epochs 1 --max_train_samples 501 --logging_steps 1"));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const report::StepCurve each = curve_of(every);
  EXPECT_EQ(each.loss, curve.loss);  // the same steps: the same losses, to the bit
  EXPECT_EQ(each.learning_rate, curve.learning_rate);
  // And what that run logged at every step (rounded to 4 digits as Transformers rounds it).
  int compared = 0;
  for (const auto& entry : history_of(every)) {
    if (!entry.contains("loss")) continue;
    const size_t i = entry["step"].get<size_t>() - 1;
    EXPECT_NEAR(curve.loss[i], entry["loss"].get<double>(), 5.01e-5) << "step " << i + 1;
    EXPECT_DOUBLE_EQ(curve.learning_rate[i], entry["learning_rate"].get<double>());
    EXPECT_DOUBLE_EQ(curve.grad_norm[i], entry["grad_norm"].get<double>());
    ++compared;
  }
  EXPECT_EQ(compared, 501);
  if (testing::python_has("numpy")) {
    auto numpy = run(std::string(TRAINER_PYTHON) +
                     " -c 'import numpy,sys; a = numpy.load(sys.argv[1]); print(a.shape, a[-1, 0], "
                     "a.dtype)' " +
                     quiet + "/loss_curve.npy");
    EXPECT_EQ(numpy.out, "(501, 4) 501.0 float64\n") << numpy.err;
  }
}

TEST_F(LossCurve, AResumedRunsCurveIsWhole) {
  const std::string whole = tmp_->file("whole"), resumed = tmp_->file("resumed");
  const std::string args = "--max_steps 6 --save_steps 3";
  auto a = run(train(whole, "16", args));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(curve_of(whole + "/checkpoint-3").size(), 3u);
  ASSERT_EQ(
      run("mkdir -p " + resumed + " && cp -R " + whole + "/checkpoint-3 " + resumed).exit_code, 0);
  auto b = run(train(resumed, "16", args + " --resume_from_checkpoint true"));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const report::StepCurve expected = curve_of(whole), got = curve_of(resumed);
  ASSERT_EQ(got.size(), 6u);
  EXPECT_EQ(got.step, expected.step);
  EXPECT_EQ(got.loss, expected.loss);
  EXPECT_EQ(got.learning_rate, expected.learning_rate);
}

TEST_F(LossCurve, TwoProcessesKeepTheMeanOverRanks) {
  const std::string every = tmp_->file("two_every"), window = tmp_->file("two_window");
  // 12 steps on two processes into `out`, logging every `logging_steps`.
  auto two_processes = [&](const std::string& out, const std::string& logging_steps) {
    return run(
        "OMP_NUM_THREADS=1 " +
        testing::launch("--nproc-per-node 2 " +
                        testing::command_line(testing::train_argv(tmp_->file("data"), out, {})) +
                        " --max_steps 12 --per_device_train_batch_size 4 --disable_tqdm "
                        "true --logging_steps " +
                        logging_steps));
  };
  auto a = two_processes(every, "1");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const report::StepCurve curve = curve_of(every);
  ASSERT_EQ(curve.size(), 12u);
  // Each logged loss is the mean over both processes; the curve's step is the same mean.
  int compared = 0;
  for (const auto& entry : history_of(every)) {
    if (!entry.contains("loss")) continue;
    const size_t i = entry["step"].get<size_t>() - 1;
    EXPECT_NEAR(curve.loss[i], entry["loss"].get<double>(), 5.01e-5) << "step " << i + 1;
    ++compared;
  }
  EXPECT_EQ(compared, 12);
  // Read back in windows of 5 steps (two collectives and the end), the same values.
  auto b = two_processes(window, "5");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const report::StepCurve windowed = curve_of(window);
  ASSERT_EQ(windowed.size(), 12u);
  for (size_t i = 0; i < 12; ++i) EXPECT_NEAR(windowed.loss[i], curve.loss[i], 1e-12) << i;
}

}  // namespace loss_curve_test
}  // namespace trainer
