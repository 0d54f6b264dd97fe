// `trainer train` with the memory arguments: skip_memory_metrics false reports each stage's memory
// where Transformers puts it (the train metrics, the last log, eval's own), in bytes that match
// their definitions.
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

}  // namespace memory_run_test
}  // namespace trainer
