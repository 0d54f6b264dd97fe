// The Trainer's memory metrics in one process, stage by stage, as Transformers places them:
// init's with the first stage that reports (here an evaluation before any training), none for
// the evaluations inside train(), train's in its metrics and last log, predict's as test_; on
// CUDA, the caching allocator's bytes beside the resident set's.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lib/data/mnist.h"
#include "tests/test_util.h"
#include "tests/torch_test_util.h"
#include "trainer/trainer.h"

namespace trainer {
namespace memory_metrics_test {

std::vector<std::string> memory_keys(const Metrics& metrics) {
  std::vector<std::string> out;
  for (const auto& [key, value] : metrics) {
    if (key.find("_mem_") != std::string::npos) out.push_back(key);
  }
  return out;
}

TrainingArguments measured(const testing::TempDir& dir) {
  return TrainingArguments()
      .output_dir(dir.path())
      .disable_tqdm(true)
      .save_strategy("no")
      .skip_memory_metrics(false)
      .per_device_train_batch_size(16)
      .max_steps(4)
      .eval_strategy("steps")
      .eval_steps(2);
}

TEST(TrainerMemoryMetrics, EachStageOnceInTransformersPlaces) {
  testing::TempDir dir;
  auto data = testing::random_mnist(64, 5);
  Trainer trainer(testing::fresh_tiny_net(32), measured(dir).use_cpu(true), data, data);
  // The first stage reported takes init's metrics: an evaluation before training.
  const Metrics first_eval = trainer.evaluate();
  EXPECT_EQ(memory_keys(first_eval),
            (std::vector<std::string>{"before_init_mem_cpu", "eval_mem_cpu_alloc_delta",
                                      "eval_mem_cpu_peaked_delta", "init_mem_cpu_alloc_delta",
                                      "init_mem_cpu_peaked_delta"}));
  for (const std::string& key : memory_keys(first_eval)) {
    const double value = first_eval.at(key);
    EXPECT_EQ(value, static_cast<double>(static_cast<int64_t>(value))) << key;
  }
  EXPECT_GE(first_eval.at("eval_mem_cpu_peaked_delta"), 0);
  EXPECT_GT(first_eval.at("before_init_mem_cpu"), 0);

  // Training: its own keys (init's went with the evaluation); the evaluations at steps 2 and 4
  // are inside it and report none.
  const TrainOutput output = trainer.train();
  EXPECT_EQ(memory_keys(output.metrics),
            (std::vector<std::string>{"train_mem_cpu_alloc_delta", "train_mem_cpu_peaked_delta"}));
  int evaluations = 0;
  for (const auto& entry : trainer.state().log_history) {
    if (!entry.contains("eval_loss")) continue;
    ++evaluations;
    for (const auto& [key, value] : entry.items()) {
      EXPECT_EQ(key.find("_mem_"), std::string::npos) << key;
    }
  }
  EXPECT_EQ(evaluations, 2);
  EXPECT_TRUE(memory_keys(trainer.last_eval_metrics()).empty());
  EXPECT_EQ(trainer.state().log_history.back()["train_mem_cpu_alloc_delta"],
            static_cast<int64_t>(output.metrics.at("train_mem_cpu_alloc_delta")));

  // predict is the "test" stage, whatever its prefix.
  const PredictionResult predicted = trainer.predict(data, "predict");
  EXPECT_EQ(memory_keys(predicted.metrics),
            (std::vector<std::string>{"test_mem_cpu_alloc_delta", "test_mem_cpu_peaked_delta"}));
}

TEST(TrainerMemoryMetrics, OnCudaTheCachingAllocatorsBytesToo) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine";
  testing::TempDir dir;
  // 784 -> 4096 -> 10: 3,256,330 parameters, 13 MB of float32.
  auto model = testing::fresh_tiny_net(4096);
  int64_t parameter_bytes = 0;
  for (const auto& p : model->parameters()) parameter_bytes += p.numel() * 4;
  auto data = testing::random_mnist(64, 5);
  Trainer trainer(model, measured(dir).eval_strategy("no").data_on_device(false), data);
  ASSERT_TRUE(trainer.device().is_cuda());
  const Metrics metrics = trainer.train().metrics;
  EXPECT_EQ(memory_keys(metrics),
            (std::vector<std::string>{"before_init_mem_cpu", "before_init_mem_gpu",
                                      "init_mem_cpu_alloc_delta", "init_mem_cpu_peaked_delta",
                                      "init_mem_gpu_alloc_delta", "init_mem_gpu_peaked_delta",
                                      "train_mem_cpu_alloc_delta", "train_mem_cpu_peaked_delta",
                                      "train_mem_gpu_alloc_delta", "train_mem_gpu_peaked_delta"}));
  // The construction moved the model to the device; training added at least its gradients and
  // AdamW's two moments there.
  EXPECT_GE(metrics.at("init_mem_gpu_alloc_delta"), parameter_bytes);
  EXPECT_GE(metrics.at("train_mem_gpu_alloc_delta") + metrics.at("train_mem_gpu_peaked_delta"),
            3 * parameter_bytes);
  EXPECT_GE(metrics.at("train_mem_gpu_peaked_delta"), 0);
}

}  // namespace memory_metrics_test
}  // namespace trainer
