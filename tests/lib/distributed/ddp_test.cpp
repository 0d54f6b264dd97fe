// DDP with real processes and Gloo: 2 ranks at batch 32 end with the parameters of 1 rank at batch
// 64 (and the same with accumulation under no_sync), identical across ranks after every step;
// failures (a collective one rank never joins, models that differ) end with a clear error.
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lib/distributed/process_group.h"
#include "lib/distributed/shm_all_reduce.h"
#include "lib/io/safetensors.h"
#include "tests/test_util.h"

namespace trainer {
namespace ddp_test {

using testing::run;
using testing::TempDir;

const std::string& kWorker = testing::kWorkerBin;

std::string launch(int nproc, const std::string& worker_args, const std::string& extra = "") {
  return testing::launch("--nproc-per-node " + std::to_string(nproc) + " " + extra + " " + kWorker +
                         " " + worker_args);
}

// Trains with `nproc` ranks and returns rank 0's final parameters.
io::NamedTensors train(TempDir& dir, int nproc, int batch, int accumulation,
                       const std::string& extra = "", std::string* output = nullptr) {
  static int runs = 0;
  std::string out = dir.file("params-" + std::to_string(++runs));
  auto result =
      run("OMP_NUM_THREADS=1 " +
          launch(nproc, "train --steps 20 --batch " + std::to_string(batch) + " --accumulation " +
                            std::to_string(accumulation) + " --out " + out + " " + extra));
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  if (output) *output = result.out;
  return io::load_safetensors(out);
}

void expect_close(const io::NamedTensors& a, const io::NamedTensors& b, double rtol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    double rel =
        (a[i].second - b[i].second).norm().item<double>() / a[i].second.norm().item<double>();
    EXPECT_LT(rel, rtol) << a[i].first;
  }
}

TEST(Ddp, TwoRanksAtBatch32MatchOneRankAtBatch64) {
  TempDir dir;
  auto single = train(dir, 1, 64, 1);
  auto pair = train(dir, 2, 32, 1);
  expect_close(single, pair, 1e-5);
  // The run trained: rank 0's initial weights (seed 100) moved.
  torch::manual_seed(100);
  EXPECT_FALSE(torch::allclose(single[0].second, torch::zeros_like(single[0].second)));
}

TEST(Ddp, AccumulationUnderNoSyncMatchesOneRankAtBatch64) {
  // 2 ranks at batch 32 accumulating 2 batches under no_sync() against 1 rank at batch 64
  // accumulating 2: each accumulated half is the same 64 examples in both runs.
  TempDir dir;
  auto single = train(dir, 1, 64, 2);
  auto pair = train(dir, 2, 32, 2);
  expect_close(single, pair, 1e-5);
}

TEST(Ddp, SharedMemoryGivesGloosSumsOnTwoRanks) {
  // A float32 model, whose buckets go through the shared-memory segment, against the same run
  // with Gloo's all-reduce: on 2 ranks a/2 + b/2 is the same float either way, so every parameter
  // is equal. (On more ranks the order of the additions may differ; the sums themselves are
  // SharedMemoryMeanScalesEachValueThenSumsInRankOrder's.)
  TempDir dir;
  std::string said_shared, said_gloo;
  auto shared = train(dir, 2, 32, 1, "--float32 1", &said_shared);
  auto gloo = train(dir, 2, 32, 1, "--float32 1 --shared-memory 0", &said_gloo);
  EXPECT_NE(said_shared.find("shared memory 1\n"), std::string::npos) << said_shared;
  EXPECT_NE(said_gloo.find("shared memory 0\n"), std::string::npos) << said_gloo;
  ASSERT_EQ(shared.size(), gloo.size());
  for (size_t i = 0; i < shared.size(); ++i) {
    EXPECT_TRUE(torch::equal(shared[i].second, gloo[i].second)) << shared[i].first;
  }
}

// SharedMemoryAllReduce with threads as ranks, over an in-process store.
class Exchange {
 public:
  // `tamper` may change what a read returns (key, value -> value).
  dist::SharedMemoryAllReduce::Exchange make(
      std::function<std::string(const std::string&, const std::string&)> tamper = nullptr) {
    dist::SharedMemoryAllReduce::Exchange exchange;
    exchange.publish = [this](const std::string& key, const std::string& value) {
      std::lock_guard<std::mutex> lock(mutex_);
      values_[key] = value;
      changed_.notify_all();
    };
    exchange.read = [this, tamper](const std::string& key) {
      std::unique_lock<std::mutex> lock(mutex_);
      if (!changed_.wait_for(lock, std::chrono::seconds(60),
                             [&] { return values_.count(key) > 0; })) {
        throw std::runtime_error("no rank published " + key);
      }
      return tamper ? tamper(key, values_[key]) : values_[key];
    };
    return exchange;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
};

// Runs `body(rank, all_reduce)` on `world` threads after each made its SharedMemoryAllReduce.
void on_ranks(int world, std::chrono::milliseconds timeout, Exchange& exchange,
              const std::function<void(int, dist::SharedMemoryAllReduce*)>& body,
              std::function<std::string(const std::string&, const std::string&)> tamper = nullptr) {
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      auto all_reduce =
          dist::SharedMemoryAllReduce::create(rank, world, timeout, exchange.make(tamper));
      body(rank, all_reduce.get());
    });
  }
  for (auto& t : threads) t.join();
}

TEST(Ddp, SharedMemoryMeanScalesEachValueThenSumsInRankOrder) {
  // Three ranks, three calls: more floats than a slot holds (several pieces, a short last one),
  // a few floats (shares of one cache line, some empty) and none.
  const std::vector<size_t> sizes = {2'500'037, 19, 0};
  auto value = [](int rank, size_t i) {
    return static_cast<float>(i % 1013) * 0.37f - static_cast<float>(rank) * 1.3f;
  };
  std::vector<std::vector<std::vector<float>>> results(3);
  Exchange exchange;
  on_ranks(3, std::chrono::seconds(60), exchange, [&](int rank, dist::SharedMemoryAllReduce* s) {
    ASSERT_NE(s, nullptr);
    for (size_t n : sizes) {
      std::vector<float> data(n);
      for (size_t i = 0; i < n; ++i) data[i] = value(rank, i);
      s->mean(data.data(), n);
      results[rank].push_back(std::move(data));
    }
  });
  for (size_t call = 0; call < sizes.size(); ++call) {
    size_t wrong = 0;
    for (size_t i = 0; i < sizes[call]; ++i) {
      const auto third = static_cast<float>(1.0 / 3);
      const float expected = value(0, i) * third + value(1, i) * third + value(2, i) * third;
      for (int rank = 0; rank < 3; ++rank) wrong += results[rank][call][i] != expected;
    }
    EXPECT_EQ(wrong, 0u) << "call " << call;
  }
}

TEST(Ddp, SharedMemoryRankThatNeverArrivesFailsWithinTheTimeout) {
  Exchange exchange;
  std::string error;
  auto start = std::chrono::steady_clock::now();
  on_ranks(2, std::chrono::milliseconds(300), exchange,
           [&](int rank, dist::SharedMemoryAllReduce* s) {
             ASSERT_NE(s, nullptr);
             if (rank == 1) return;  // never calls mean()
             std::vector<float> data(100, 1.0f);
             try {
               s->mean(data.data(), data.size());
             } catch (const dist::DistError& e) {
               error = e.what();
             }
           });
  EXPECT_EQ(error,
            "all_reduce (shared memory) failed on rank 0 of 2 (timeout 0.3 s): rank 1 did not "
            "arrive");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(Ddp, SharedMemoryIsLeftOutWhenARankIsOnAnotherMachine) {
  Exchange exchange;
  std::vector<bool> made(2, true);
  on_ranks(
      2, std::chrono::seconds(60), exchange,
      [&](int rank, dist::SharedMemoryAllReduce* s) { made[rank] = s != nullptr; },
      [](const std::string& key, const std::string& value) {
        return key.find("machine/1") != std::string::npos ? "another/machine" : value;
      });
  EXPECT_FALSE(made[0]);
  EXPECT_FALSE(made[1]);
}

TEST(Ddp, BucketsFollowTheGradientOrderAfterTheFirstStep) {
  // As PyTorch's DDP (checked with torch 2.11's reducer._get_zeros_like_grad_buckets()): one bucket
  // for BasicNet's 1,199,882 gradients in the first step; the second forward regroups them in the
  // order they became ready: a first bucket closed past 1 MiB (fc2, fc1), then conv2 and conv1.
  auto result = run("OMP_NUM_THREADS=1 " +
                    launch(2, "train --steps 3 --batch 8 --print-buckets 1", "--rank0-only"));
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("step 1 buckets 1199882\n"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("step 2 buckets 1199882\n"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("step 3 buckets 1181066 18816\n"), std::string::npos) << result.out;
}

TEST(Ddp, ACollectiveOneRankNeverJoinsFailsWithinTheTimeout) {
  double start = testing::now_seconds();
  auto result = run(launch(2, "skip --timeout-ms 2000", "--grace-period 2"));
  double took = testing::now_seconds() - start;
  EXPECT_NE(result.exit_code, 0);
  EXPECT_LT(took, 20.0);
  EXPECT_NE(
      result.err.find("[rank0]: ddp_worker: error: all_reduce failed on rank 0 of 2 (timeout 2 s)"),
      std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("trainer launch: rank 0 (local rank 0, pid "), std::string::npos)
      << result.err;
}

TEST(Ddp, ModelsThatDifferAcrossRanksNameTheFirstMismatch) {
  auto result = run(launch(2, "mismatch"));
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find(
                "the models differ across ranks: parameter 6 is fc2.weight [10, 128] on rank 0 but "
                "fc2.weight [5, 128] on rank 1"),
            std::string::npos)
      << result.err;
}

TEST(Ddp, TheTutorialsSetupReadsTheEnvironment) {
  auto result = run(launch(2, "env"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find(
                "[rank0]: rank 0 of 2 local 0/2 agent_store 0 rank_sum 1 broadcast 7 gathered 10"),
            std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find(
                "[rank1]: rank 1 of 2 local 1/2 agent_store 0 rank_sum 1 broadcast 7 gathered 10"),
            std::string::npos)
      << result.out;
}

TEST(Ddp, TheTutorialsTrainDdpRunsOnTwoRanks) {
  auto result = run(
      testing::launch("--nproc-per-node 2 " + testing::kDdpBasicBin + " --max-train-samples 1280"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  size_t at = result.out.find("[rank0]: Accuracy: ");
  ASSERT_NE(at, std::string::npos) << result.out;
  // 20 steps of 2 x 64 examples: far above chance (10%) on the 10,000 test images.
  EXPECT_GT(std::stod(result.out.substr(at + 19)), 40.0) << result.out;
  EXPECT_NE(result.out.find("[rank0]: Throughput: "), std::string::npos);
  EXPECT_EQ(result.out.find("[rank1]: Accuracy"), std::string::npos);
}

TEST(Ddp, TorchrunStartsItWithItsAgentStore) {
  const std::string torchrun = testing::torchrun_path();
  if (torchrun.empty()) GTEST_SKIP() << "no Python with torch configured";
  auto result = run(torchrun + " --nproc_per_node 2 --master_port " +
                    std::to_string(testing::free_port()) + " --no-python " + kWorker + " env");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(
      result.out.find("rank 0 of 2 local 0/2 agent_store 1 rank_sum 1 broadcast 7 gathered 10"),
      std::string::npos)
      << result.out;
  EXPECT_NE(
      result.out.find("rank 1 of 2 local 1/2 agent_store 1 rank_sum 1 broadcast 7 gathered 10"),
      std::string::npos)
      << result.out;
}

TEST(Ddp, ABusyMasterPortIsAnInputError) {
  testing::PortHolder holder;
  std::string port = std::to_string(holder.port());
  auto result =
      run("RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port + " " + kWorker + " env");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.err,
            "ddp_worker: error: MASTER_PORT " + port +
                " is busy on this machine (another run holds it; choose a free port)\n");
}

}  // namespace ddp_test
}  // namespace trainer
