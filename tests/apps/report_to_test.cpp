// report_to through the real program: TensorBoard's own reader (EventAccumulator, in the reference
// Python environment) reads back every logged number and the arguments; log_history.jsonl holds
// log_history line for line, also on two processes and after a resume; a run killed with SIGKILL
// leaves only complete lines and records.
#include <filesystem>
#include <map>
#include <random>
#include <regex>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/base/files.h"
#include "lib/io/tensorboard.h"
#include "tests/test_util.h"

namespace trainer {
namespace report_to_test {

using nlohmann::json;
using testing::lines_of;
using testing::run;
using testing::slurp;
using testing::TempDir;

// 160 random training images and 48 test images: a few steps of 16, each one logged, an
// evaluation every 3.
class ReportTo : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir();
    testing::write_mnist_dir(tmp_->file("data"), 160, 48, false);
  }
  static void TearDownTestSuite() { delete tmp_; }

  static std::vector<std::string> train_argv(const std::string& out, const std::string& report_to,
                                             int max_steps = 6) {
    return testing::train_argv(
        tmp_->file("data"), out,
        {"--per_device_train_batch_size", "16", "--max_steps", std::to_string(max_steps),
         "--logging_steps", "1", "--eval_strategy", "steps", "--eval_steps", "3", "--learning_rate",
         "1e-3", "--disable_tqdm", "true", "--report_to", report_to});
  }
  static std::string train_command(const std::string& out, const std::string& report_to,
                                   const std::string& extra = "") {
    return testing::command_line(train_argv(out, report_to)) + extra;
  }
  static TempDir* tmp_;
};
TempDir* ReportTo::tmp_ = nullptr;

std::vector<json> log_history(const std::string& out) {
  json state = json::parse(slurp(out + "/trainer_state.json"));
  return state["log_history"].get<std::vector<json>>();
}

std::vector<json> jsonl_entries(const std::string& path) {
  std::vector<json> entries;
  for (const auto& line : lines_of(slurp(path))) entries.push_back(json::parse(line));
  return entries;
}

// The directories under out/runs.
std::vector<std::string> run_dirs(const std::string& out) {
  std::vector<std::string> dirs;
  for (const auto& entry : std::filesystem::directory_iterator(out + "/runs"))
    dirs.push_back(entry.path().string());
  return dirs;
}

// What TensorBoard's reader finds in `logdir` (tests/reference/scripts/read_tensorboard.py).
json read_tensorboard(const std::string& logdir) {
  auto result = run(std::string(TRAINER_PYTHON) + " " + SOURCE_DIR +
                    "/tests/reference/scripts/read_tensorboard.py " + logdir);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  return result.exit_code == 0 ? json::parse(result.out) : json::object();
}

// Transformers' rewrite_logs, for the expected tags.
std::string tag_of(const std::string& key) {
  if (key.rfind("eval_", 0) == 0) return "eval/" + key.substr(5);
  return "train/" + key;
}

// tag -> [[step, value as float32]] for every number of every entry but its "step".
std::map<std::string, std::vector<std::pair<int64_t, double>>> expected_scalars(
    const std::vector<json>& history) {
  std::map<std::string, std::vector<std::pair<int64_t, double>>> scalars;
  for (const json& entry : history) {
    for (const auto& [key, value] : entry.items()) {
      if (key == "step") continue;
      scalars[tag_of(key)].emplace_back(entry["step"].get<int64_t>(),
                                        static_cast<float>(value.get<double>()));
    }
  }
  return scalars;
}

std::map<std::string, std::vector<std::pair<int64_t, double>>> read_scalars(const json& read) {
  std::map<std::string, std::vector<std::pair<int64_t, double>>> scalars;
  for (const auto& [tag, events] : read["scalars"].items()) {
    for (const json& event : events)
      scalars[tag].emplace_back(event[0].get<int64_t>(), event[1].get<double>());
  }
  return scalars;
}

// Whether TRAINER_PYTHON can import TensorBoard's reader (a GPU machine's Python may lack it).
bool python_has_tensorboard() {
  static const bool has = testing::python_has("tensorboard");
  return has;
}

TEST_F(ReportTo, TensorBoardsReaderReadsBackEveryLoggedNumberAndTheArguments) {
  if (!python_has_tensorboard()) GTEST_SKIP() << "no Python with tensorboard configured";
  const std::string out = tmp_->file("all");
  const double start = io::wall_time_now();
  auto result = run(train_command(out, "all"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const double end = io::wall_time_now();
  // Transformers' default logging_dir: output_dir/runs/<Mon DD_HH-MM-SS>_<host>.
  auto dirs = run_dirs(out);
  ASSERT_EQ(dirs.size(), 1u);
  const std::string name = std::filesystem::path(dirs[0]).filename().string();
  EXPECT_TRUE(std::regex_match(
      name, std::regex("(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[0-3][0-9]_[0-2][0-9]-"
                       "[0-5][0-9]-[0-6][0-9]_" +
                       std::regex_replace(io::host_name(), std::regex("[.^$|()\\[\\]{}*+?\\\\]"),
                                          "\\$&"))))
      << name;

  json read = read_tensorboard(dirs[0]);
  ASSERT_EQ(read["files"].size(), 1u) << read.dump();
  EXPECT_TRUE(std::regex_match(read["files"][0].get<std::string>(),
                               std::regex("events\\.out\\.tfevents\\.[0-9]{10}\\..+\\.[0-9]+\\.0")))
      << read["files"][0];
  EXPECT_EQ(read["file_versions"], json::array({"brain.Event:2"}));

  const std::vector<json> history = log_history(out);
  // 6 training logs, 2 evaluations, the final train metrics.
  ASSERT_EQ(history.size(), 9u);
  auto expected = expected_scalars(history);
  for (const char* tag : {"train/loss", "train/learning_rate", "train/grad_norm", "train/epoch",
                          "eval/loss", "eval/accuracy", "eval/runtime", "train/train_runtime",
                          "train/train_loss", "train/total_flos"}) {
    EXPECT_TRUE(expected.count(tag)) << tag;
  }
  EXPECT_FALSE(expected.count("train/step"));
  // Every number of log_history, at its step, to float32's precision, and nothing else.
  EXPECT_EQ(read_scalars(read), expected);
  for (const auto& [tag, events] : read["scalars"].items()) {
    for (const json& event : events) {
      EXPECT_GE(event[2].get<double>(), start - 1) << tag;
      EXPECT_LE(event[2].get<double>(), end + 1) << tag;
    }
  }
  // The arguments, as training_args.json holds them (json.dumps(indent=2): no final newline).
  std::string args = slurp(out + "/training_args.json");
  args.pop_back();
  EXPECT_EQ(read["texts"], json({{"args/text_summary", {{0, args}}}}));
  // The file-version event, the text, and one record per scalar.
  size_t scalars = 0;
  for (const auto& [tag, events] : expected) scalars += events.size();
  EXPECT_EQ(read["records"][read["files"][0].get<std::string>()], 2 + scalars);

  // report_to all writes the jsonl too: log_history, line for line.
  EXPECT_EQ(jsonl_entries(out + "/log_history.jsonl"), history);
}

TEST_F(ReportTo, JsonlLinesAreLogHistoryAndLoggingDirIsWhereEventsGo) {
  const std::string out = tmp_->file("jsonl");
  auto result =
      run(train_command(out, "jsonl,tensorboard", "--logging_dir " + tmp_->file("jsonl-events")));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string text = slurp(out + "/log_history.jsonl");
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  const std::vector<json> history = log_history(out);
  EXPECT_EQ(jsonl_entries(out + "/log_history.jsonl"), history);
  EXPECT_EQ(lines_of(text).size(), history.size());
  // Each log's line, as the printed log lines show them in order.
  EXPECT_EQ(jsonl_entries(out + "/log_history.jsonl")[0]["step"], 1);
  EXPECT_FALSE(std::filesystem::exists(out + "/runs"));
  ASSERT_EQ(base::list_directory(tmp_->file("jsonl-events")).size(), 1u);
}

TEST_F(ReportTo, AResumedRunsJsonlIsItsWholeLogHistory) {
  const std::string out = tmp_->file("resumed");
  auto first = run(train_command(out, "jsonl", "--save_steps 3"));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  auto resumed = run(train_command(
      out, "jsonl", "--save_steps 3 --resume_from_checkpoint " + out + "/checkpoint-3"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  // Written anew from the checkpoint's history, then one line per log: no repeated steps.
  const std::vector<json> history = log_history(out);
  EXPECT_EQ(history.size(), 9u);
  EXPECT_EQ(jsonl_entries(out + "/log_history.jsonl"), history);
}

TEST_F(ReportTo, OverwritingWithoutJsonlRemovesTheEarlierRunsJsonl) {
  const std::string out = tmp_->file("overwritten");
  ASSERT_EQ(run(train_command(out, "jsonl")).exit_code, 0);
  ASSERT_TRUE(std::filesystem::exists(out + "/log_history.jsonl"));
  auto again = run(train_command(out, "none", "--overwrite_output_dir true"));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_FALSE(std::filesystem::exists(out + "/log_history.jsonl"));
}

TEST_F(ReportTo, OnTwoProcessesOnlyTheMainOneWrites) {
  const std::string out = tmp_->file("two");
  auto result = run("OMP_NUM_THREADS=1 " +
                    testing::launch("--nproc-per-node 2 " + train_command(out, "all")));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  auto dirs = run_dirs(out);
  ASSERT_EQ(dirs.size(), 1u);
  auto files = base::list_directory(dirs[0]);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(jsonl_entries(out + "/log_history.jsonl"), log_history(out));
  if (!python_has_tensorboard())
    GTEST_SKIP() << "no Python with tensorboard: its half is not checked";
  EXPECT_EQ(read_scalars(read_tensorboard(dirs[0])), expected_scalars(log_history(out)));
}

TEST_F(ReportTo, ARunKilledMidWayLeavesCompleteLinesAndRecords) {
  const std::string out = tmp_->file("killed");
  std::string log = out + ".log";
  // Long enough to be killed while it logs.
  int pid = testing::start(train_argv(out, "all", 2000), log, log + ".err");
  ASSERT_GT(pid, 0);
  const std::string jsonl = out + "/log_history.jsonl";
  double deadline = testing::now_seconds() + 60;
  while (lines_of(slurp(jsonl)).size() < 5 && testing::now_seconds() < deadline) ::usleep(1000);
  std::mt19937 random(20261201);
  ::usleep(random() % 300000);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << slurp(log + ".err");

  const std::string text = slurp(jsonl);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n') << "the last line is cut";
  std::vector<json> entries = jsonl_entries(jsonl);
  ASSERT_GE(entries.size(), 5u);
  // Steps 1, 2, 3, ... with an evaluation after every third.
  int64_t step = 0;
  for (const json& entry : entries) {
    ASSERT_TRUE(entry.is_object());
    if (entry.contains("loss")) {
      EXPECT_EQ(entry["step"], ++step);
    }
    if (entry.contains("eval_loss")) {
      EXPECT_EQ(entry["step"].get<int64_t>() % 3, 0);
    }
  }
  if (!python_has_tensorboard())
    GTEST_SKIP() << "no Python with tensorboard: its half is not checked";
  // Every record is whole (the reader checks each CRC); each log the jsonl holds is there, and
  // at most the one after it (the events are written just before the line).
  auto dirs = run_dirs(out);
  ASSERT_EQ(dirs.size(), 1u);
  auto scalars = read_scalars(read_tensorboard(dirs[0]));
  auto expected = expected_scalars(entries);
  for (const auto& [tag, events] : expected) {
    ASSERT_GE(scalars[tag].size(), events.size()) << tag;
    EXPECT_LE(scalars[tag].size(), events.size() + 1) << tag;
    EXPECT_TRUE(std::equal(events.begin(), events.end(), scalars[tag].begin())) << tag;
  }
}

TEST_F(ReportTo, AnUnknownIntegrationIsOneLineNamingTheAllowedOnes) {
  auto result = run(train_command(tmp_->file("unknown"), "wandb"));
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.err,
            "trainer: error: argument report_to: \"wandb\" is not allowed (allowed: none, all, "
            "tensorboard, jsonl)\n");
  EXPECT_FALSE(std::filesystem::exists(tmp_->file("unknown")));
}

}  // namespace report_to_test
}  // namespace trainer
