// The Accelerator and the Trainer on real processes: the collectives on 3 ranks, the Trainer on 2
// ranks at batch 32 ending where 1 rank at batch 64 ends (also with accumulation), evaluation on
// 3 ranks giving exactly the numbers of 1, trainer::launch (a failing rank stops the others and
// is named), and one copy of the data set per machine (PSS of the ranks together).
#include <fstream>
#include <regex>

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "lib/io/safetensors.h"
#include "tests/test_util.h"

namespace trainer {
namespace accelerate_test {

using nlohmann::json;
using testing::run;
using testing::TempDir;

const std::string& kWorker = testing::kAccelerateWorkerBin;

std::string launch(int nproc, const std::string& worker_args, const std::string& extra = "") {
  return "OMP_NUM_THREADS=1 " + testing::launch("--nproc-per-node " + std::to_string(nproc) + " " +
                                                extra + " " + kWorker + " " + worker_args);
}

TEST(Accelerate, CollectivesOnThreeProcesses) {
  auto result = run(launch(3, "collectives", "--rank0-only"));
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  // gather: rank r's r + 1 rows, in rank order.
  EXPECT_NE(result.out.find("[rank0]: rows 0.0 1.0 1.0 2.0 2.0 2.0\n"), std::string::npos)
      << result.out;
  // pad_across_processes: rank 0's one row padded to the 3 rows rank 2 has, after or before.
  EXPECT_NE(result.out.find("[rank0]: padded 0.0 -1.0 -1.0 front -1.0 -1.0 0.0\n"),
            std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("[rank0]: sum 3.0 3.0 mean 1.0\n"), std::string::npos) << result.out;
  // 10 examples at batch 2: 5 batches, 2 rounds on 3 ranks; the repeat of batch 0 that rank 2
  // runs in the second round is dropped, so each label comes once and in order.
  EXPECT_NE(result.out.find("[rank0]: batches 2 labels 0.0 1.0 2.0 3.0 4.0 5.0 6.0 7.0 8.0 9.0\n"),
            std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("[rank0]: count 7.0 7.0 7.0\n"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("[rank0]: mismatch: gather: process 1 has a Float tensor of shape "
                            "[1, 3] but process 0 has a Float tensor of shape [1, 2] (only "
                            "dimension 0 may differ)\n"),
            std::string::npos)
      << result.out;
}

struct TrainedParameters {
  io::NamedTensors parameters;
  json state;
};

TrainedParameters train(TempDir& dir, int nproc, int batch, int accumulation) {
  std::string out = dir.file("run-" + std::to_string(nproc) + "-" + std::to_string(accumulation));
  std::string args = "trainer --batch " + std::to_string(batch) + " --accumulation " +
                     std::to_string(accumulation) + " --out " + out;
  auto result = run(nproc == 1 ? "OMP_NUM_THREADS=1 " + kWorker + " " + args : launch(nproc, args));
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  return {io::load_safetensors(out + "/model.safetensors"),
          json::parse(testing::slurp(out + "/trainer_state.json"))};
}

void expect_same_run(const TrainedParameters& one, const TrainedParameters& two, int steps) {
  ASSERT_EQ(one.parameters.size(), two.parameters.size());
  for (size_t i = 0; i < one.parameters.size(); ++i) {
    const torch::Tensor& a = one.parameters[i].second;
    const torch::Tensor& b = two.parameters[i].second;
    EXPECT_EQ(one.parameters[i].first, two.parameters[i].first);
    EXPECT_LT((a - b).norm().item<double>() / a.norm().item<double>(), 1e-9)
        << one.parameters[i].first;
  }
  const json& h1 = one.state["log_history"];
  const json& h2 = two.state["log_history"];
  ASSERT_EQ(h1.size(), h2.size());
  ASSERT_EQ(h1.size(), static_cast<size_t>(steps / 2 + 1));  // every 2 steps, then the summary
  for (size_t i = 0; i + 1 < h1.size(); ++i) {
    EXPECT_EQ(h1[i]["step"], h2[i]["step"]);
    // The logged loss, a mean over processes: equal to the last bit or two (it is not rounded).
    EXPECT_NEAR(h1[i]["loss"].get<double>(), h2[i]["loss"].get<double>(),
                1e-14 * std::abs(h1[i]["loss"].get<double>()))
        << "log " << i;
    EXPECT_NEAR(h1[i]["grad_norm"].get<double>(), h2[i]["grad_norm"].get<double>(), 1e-9);
  }
  double l1 = h1.back()["train_loss"].get<double>(), l2 = h2.back()["train_loss"].get<double>();
  EXPECT_NEAR(l1, l2, 1e-12 * l1);
  EXPECT_EQ(one.state["global_step"], steps);
  EXPECT_EQ(two.state["global_step"], steps);
}

TEST(AccelerateTrainer, TwoProcessesAtBatch32EndWhereOneAtBatch64Ends) {
  TempDir dir;
  // 512 examples: 8 steps of 64, as 2 x 32.
  expect_same_run(train(dir, 1, 64, 1), train(dir, 2, 32, 1), 8);
}

TEST(AccelerateTrainer, TheSameWithGradientAccumulation) {
  TempDir dir;
  expect_same_run(train(dir, 1, 64, 2), train(dir, 2, 32, 2), 4);
}

std::string evaluate(int nproc, const std::string& args) {
  auto result = run(nproc == 1 ? "OMP_NUM_THREADS=1 " + kWorker + " evaluate " + args
                               : launch(nproc, "evaluate " + args, "--rank0-only"));
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  std::smatch match;
  std::regex line("eval_loss (\\S+) eval_accuracy (\\S+)");
  EXPECT_TRUE(std::regex_search(result.out, match, line)) << result.out;
  EXPECT_EQ(result.out.find("[rank1]"), std::string::npos) << result.out;
  return match.size() == 3 ? match[1].str() + " " + match[2].str() : "";
}

TEST(AccelerateTrainer, EvaluationOnThreeProcessesGivesExactlyTheNumbersOfOne) {
  // 1,001 examples at batch 64: 16 batches, the last of 41, over 6 rounds of 3 processes (two
  // repeats); 100 at batch 64: one full batch, one of 36 and a repeat.
  for (const std::string args : {"--examples 1001 --batch 64", "--examples 100 --batch 64"}) {
    std::string one = evaluate(1, args);
    EXPECT_FALSE(one.empty());
    EXPECT_EQ(evaluate(3, args), one) << args;
  }
}

TEST(AccelerateLaunch, RunsTheFunctionOnEveryProcess) {
  auto result = run("env -u OMP_NUM_THREADS " + kWorker + " launch-ok --processes 2");
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  long cores = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
  std::string threads = std::to_string(std::max(1L, cores / 2));
  EXPECT_NE(result.out.find("[rank0]: process 0 of 2, " + threads + " threads, sum 2\n"),
            std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("[rank1]: process 1 of 2, " + threads + " threads, sum 2\n"),
            std::string::npos)
      << result.out;
}

TEST(AccelerateLaunch, AFailingRankIsNamedAndStopsTheOthers) {
  TempDir dir;
  double start = testing::now_seconds();
  auto result = run(kWorker + " launch-fail --processes 3 --pid-dir " + dir.path());
  double took = testing::now_seconds() - start;
  EXPECT_EQ(result.exit_code, 1) << result.out << result.err;
  EXPECT_LT(took, 20.0);
  EXPECT_NE(result.err.find("[rank1]: error: rank one gives up\n"), std::string::npos)
      << result.err;
  std::regex named(
      "accelerate_worker: error: trainer::launch: rank 1 \\(local rank 1, pid [0-9]+\\) exited "
      "with code 1: error: rank one gives up; stopping the other ranks\n$");
  EXPECT_TRUE(std::regex_search(result.err, named)) << result.err;
  for (int rank = 0; rank < 3; ++rank) {
    std::string pid = testing::slurp(dir.file("rank." + std::to_string(rank)));
    ASSERT_FALSE(pid.empty()) << "rank " << rank << " did not start";
    EXPECT_FALSE(testing::alive(std::stoi(pid))) << "rank " << rank << " is still running";
  }
}

struct Pss {
  int64_t dataset_kib = 0, data_pss_kib = 0, held_kib = 0, mapped = 0;
};

Pss measure_pss(int nproc, bool shared, const std::string& cache) {
  auto result = run(
      launch(nproc, std::string("pss --shared ") + (shared ? "1" : "0") + " --cache-dir " + cache,
             "--rank0-only"));
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  std::smatch m;
  std::regex line("dataset_kib (\\d+) data_pss_kib (\\d+) held_kib (\\d+) mapped (\\d)");
  Pss pss;
  if (std::regex_search(result.out, m, line)) {
    pss = {std::stoll(m[1]), std::stoll(m[2]), std::stoll(m[3]), std::stoll(m[4])};
  } else {
    ADD_FAILURE() << result.out;
  }
  return pss;
}

TEST(AccelerateData, RanksOfOneMachineHoldOneCopyOfTheDataSet) {
  TempDir cache;
  const int n = 3;
  // The cache file made first, by one process: the process that decodes the data set to write it
  // would otherwise hold the freed copy in the measured run (AddressSanitizer keeps freed memory
  // in quarantine instead of returning it).
  EXPECT_EQ(measure_pss(1, true, cache.path()).mapped, 1);
  Pss shared = measure_pss(n, true, cache.path());
  // Fashion-MNIST's training split: 60,000 x 28 x 28 bytes and 60,000 int64 labels.
  EXPECT_EQ(shared.dataset_kib, (60000 * 784 + 60000 * 8) / 1024);
  EXPECT_EQ(shared.mapped, 1);
  // The mapped file's pages, read whole by every rank, count once over the ranks together.
  EXPECT_GT(shared.data_pss_kib, shared.dataset_kib * 9 / 10);
  EXPECT_LT(shared.data_pss_kib, shared.dataset_kib * 11 / 10);
  // Decoded by each rank instead, the ranks hold n copies: what they hold between them (each
  // one's private pages and the file's once) grows by about n - 1 copies (at least 70 % of them:
  // heaps vary from run to run).
  Pss separate = measure_pss(n, false, cache.path());
  EXPECT_EQ(separate.mapped, 0);
  EXPECT_GT(separate.held_kib - shared.held_kib, (n - 1) * shared.dataset_kib * 7 / 10)
      << "shared " << shared.held_kib << " KiB, separate " << separate.held_kib << " KiB";
}

}  // namespace accelerate_test
}  // namespace trainer
