// Samplers and the DataLoader: reproducible shuffles that change each epoch, PyTorch's batch
// counts, and the one-gather fast path giving exactly what per-example collation gives.
#include "lib/data/dataloader.h"

#include <algorithm>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/data/mnist.h"
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

}  // namespace dataloader_test
}  // namespace trainer::data
