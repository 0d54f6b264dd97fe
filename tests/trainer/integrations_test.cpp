// report_to's callbacks on their own: which ones report_to adds, TensorBoardCallback's tags, steps
// and directory choice (logging_dir, $TENSORBOARD_LOGGING_DIR, Transformers' default), the
// JSONL file's lines, and that only the main process writes.
#include "trainer/integrations.h"

#include <cstdlib>
#include <filesystem>
#include <regex>

#include <gtest/gtest.h>

#include "lib/base/files.h"
#include "lib/io/tensorboard.h"
#include "tests/test_util.h"

namespace trainer {
namespace integrations_test {

using json = nlohmann::ordered_json;
using testing::slurp;
using testing::TempDir;

// The data of each TFRecord of an event file (framing checked in tensorboard_test), with the
// Event's wall_time (the 8 bytes after its first key) zeroed, to compare with encodings.
std::vector<std::string> events_without_time(const std::string& path) {
  const std::string bytes = slurp(path);
  std::vector<std::string> events;
  for (size_t at = 0; at + 12 <= bytes.size();) {
    uint64_t length = 0;
    for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<unsigned char>(bytes[at + i]);
    std::string event = bytes.substr(at + 12, length);
    if (event.size() >= 9 && event[0] == '\x09') event.replace(1, 8, std::string(8, '\0'));
    events.push_back(event);
    at += 16 + length;
  }
  return events;
}

// The only file in `dir`.
std::string only_file(const std::string& dir) {
  auto names = base::list_directory(dir);
  EXPECT_EQ(names.size(), 1u) << dir;
  return names.empty() ? "" : base::join_path(dir, names[0]);
}

json train_log() {
  return {{"loss", 0.5}, {"grad_norm", 2.25}, {"learning_rate", 0.0}, {"epoch", 0.1}, {"step", 7}};
}

TEST(ReportCallbacks, ReportToChoosesTheCallbacks) {
  auto made = [](const std::string& report_to) {
    TrainingArguments args;
    args.set_from_text("report_to", report_to);
    std::vector<std::string> kinds;
    for (const auto& callback : make_report_callbacks(args)) {
      if (dynamic_cast<TensorBoardCallback*>(callback.get())) kinds.push_back("tensorboard");
      if (dynamic_cast<JsonlCallback*>(callback.get())) kinds.push_back("jsonl");
    }
    return kinds;
  };
  using Kinds = std::vector<std::string>;
  EXPECT_EQ(made("none"), Kinds{});
  EXPECT_EQ(made("all"), (Kinds{"tensorboard", "jsonl"}));
  EXPECT_EQ(made("jsonl"), Kinds{"jsonl"});
  EXPECT_EQ(made("tensorboard"), Kinds{"tensorboard"});
}

TEST(TensorBoardCallback, WritesTheArgumentsThenEachLogsNumbersAtTheGlobalStepFileByFile) {
  TempDir dir;
  auto args = TrainingArguments().output_dir(dir.path()).logging_dir(dir.file("tb"));
  TrainerState state;
  TrainerControl control;
  TensorBoardCallback callback;
  callback.on_train_begin(args, state, control);
  EXPECT_EQ(callback.logging_dir(), dir.file("tb"));
  state.global_step = 7;
  callback.on_log(args, state, control, train_log());
  callback.on_log(args, state, control,
                  {{"eval_loss", 0.75},
                   {"eval_accuracy", 0.5},
                   {"test_f1", 1.0},
                   {"note", "hi"},
                   {"epoch", 0.1},
                   {"step", 7}});
  callback.on_train_end(args, state, control);
  std::string text = args.to_json();
  text.pop_back();
  const std::vector<std::string> expected = {io::file_version_event(0, "trainer"),
                                             io::text_event(0, 0, "args", text),
                                             io::scalar_event(0, 7, "train/loss", 0.5f),
                                             io::scalar_event(0, 7, "train/grad_norm", 2.25f),
                                             io::scalar_event(0, 7, "train/learning_rate", 0.0f),
                                             io::scalar_event(0, 7, "train/epoch", 0.1f),
                                             io::scalar_event(0, 7, "eval/loss", 0.75f),
                                             io::scalar_event(0, 7, "eval/accuracy", 0.5f),
                                             io::scalar_event(0, 7, "test/f1", 1.0f),
                                             io::text_event(0, 7, "train/note", "hi"),
                                             io::scalar_event(0, 7, "train/epoch", 0.1f)};
  EXPECT_EQ(events_without_time(only_file(dir.file("tb"))), expected);
  // As Transformers reopens its SummaryWriter: a log after training, in a new file beside it.
  callback.on_log(args, state, control, train_log());
  EXPECT_EQ(base::list_directory(dir.file("tb")).size(), 2u);
}

TEST(TensorBoardCallback, WithoutLoggingDirTheEnvironmentThenTransformersDefaultDecide) {
  TempDir dir;
  TrainerState state;
  TrainerControl control;
  auto args = TrainingArguments().output_dir(dir.file("out"));
  ::setenv("TENSORBOARD_LOGGING_DIR", dir.file("from-env").c_str(), 1);
  TensorBoardCallback from_environment;
  from_environment.on_train_begin(args, state, control);
  ::unsetenv("TENSORBOARD_LOGGING_DIR");
  EXPECT_EQ(from_environment.logging_dir(), dir.file("from-env"));
  EXPECT_FALSE(only_file(dir.file("from-env")).empty());

  TensorBoardCallback by_default;
  by_default.on_train_begin(args, state, control);
  const std::string runs = dir.file("out/runs");
  ASSERT_EQ(base::list_directory(runs).size(), 1u);
  EXPECT_EQ(by_default.logging_dir(), base::join_path(runs, base::list_directory(runs)[0]));
  EXPECT_TRUE(
      std::regex_match(base::list_directory(runs)[0],
                       std::regex("[A-Z][a-z][a-z][0-3][0-9]_[0-2][0-9]-[0-5][0-9]-[0-6][0-9]_.+")))
      << base::list_directory(runs)[0];
}

TEST(ReportCallbacks, OnlyTheMainProcessWrites) {
  TempDir dir;
  auto args = TrainingArguments().output_dir(dir.file("out"));
  args.set_from_text("report_to", "all");
  TrainerState state;
  state.is_world_process_zero = false;
  TrainerControl control;
  for (const auto& callback : make_report_callbacks(args)) {
    callback->on_train_begin(args, state, control);
    callback->on_log(args, state, control, train_log());
    callback->on_train_end(args, state, control);
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("out")));
}

TEST(JsonlCallback, StartsFromTheHistorySoFarThenAppendsALinePerLog) {
  TempDir dir;
  auto args = TrainingArguments().output_dir(dir.path());
  const std::string path = dir.file("log_history.jsonl");
  base::write_file_atomic(path, "an earlier run's lines\n");
  TrainerState state;
  state.log_history = {train_log(), {{"eval_loss", 1.0}, {"epoch", 0.1}, {"step", 7}}};
  TrainerControl control;
  JsonlCallback callback;
  callback.on_train_begin(args, state, control);
  EXPECT_EQ(slurp(path),
            "{\"loss\":0.5,\"grad_norm\":2.25,\"learning_rate\":0.0,\"epoch\":0.1,\"step\":7}\n"
            "{\"eval_loss\":1.0,\"epoch\":0.1,\"step\":7}\n");
  json next = {{"loss", 0.25}, {"epoch", 0.2}, {"step", 8}};
  callback.on_log(args, state, control, next);
  // On the disk at once, before training ends.
  std::vector<json> entries;
  for (const auto& line : testing::lines_of(slurp(path))) entries.push_back(json::parse(line));
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[2], next);
  callback.on_train_end(args, state, control);
  // A log after training (an evaluation) appends to the same file.
  callback.on_log(args, state, control, {{"eval_loss", 0.5}, {"epoch", 0.2}, {"step", 8}});
  EXPECT_EQ(slurp(path).substr(slurp(path).rfind('{')),
            "{\"eval_loss\":0.5,\"epoch\":0.2,\"step\":8}\n");
}

}  // namespace integrations_test
}  // namespace trainer
