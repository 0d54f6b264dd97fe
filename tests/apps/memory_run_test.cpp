// `trainer train` with the memory arguments: skip_memory_metrics false reports each stage's memory
// where Transformers puts it (the train metrics, the last log, eval's own), in bytes that match
// their definitions; auto_find_batch_size halves a batch that runs out of memory (forced with
// TRAINER_MAX_ALLOCATION_BYTES) until one fits, and trains what a run at that size trains.
#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace trainer {
namespace memory_run_test {

using json = nlohmann::ordered_json;
using testing::TempDir;

const std::string kSource = SOURCE_DIR;

json read_json(const std::string& path) { return json::parse(testing::slurp(path)); }

// `trainer train` on configs/iris.json (120 rows of 4 features, 3 classes; it evaluates each
// epoch unless `args` say otherwise) with `args`, from the source tree, with `env` before it.
testing::ProcessResult train(const std::string& output_dir, const std::string& args,
                             const std::string& env = "") {
  return testing::run("cd " + kSource + " && " + env + " " + testing::kTrainerBin +
                      " train configs/iris.json --disable_tqdm true --output_dir " + output_dir +
                      " " + args);
}

std::vector<std::string> keys_with(const json& object, const std::string& part) {
  std::vector<std::string> out;
  for (const auto& [key, value] : object.items()) {
    if (key.find(part) != std::string::npos) out.push_back(key);
  }
  return out;
}

// An MLP of 4 -> 2560 -> 2560 -> 3: 6,576,643 float parameters, 26.3 MB.
constexpr int64_t kLargeParameters = 4 * 2560 + 2560 + 2560 * 2560 + 2560 + 2560 * 3 + 3;
const std::string kLargeModel =
    " --model_config '{\"hidden_sizes\": [2560, 2560]}' --eval_strategy no";

TEST(MemoryMetrics, EachStageReportsItsMemoryWhereTransformersPutsIt) {
  TempDir dir;
  auto result =
      train(dir.path(), kLargeModel + " --max_steps 4 --do_eval true --skip_memory_metrics false");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json train = read_json(dir.file("train_results.json"));
  const std::vector<std::string> train_keys = {
      "init_mem_cpu_alloc_delta", "init_mem_cpu_peaked_delta", "train_mem_cpu_alloc_delta",
      "train_mem_cpu_peaked_delta", "before_init_mem_cpu"};
  // Bytes as whole numbers; no GPU keys on the CPU.
  for (const std::string& key : train_keys) {
    ASSERT_TRUE(train.contains(key)) << key;
    EXPECT_TRUE(train[key].is_number_integer()) << key << " = " << train[key];
  }
  EXPECT_EQ(keys_with(train, "_mem_"),
            (std::vector<std::string>{"before_init_mem_cpu", "init_mem_cpu_alloc_delta",
                                      "init_mem_cpu_peaked_delta", "train_mem_cpu_alloc_delta",
                                      "train_mem_cpu_peaked_delta"}));
  auto bytes = [&](const std::string& key) { return train[key].get<int64_t>(); };
  // peaked is a peak above the end: never negative. Training's alloc + peaked (its peak above its
  // start) holds at least the gradients and AdamW's two moments, as many bytes as the parameters
  // and the moments the brief names (3 x 26.3 MB); the model itself came before the Trainer.
  const int64_t parameter_bytes = 4 * kLargeParameters;
  EXPECT_GE(bytes("init_mem_cpu_peaked_delta"), 0);
  EXPECT_GE(bytes("train_mem_cpu_peaked_delta"), 0);
  EXPECT_GE(bytes("train_mem_cpu_alloc_delta") + bytes("train_mem_cpu_peaked_delta"),
            3 * parameter_bytes);
  EXPECT_GE(bytes("before_init_mem_cpu"), parameter_bytes);
  // The Trainer's construction on the CPU moves nothing: far less than the model.
  EXPECT_LT(bytes("init_mem_cpu_alloc_delta") + bytes("init_mem_cpu_peaked_delta"),
            parameter_bytes / 4);

  // The last log (trainer_state.json) holds them too, after train_loss and before epoch.
  const json last = read_json(dir.file("trainer_state.json"))["log_history"].back();
  std::vector<std::string> order;
  for (const auto& [key, value] : last.items()) order.push_back(key);
  EXPECT_EQ(order, (std::vector<std::string>{
                       "train_runtime", "train_samples_per_second", "train_steps_per_second",
                       "total_flos", "train_loss", "init_mem_cpu_alloc_delta",
                       "init_mem_cpu_peaked_delta", "train_mem_cpu_alloc_delta",
                       "train_mem_cpu_peaked_delta", "before_init_mem_cpu", "epoch", "step"}));
  for (const std::string& key : train_keys) EXPECT_EQ(last[key], train[key]) << key;

  // The evaluation after training: its own stage, without init's (reported with train).
  const json eval = read_json(dir.file("eval_results.json"));
  EXPECT_EQ(keys_with(eval, "_mem_"),
            (std::vector<std::string>{"eval_mem_cpu_alloc_delta", "eval_mem_cpu_peaked_delta"}));
  EXPECT_TRUE(eval["eval_mem_cpu_alloc_delta"].is_number_integer());
  EXPECT_GE(eval["eval_mem_cpu_peaked_delta"].get<int64_t>(), 0);
  // An evaluation of 30 rows in batches of 64 through the model: well below its 26 MB.
  EXPECT_LT(eval["eval_mem_cpu_alloc_delta"].get<int64_t>() +
                eval["eval_mem_cpu_peaked_delta"].get<int64_t>(),
            parameter_bytes / 4);
  const json all = read_json(dir.file("all_results.json"));
  for (const std::string& key : train_keys) EXPECT_EQ(all[key], train[key]) << key;
  EXPECT_EQ(all["eval_mem_cpu_alloc_delta"], eval["eval_mem_cpu_alloc_delta"]);

  // Printed as Transformers' log_metrics prints them: whole MB (bytes >> 20), keys sorted.
  for (const std::string& key : train_keys) {
    const std::regex line("\n  " + key + " += +" + std::to_string(bytes(key) >> 20) + "MB\n");
    EXPECT_TRUE(std::regex_search(result.out, line)) << key << "\n" << result.out;
  }
  const size_t begin = result.out.find("***** train metrics *****");
  const std::string block =
      result.out.substr(begin, result.out.find("***** eval metrics *****") - begin);
  const std::vector<std::string> printed = testing::matches(block, "\n  ([a-z_]+) +=");
  EXPECT_EQ(printed.size(), 12u) << block;
  EXPECT_TRUE(std::is_sorted(printed.begin(), printed.end())) << block;
}

TEST(MemoryMetrics, NoneByDefault) {
  TempDir dir;
  auto result = train(dir.path(), "--max_steps 2 --eval_strategy no --do_eval true");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  for (const char* file : {"train_results.json", "eval_results.json", "all_results.json"}) {
    const json results = read_json(dir.file(file));
    EXPECT_TRUE(keys_with(results, "_mem_").empty()) << file;
    EXPECT_FALSE(results.contains("before_init_mem_cpu")) << file;
  }
  EXPECT_EQ(testing::slurp(dir.file("trainer_state.json")).find("_mem_"), std::string::npos);
  EXPECT_EQ(result.out.find("_mem_"), std::string::npos);
}

// An MLP of 4 -> 4096 -> 3: its largest tensors (weights, gradients, moments) are 64 KiB, its
// hidden activations 16 KiB per example. Above 384 KiB, batches of 32 and 64 do not fit; 16 does.
// With warmup, a schedule made again over the kept optimizer must start from the first one's
// rates, not the 0 that warmup's step 0 left in the optimizer.
const std::string kWideModel =
    " --model_config '{\"hidden_sizes\": [4096]}' --max_steps 6 --warmup_steps 2";
const std::string kNoEval = " --eval_strategy no";
const std::string kLimit = "TRAINER_MAX_ALLOCATION_BYTES=393216";

std::vector<std::string> warnings(const std::string& err) {
  return testing::matches(err, "trainer: warning: ([^\n]*)");
}

TEST(AutoFindBatchSize, HalvesTheBatchUntilItFitsAndTrainsAsThatBatchWould) {
  TempDir found, plain;
  auto result =
      train(found.path(),
            kWideModel + kNoEval + " --per_device_train_batch_size 64 --auto_find_batch_size true",
            kLimit);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::vector<std::string> said = warnings(result.err);
  ASSERT_EQ(said.size(), 2u) << result.err;
  EXPECT_EQ(said[0].rfind("auto_find_batch_size: a training batch of 64 ran out of memory "
                          "(DefaultCPUAllocator: can't allocate memory: you tried to allocate "
                          "1048576 bytes.",
                          0),
            0u)
      << said[0];
  EXPECT_NE(said[0].find("); starting the training loop again with per_device_train_batch_size 32"),
            std::string::npos)
      << said[0];
  EXPECT_EQ(said[1].rfind("auto_find_batch_size: a training batch of 32 ran out of memory", 0), 0u);
  EXPECT_NE(said[1].find("per_device_train_batch_size 16"), std::string::npos) << said[1];
  // Each attempt prints its banner; the one that trained says 16.
  const std::vector<std::string> banners =
      testing::matches(result.out, "Instantaneous batch size per device = ([0-9]+)");
  EXPECT_EQ(banners, (std::vector<std::string>{"64", "32", "16"}));
  EXPECT_EQ(testing::matches(result.out, "Total train batch size [^=]*= ([0-9]+)").back(), "16");
  EXPECT_EQ(read_json(found.file("trainer_state.json"))["train_batch_size"], 16);
  EXPECT_EQ(read_json(found.file("trainer_state.json"))["global_step"], 6);
  // The arguments stay as given (Transformers keeps its TrainingArguments too).
  EXPECT_EQ(read_json(found.file("training_args.json"))["per_device_train_batch_size"], 64);

  // The failed attempts ran out of memory in their first forward, before any update: the model
  // is the one a run at 16 from the start trains (same seed, same batches), to the bit.
  auto reference = train(plain.path(), kWideModel + kNoEval + " --per_device_train_batch_size 16");
  ASSERT_EQ(reference.exit_code, 0) << reference.err;
  const std::string weights = testing::slurp(found.file("model.safetensors"));
  EXPECT_GT(weights.size(), 4u * 32771);
  EXPECT_TRUE(weights == testing::slurp(plain.file("model.safetensors")));
  EXPECT_EQ(read_json(found.file("train_results.json"))["train_loss"],
            read_json(plain.file("train_results.json"))["train_loss"]);
}

TEST(AutoFindBatchSize, AResumedRunStartsFromTheBatchSizeItsCheckpointFound) {
  TempDir dir;
  const std::string checkpoints = " --save_strategy steps --save_steps 2";
  const std::string first = dir.file("first"), resumed = dir.file("resumed");
  auto found = train(first,
                     kWideModel + kNoEval + checkpoints +
                         " --per_device_train_batch_size 64 --auto_find_batch_size true",
                     kLimit);
  ASSERT_EQ(found.exit_code, 0) << found.err;
  // Without the limit 64 would fit now; the checkpoint's 16 is what its run trained with.
  auto result = train(resumed, kWideModel + kNoEval + checkpoints +
                                   " --per_device_train_batch_size 64 --auto_find_batch_size true"
                                   " --resume_from_checkpoint " +
                                   first + "/checkpoint-4");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  EXPECT_EQ(testing::matches(result.out, "Instantaneous batch size per device = ([0-9]+)"),
            std::vector<std::string>{"16"});
  EXPECT_EQ(read_json(resumed + "/trainer_state.json")["train_batch_size"], 16);
  EXPECT_TRUE(testing::slurp(first + "/model.safetensors") ==
              testing::slurp(resumed + "/model.safetensors"));
}

TEST(AutoFindBatchSize, ReachingZeroIsOneErrorLine) {
  TempDir dir;
  auto result =
      train(dir.path(),
            kWideModel + kNoEval + " --per_device_train_batch_size 64 --auto_find_batch_size true",
            "TRAINER_MAX_ALLOCATION_BYTES=1000");
  EXPECT_EQ(result.exit_code, 1) << result.err;
  // 64, 32, 16, 8, 4 and 2 halved, each said; then batch 1 fails too.
  EXPECT_EQ(warnings(result.err).size(), 6u) << result.err;
  const std::vector<std::string> lines = testing::lines_of(result.err);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back().rfind("trainer: error: No executable batch size found, reached zero. "
                               "(auto_find_batch_size: a batch of 1 ran out of memory too: "
                               "DefaultCPUAllocator: can't allocate memory: you tried to allocate ",
                               0),
            0u)
      << lines.back();
  EXPECT_EQ(lines.size(), 7u) << result.err;
}

TEST(AutoFindBatchSize, WithoutItNoAllocationIsRefused) {
  TempDir dir;
  auto result = train(dir.path(), kWideModel + kNoEval + " --per_device_train_batch_size 64",
                      "TRAINER_MAX_ALLOCATION_BYTES=1000");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  EXPECT_EQ(read_json(dir.file("trainer_state.json"))["train_batch_size"], 64);
}

TEST(AutoFindBatchSize, AnEvaluationOutOfMemoryIsNotRetried) {
  TempDir dir;
  // Evaluation batches of 64 (1 MiB of activations) at step 2; training's 16 fit.
  auto result = train(dir.path(),
                      kWideModel +
                          " --per_device_train_batch_size 16 --per_device_eval_batch_size 64"
                          " --eval_strategy steps --eval_steps 2 --auto_find_batch_size true",
                      kLimit);
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_TRUE(warnings(result.err).empty()) << result.err;
  EXPECT_NE(result.err.find("trainer: error: evaluation at step 2 ran out of memory "
                            "(DefaultCPUAllocator: can't allocate memory: "),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("auto_find_batch_size only adjusts the training batch size; reduce "
                            "per_device_eval_batch_size (64) instead\n"),
            std::string::npos)
      << result.err;
}

TEST(AutoFindBatchSize, RefusedBeforeOutputDirIsTouched) {
  TempDir dir;
  const std::string out = dir.file("out");
  auto several = train(out, "--auto_find_batch_size true", "RANK=0 WORLD_SIZE=2");
  EXPECT_EQ(several.exit_code, 2);
  EXPECT_EQ(several.err,
            "trainer: error: argument auto_find_batch_size: true needs a run of one process (this "
            "one has 2): a process that ran out of memory would start again at half its batch "
            "while the others wait for it; set per_device_train_batch_size instead\n");
  auto knob = train(out, "--auto_find_batch_size true", "TRAINER_MAX_ALLOCATION_BYTES=1MB");
  EXPECT_EQ(knob.exit_code, 2);
  EXPECT_EQ(knob.err,
            "trainer: error: environment variable TRAINER_MAX_ALLOCATION_BYTES: '1MB' is not a "
            "byte count (a whole number above 0; for tests)\n");
  EXPECT_NE(testing::run("test -e " + out).exit_code, 0);
}

}  // namespace memory_run_test
}  // namespace trainer
