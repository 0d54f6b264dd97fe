// The console's table on its own: a 3-epoch run with log lines between its evaluations prints the
// header once, a row per evaluation as it comes, and nothing of the table again at the end.
#include "trainer/callbacks.h"

#include <cstdio>

#include <gtest/gtest.h>

#include "tests/test_util.h"
#include "trainer/training_args.h"

namespace trainer {
namespace callbacks_test {

using json = nlohmann::ordered_json;

TEST(ConsoleCallback, PrintsTheHeaderOnceAndEachEvaluationsRowAsItComes) {
  testing::TempDir dir;
  std::FILE* out = std::fopen(dir.file("out").c_str(), "w");
  ASSERT_NE(out, nullptr);
  ConsoleCallback console(out, nullptr);
  auto args = TrainingArguments().eval_strategy("epoch");
  TrainerState state;
  TrainerControl control;
  console.on_train_begin(args, state, control);
  for (int epoch = 1; epoch <= 3; ++epoch) {
    state.epoch = epoch;
    state.global_step = 10 * epoch;
    json log = {{"loss", 1.0 / epoch}, {"learning_rate", 1e-3}, {"epoch", 1.0 * epoch}};
    state.log_history.push_back(log);
    console.on_log(args, state, control, log);
    console.on_evaluate(args, state, control,
                        {{"eval_loss", 0.5 / epoch}, {"eval_accuracy", 0.25 * epoch}});
  }
  console.on_log(args, state, control, json{{"train_runtime", 1.5}, {"epoch", 3.0}});
  console.on_train_end(args, state, control);
  std::fclose(out);
  EXPECT_EQ(testing::slurp(dir.file("out")),
            "{'loss': 1.0, 'learning_rate': 0.001, 'epoch': 1.0}\n"
            "Epoch     Training Loss  Validation Loss  Accuracy\n"
            "1         1.000000       0.500000         0.250000\n"
            "{'loss': 0.5, 'learning_rate': 0.001, 'epoch': 2.0}\n"
            "2         0.500000       0.250000         0.500000\n"
            "{'loss': 0.3333333333333333, 'learning_rate': 0.001, 'epoch': 3.0}\n"
            "3         0.333333       0.166667         0.750000\n"
            "{'train_runtime': 1.5, 'epoch': 3.0}\n");
}

// A value wider than its column (SFT's eval_num_tokens) keeps two spaces before the next.
TEST(ConsoleCallback, AWideValuePushesTheNextColumnOn) {
  testing::TempDir dir;
  std::FILE* out = std::fopen(dir.file("out").c_str(), "w");
  ASSERT_NE(out, nullptr);
  ConsoleCallback console(out, nullptr);
  auto args = TrainingArguments().eval_strategy("steps");
  TrainerState state;
  TrainerControl control;
  console.on_train_begin(args, state, control);
  state.global_step = 30;
  console.on_evaluate(
      args, state, control,
      {{"eval_loss", 4.0}, {"eval_num_tokens", 59937.0}, {"eval_perplexity", 75.5}});
  std::fclose(out);
  EXPECT_EQ(testing::slurp(dir.file("out")),
            "Step      Training Loss  Validation Loss  Num Tokens  Perplexity\n"
            "30        No log         4.000000         59937.000000  75.500000\n");
}

}  // namespace callbacks_test
}  // namespace trainer
