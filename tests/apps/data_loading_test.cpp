// `trainer train` with the data-loading arguments: worker threads train exactly what the main
// thread trains, accelerator_config split_batches on 2 processes is a per-device batch of half
// the size, and train_sampling_strategy changes the order (and so the weights) as it should.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace trainer {
namespace data_loading_test {

using json = nlohmann::ordered_json;
using testing::TempDir;

const std::string kSource = SOURCE_DIR;

// `trainer train` on configs/iris.json (120 rows of 4 features, 3 classes) for two epochs with
// `args`, from the source tree; `launch` starts it under the launcher ("--nproc-per-node 2").
testing::ProcessResult train(const std::string& output_dir, const std::string& args,
                             const std::string& launch = "") {
  const std::string command = testing::kTrainerBin +
                              " train configs/iris.json --disable_tqdm true --num_train_epochs 2 "
                              "--eval_strategy epoch --output_dir " +
                              output_dir + " " + args;
  return testing::run("cd " + kSource + " && OMP_NUM_THREADS=1 " +
                      (launch.empty() ? command : testing::launch(launch + " " + command)));
}

std::string weights(const std::string& dir) { return testing::slurp(dir + "/model.safetensors"); }

// The losses and accuracies of the log history (its runtimes differ from run to run).
json history(const std::string& dir) {
  json out = json::array();
  const json state = json::parse(testing::slurp(dir + "/trainer_state.json"));
  for (const auto& entry : state["log_history"]) {
    json kept;
    for (const char* key : {"loss", "eval_loss", "eval_accuracy", "train_loss", "step"})
      if (entry.contains(key)) kept[key] = entry[key];
    out.push_back(kept);
  }
  return out;
}

TEST(DataLoading, WorkerThreadsTrainWhatTheMainThreadTrains) {
  TempDir dir;
  auto main_thread = train(dir.file("zero"), "--dataloader_num_workers 0");
  ASSERT_EQ(main_thread.exit_code, 0) << main_thread.err;
  auto workers = train(dir.file("two"),
                       "--dataloader_num_workers 2 --dataloader_prefetch_factor 3 "
                       "--dataloader_persistent_workers true --dataloader_multiprocessing_context "
                       "spawn --dataloader_pin_memory true");
  ASSERT_EQ(workers.exit_code, 0) << workers.err;
  ASSERT_FALSE(weights(dir.file("zero")).empty());
  EXPECT_TRUE(weights(dir.file("zero")) == weights(dir.file("two")));
  EXPECT_EQ(history(dir.file("zero")).dump(), history(dir.file("two")).dump());
}

TEST(DataLoading, SamplingStrategyChoosesTheOrder) {
  TempDir dir;
  for (const std::string strategy : {"random", "sequential", "group_by_length"}) {
    auto result = train(dir.file(strategy), "--train_sampling_strategy " + strategy);
    ASSERT_EQ(result.exit_code, 0) << strategy << ": " << result.err;
  }
  EXPECT_FALSE(weights(dir.file("random")) == weights(dir.file("sequential")));
  // Iris's rows all have 4 features: the stable sort by length keeps the permutation, the same
  // torch.randperm as random's.
  EXPECT_TRUE(weights(dir.file("group_by_length")) == weights(dir.file("random")));
}

TEST(DataLoading, SplitBatchesOnTwoProcessesIsAHalfBatchPerDevice) {
  TempDir dir;
  auto split = train(dir.file("split"),
                     "--per_device_train_batch_size 16 --per_device_eval_batch_size 16 "
                     "--accelerator_config '{\"split_batches\": true}'",
                     "--nproc-per-node 2");
  ASSERT_EQ(split.exit_code, 0) << split.err;
  auto half =
      train(dir.file("half"), "--per_device_train_batch_size 8 --per_device_eval_batch_size 8",
            "--nproc-per-node 2");
  ASSERT_EQ(half.exit_code, 0) << half.err;
  auto whole =
      train(dir.file("whole"), "--per_device_train_batch_size 16 --per_device_eval_batch_size 16",
            "--nproc-per-node 2");
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  EXPECT_TRUE(weights(dir.file("split")) == weights(dir.file("half")));
  EXPECT_FALSE(weights(dir.file("split")) == weights(dir.file("whole")));
  EXPECT_EQ(history(dir.file("split")).dump(), history(dir.file("half")).dump());
  // A global batch that 2 processes cannot share is one line, exit code 2.
  auto odd = train(dir.file("odd"),
                   "--per_device_train_batch_size 15 --accelerator_config "
                   "'{\"split_batches\": true}'",
                   "--nproc-per-node 2");
  EXPECT_NE(odd.exit_code, 0);
  EXPECT_NE(odd.err.find("argument per_device_train_batch_size: 15 is not allowed with "
                         "accelerator_config split_batches"),
            std::string::npos)
      << odd.err;
}

TEST(DataLoading, GradientAccumulationKwargsNumStepsIsTheAccumulation) {
  TempDir dir;
  auto kwargs =
      train(dir.file("kwargs"),
            "--accelerator_config '{\"gradient_accumulation_kwargs\": {\"num_steps\": 3}}'");
  ASSERT_EQ(kwargs.exit_code, 0) << kwargs.err;
  auto steps = train(dir.file("steps"), "--gradient_accumulation_steps 3");
  ASSERT_EQ(steps.exit_code, 0) << steps.err;
  EXPECT_TRUE(weights(dir.file("kwargs")) == weights(dir.file("steps")));
}

}  // namespace data_loading_test
}  // namespace trainer
