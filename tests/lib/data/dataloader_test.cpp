// Samplers and the DataLoader: reproducible shuffles that change each epoch, PyTorch's batch
// counts, and the one-gather fast path giving exactly what per-example collation gives.
#include "lib/data/dataloader.h"

#include <algorithm>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/data/mnist.h"
#include "tests/test_util.h"
#include "tests/torch_test_util.h"

namespace trainer::data {
namespace dataloader_test {

std::shared_ptr<MnistDataset> small_dataset(int64_t n) { return testing::random_mnist(n, 3); }

TEST(Sampler, SequentialIsInOrder) {
  EXPECT_EQ(SequentialSampler(4).indices(3), (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(Sampler, RandomIsReproducibleAndReshufflesEachEpoch) {
  RandomSampler a(100, 42), b(100, 42), c(100, 43);
  EXPECT_EQ(a.indices(0), b.indices(0));
  EXPECT_NE(a.indices(0), a.indices(1));
  EXPECT_NE(a.indices(0), c.indices(0));
  std::vector<int64_t> sorted = a.indices(5);
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, SequentialSampler(100).indices(0));
}

TEST(Sampler, RandomMatchesTorchRandpermWithSeedPlusEpoch) {
  // PyTorch: g = torch.Generator(); g.manual_seed(seed + epoch); torch.randperm(n, generator=g)
  auto g = at::make_generator<at::CPUGeneratorImpl>(42 + 2);
  torch::Tensor expected = torch::randperm(10, g, torch::kLong);
  std::vector<int64_t> got = RandomSampler(10, 42).indices(2);
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(got[i], expected[i].item<int64_t>());
}

TEST(DataLoader, BatchCountsFollowDropLast) {
  auto data = small_dataset(130);
  auto sampler = std::make_shared<SequentialSampler>(130);
  DataLoader keep(data, sampler, {64, false});
  DataLoader drop(data, sampler, {64, true});
  EXPECT_EQ(keep.size(), 3);
  EXPECT_EQ(keep.batch(2).size(), 2);
  EXPECT_EQ(keep.num_examples(), 130);
  EXPECT_EQ(drop.size(), 2);
  EXPECT_EQ(drop.num_examples(), 128);
  EXPECT_THROW(drop.batch(2), std::out_of_range);
}

TEST(DataLoader, FastPathEqualsPerExampleCollation) {
  auto data = small_dataset(50);
  auto sampler = std::make_shared<RandomSampler>(50, 7);
  DataLoader fast(data, sampler, {16, false});
  DataLoader slow(data, sampler, {16, false}, default_collate);
  for (int64_t epoch : {0, 1}) {
    fast.set_epoch(epoch);
    slow.set_epoch(epoch);
    for (int64_t i = 0; i < fast.size(); ++i) {
      Batch a = fast.batch(i), b = slow.batch(i);
      EXPECT_TRUE(torch::equal(a.at("x"), b.at("x")));
      EXPECT_TRUE(torch::equal(a.at("labels"), b.at("labels")));
      EXPECT_EQ(a.at("x").sizes(), (std::vector<int64_t>{a.size(), 1, 28, 28}));
    }
  }
}

TEST(DataLoader, UsesTheUsersCollator) {
  auto data = small_dataset(10);
  int calls = 0;
  DataCollator collate = [&](const std::vector<Example>& examples) {
    ++calls;
    return Batch{{"pixels", torch::stack({examples[0].input})}};
  };
  DataLoader loader(data, std::make_shared<SequentialSampler>(10), {4, false}, collate);
  Batch b = loader.batch(1);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(b.contains("pixels"));
  EXPECT_FALSE(b.contains("x"));
  EXPECT_THROW(b.at("x"), std::out_of_range);
}

}  // namespace dataloader_test
}  // namespace trainer::data

namespace trainer::data {
namespace dataloader_test {

TEST(DistributedSampler, PyTorchsPaddingAndStriding) {
  // n = 10, 3 replicas, no shuffle: padded to 12 with 0 and 1; rank r takes r, r + 3, ...
  EXPECT_EQ(DistributedSampler(10, 3, 0, false).indices(0), (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(DistributedSampler(10, 3, 1, false).indices(0), (std::vector<int64_t>{1, 4, 7, 0}));
  EXPECT_EQ(DistributedSampler(10, 3, 2, false).indices(0), (std::vector<int64_t>{2, 5, 8, 1}));
  EXPECT_EQ(DistributedSampler(10, 3, 2, false, 0, true).indices(0),
            (std::vector<int64_t>{2, 5, 8}));
  EXPECT_EQ(DistributedSampler(2, 5, 4, false).indices(0), (std::vector<int64_t>{0}));
  EXPECT_THROW(DistributedSampler(10, 2, 2), InputError);
}

TEST(DistributedSampler, RanksTogetherAreOneProcessAtTheLargerBatch) {
  const int64_t n = 200, b = 16;
  for (int64_t epoch : {0, 3}) {
    auto whole = RandomSampler(n, 42).indices(epoch);
    std::vector<std::vector<int64_t>> shards;
    for (int r = 0; r < 2; ++r)
      shards.push_back(DistributedSampler(n, 2, r, true, 42).indices(epoch));
    for (int64_t k = 0; k * 2 * b < n; ++k) {
      std::vector<int64_t> together,
          expected(whole.begin() + k * 2 * b,
                   whole.begin() + std::min<int64_t>(n, (k + 1) * 2 * b));
      for (const auto& shard : shards) {
        for (int64_t j = k * b; j < std::min<int64_t>((k + 1) * b, shard.size()); ++j)
          together.push_back(shard[j]);
      }
      std::sort(together.begin(), together.end());
      std::sort(expected.begin(), expected.end());
      EXPECT_EQ(together, expected) << "epoch " << epoch << " batch " << k;
    }
  }
}

TEST(DistributedSampler, SetEpochReachesTheLoadersSampler) {
  auto data = small_dataset(64);
  auto sampler = std::make_shared<DistributedSampler>(64, 2, 0, true, 42);
  DataLoader loader(data, sampler, {8, false});
  torch::Tensor first = loader.batch(0).at("labels").clone();
  loader.set_epoch(1);
  torch::Tensor second = loader.batch(0).at("x").clone();
  loader.set_epoch(0);
  EXPECT_TRUE(torch::equal(loader.batch(0).at("labels"), first));
  EXPECT_FALSE(torch::equal(loader.batch(0).at("x"), second));
}

// Transformers' get_length_grouped_indices, step by step: megabatches of the permutation sorted
// longest first, the longest of all at the very front.
TEST(Sampler, LengthGroupedSortsMegabatchesLongestFirst) {
  std::vector<int64_t> lengths;
  for (int64_t i = 0; i < 100; ++i) lengths.push_back((i * 37) % 23 + 1);
  LengthGroupedSampler sampler(lengths, 2, 5);
  const std::vector<int64_t> order = sampler.indices(0);
  // 100 / (4 x 2) = 12 batches of 2 per megabatch: 24 examples.
  const std::vector<int64_t> perm = RandomSampler(100, 5).indices(0);
  std::vector<int64_t> sorted_perm = perm;
  std::sort(sorted_perm.begin(), sorted_perm.end());
  std::vector<int64_t> sorted_order = order;
  std::sort(sorted_order.begin(), sorted_order.end());
  EXPECT_EQ(sorted_order, sorted_perm);
  EXPECT_EQ(lengths[order[0]], 23);
  for (int64_t begin = 0; begin < 100; begin += 24) {
    const int64_t end = std::min<int64_t>(100, begin + 24);
    std::set<int64_t> got(order.begin() + begin, order.begin() + end);
    std::set<int64_t> want(perm.begin() + begin, perm.begin() + end);
    if (begin == 0) continue;  // the front swap may have brought another megabatch's longest in
    EXPECT_EQ(got.size(), want.size());
    for (int64_t k = begin + 1; k < end; ++k) {
      if (k == begin + 0) continue;
      EXPECT_GE(lengths[order[k - 1]] + (k - 1 == begin ? 100 : 0), lengths[order[k]]);
    }
  }
  EXPECT_EQ(sampler.indices(1), LengthGroupedSampler(lengths, 2, 5).indices(1));
  EXPECT_NE(sampler.indices(0), sampler.indices(1));
  EXPECT_EQ(LengthGroupedSampler(lengths, 2, 5, false).indices(3), order);
}

// The same order as Transformers' LengthGroupedSampler with a generator seeded alike, on the
// cases of tests/reference/scripts/length_grouped_reference.py (its committed result).
TEST(LengthGroupedAgainstTransformers, SameIndices) {
  const std::string dir = testing::reference_dir("length_grouped");
  ASSERT_FALSE(dir.empty());
  const auto cases = nlohmann::json::parse(testing::slurp(dir + "/cases.json"));
  ASSERT_EQ(cases.size(), 15u);
  for (const auto& c : cases) {
    const auto lengths = c["lengths"].get<std::vector<int64_t>>();
    SCOPED_TRACE(fmt::format("n {} batch {}", lengths.size(), c["batch_size"].get<int64_t>()));
    LengthGroupedSampler sampler(lengths, c["batch_size"].get<int64_t>(), c["seed"].get<uint64_t>(),
                                 /*per_epoch=*/false);
    EXPECT_EQ(sampler.indices(0), c["indices"].get<std::vector<int64_t>>());
  }
}

// A collator that records the thread it ran on.
struct ThreadLog {
  std::mutex mutex;
  std::set<std::thread::id> threads;
  DataCollator collator() {
    return [this](const std::vector<Example>& examples) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        threads.insert(std::this_thread::get_id());
      }
      return default_collate(examples);
    };
  }
};

TEST(DataLoader, WorkersDeliverTheSameBatchesInOrderFromOtherThreads) {
  auto data = small_dataset(103);
  auto sampler = std::make_shared<RandomSampler>(103, 11);
  DataLoader plain(data, sampler, {8, false}, default_collate);
  ThreadLog log;
  DataLoaderOptions options{8, false};
  options.num_workers = 2;
  options.prefetch_factor = 3;
  DataLoader workers(data, sampler, options, log.collator());
  for (int64_t epoch : {0, 1}) {
    plain.set_epoch(epoch);
    workers.set_epoch(epoch);
    ASSERT_EQ(workers.size(), plain.size());
    for (int64_t i = 0; i < plain.size(); ++i) {
      Batch a = plain.batch(i), b = workers.batch(i);
      EXPECT_TRUE(torch::equal(a.at("x"), b.at("x"))) << "epoch " << epoch << " batch " << i;
      EXPECT_TRUE(torch::equal(a.at("labels"), b.at("labels")));
    }
  }
  // Out of order (a jump back) is still the batch asked for.
  EXPECT_TRUE(torch::equal(plain.batch(3).at("x"), workers.batch(3).at("x")));
  EXPECT_TRUE(torch::equal(plain.batch(0).at("x"), workers.batch(0).at("x")));
  EXPECT_EQ(log.threads.count(std::this_thread::get_id()), 0u);
  EXPECT_GE(log.threads.size(), 1u);
  EXPECT_LE(log.threads.size(), 2u + 2u * 2u);  // two threads per pass at most, three passes
}

TEST(DataLoader, PersistentWorkersAreStartedOnce) {
  auto data = small_dataset(40);
  auto sampler = std::make_shared<SequentialSampler>(40);
  DataLoaderOptions options{8, false};
  options.num_workers = 2;
  for (bool persistent : {false, true}) {
    options.persistent_workers = persistent;
    DataLoader loader(data, sampler, options, default_collate);
    for (int64_t epoch = 0; epoch < 3; ++epoch) {
      loader.set_epoch(epoch);
      for (int64_t i = 0; i < loader.size(); ++i) loader.batch(i);
    }
    EXPECT_EQ(loader.worker_starts(), persistent ? 2 : 6) << "persistent " << persistent;
  }
}

TEST(DataLoader, WorkersPassOnTheCollatorsError) {
  auto data = small_dataset(20);
  DataLoaderOptions options{4, false};
  options.num_workers = 2;
  DataLoader loader(data, std::make_shared<SequentialSampler>(20), options,
                    [](const std::vector<Example>&) -> Batch { throw InputError("bad row"); });
  EXPECT_THROW(loader.batch(0), InputError);
}

}  // namespace dataloader_test
}  // namespace trainer::data
