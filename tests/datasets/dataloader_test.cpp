// Samplers and the DataLoader: reproducible shuffles that change each epoch, PyTorch's batch
// counts, and the one-gather fast path giving exactly what per-example collation gives.
#include "datasets/dataloader.h"

#include <algorithm>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "datasets/mnist.h"

namespace trainer::data {
namespace {

std::shared_ptr<MnistDataset> small_dataset(int64_t n) {
  torch::manual_seed(3);
  return std::make_shared<MnistDataset>(torch::randint(0, 256, {n, 28, 28}).to(torch::kUInt8),
                                        torch::randint(0, 10, {n}));
}

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

}  // namespace
}  // namespace trainer::data
