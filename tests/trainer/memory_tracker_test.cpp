// TrainerMemoryTracker as Transformers' TrainerMemoryTracker: the numbers against their
// definitions (alloc: end minus start; peaked: the peak above the end), init's metrics with the
// first stage reported and only then, a stage inside another ignored, the keys in Transformers'
// order with a device's counters, nothing at all when skipped; printed as whole MB.
#include "trainer/memory_tracker.h"

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <sys/mman.h>

#include "tests/test_util.h"
#include "trainer/callbacks.h"

namespace trainer {
namespace memory_tracker_test {

constexpr int64_t kMiB = int64_t{1} << 20;

using Touched = testing::TouchedMemory;

std::vector<std::string> keys(const TrainerMemoryTracker::Values& values) {
  std::vector<std::string> out;
  for (const auto& [key, value] : values) out.push_back(key);
  return out;
}

int64_t value(const TrainerMemoryTracker::Values& values, const std::string& key) {
  for (const auto& [name, bytes] : values) {
    if (name == key) return bytes;
  }
  ADD_FAILURE() << "no " << key;
  return 0;
}

TEST(TrainerMemoryTracker, MeasuresEachStageAsTransformersDefinesIt) {
  const int64_t before_init = runtime::resident_bytes();
  TrainerMemoryTracker tracker(false, std::nullopt);
  tracker.start("init");
  auto kept_by_init = std::make_unique<Touched>(16 * kMiB);
  EXPECT_TRUE(tracker.stop("init").empty());  // waits for the first stage reported

  tracker.start("train");
  auto kept = std::make_unique<Touched>(32 * kMiB);
  { Touched gone(64 * kMiB); }
  // An evaluation inside training: ignored, its memory counted by train.
  tracker.start("eval");
  { Touched gone_in_eval(80 * kMiB); }
  EXPECT_TRUE(tracker.stop("eval").empty());
  const TrainerMemoryTracker::Values train = tracker.stop("train");
  EXPECT_EQ(keys(train),
            (std::vector<std::string>{"init_mem_cpu_alloc_delta", "init_mem_cpu_peaked_delta",
                                      "train_mem_cpu_alloc_delta", "train_mem_cpu_peaked_delta",
                                      "before_init_mem_cpu"}));
  // init kept 16 MiB and peaked no higher.
  EXPECT_GE(value(train, "init_mem_cpu_alloc_delta"), 16 * kMiB);
  EXPECT_LE(value(train, "init_mem_cpu_alloc_delta"), 20 * kMiB);
  EXPECT_LE(value(train, "init_mem_cpu_peaked_delta"), 4 * kMiB);
  // train kept 32 MiB (alloc) and went 80 MiB above that before its end (the inner evaluation's
  // block, the larger of the two it unmapped): peaked is the peak less the end.
  EXPECT_GE(value(train, "train_mem_cpu_alloc_delta"), 32 * kMiB);
  EXPECT_LE(value(train, "train_mem_cpu_alloc_delta"), 36 * kMiB);
  EXPECT_GE(value(train, "train_mem_cpu_peaked_delta"), 79 * kMiB);
  EXPECT_LE(value(train, "train_mem_cpu_peaked_delta"), 88 * kMiB);
  EXPECT_GE(value(train, "before_init_mem_cpu"), before_init - 4 * kMiB);
  EXPECT_LE(value(train, "before_init_mem_cpu"), before_init + 4 * kMiB);

  // The next stage: its own keys only (init was reported); freeing makes alloc negative, and a
  // stage that peaks at its start has nothing above its end.
  tracker.start("eval");
  kept.reset();
  const TrainerMemoryTracker::Values eval = tracker.stop("eval");
  EXPECT_EQ(keys(eval),
            (std::vector<std::string>{"eval_mem_cpu_alloc_delta", "eval_mem_cpu_peaked_delta"}));
  EXPECT_LE(value(eval, "eval_mem_cpu_alloc_delta"), -31 * kMiB);
  EXPECT_GE(value(eval, "eval_mem_cpu_alloc_delta"), -36 * kMiB);
  EXPECT_GE(value(eval, "eval_mem_cpu_peaked_delta"), 31 * kMiB);  // the start, above the end
  // Stopping a stage that is not measured gives nothing.
  EXPECT_TRUE(tracker.stop("test").empty());
}

TEST(TrainerMemoryTracker, InterleavesADevicesCountersInTransformersOrder) {
  // A fake device: 100 bytes allocated at init's start, 300 at its end after a peak of 1000;
  // then 300 at train's start, 250 at its end, peak 600.
  std::vector<std::pair<int64_t, int64_t>> reads = {
      {100, 100}, {300, 1000}, {300, 300}, {250, 600}};
  size_t next = 0;
  int resets = 0, empties = 0;
  TrainerMemoryTracker::DeviceCounters device{[&] { ++resets; }, [&] { ++empties; },
                                              [&] { return reads.at(next++); }};
  TrainerMemoryTracker tracker(false, device);
  tracker.start("init");
  tracker.stop("init");
  tracker.start("train");
  const TrainerMemoryTracker::Values train = tracker.stop("train");
  EXPECT_EQ(keys(train),
            (std::vector<std::string>{"init_mem_cpu_alloc_delta", "init_mem_gpu_alloc_delta",
                                      "init_mem_cpu_peaked_delta", "init_mem_gpu_peaked_delta",
                                      "train_mem_cpu_alloc_delta", "train_mem_gpu_alloc_delta",
                                      "train_mem_cpu_peaked_delta", "train_mem_gpu_peaked_delta",
                                      "before_init_mem_cpu", "before_init_mem_gpu"}));
  EXPECT_EQ(value(train, "init_mem_gpu_alloc_delta"), 200);
  EXPECT_EQ(value(train, "init_mem_gpu_peaked_delta"), 700);
  EXPECT_EQ(value(train, "train_mem_gpu_alloc_delta"), -50);
  EXPECT_EQ(value(train, "train_mem_gpu_peaked_delta"), 350);
  EXPECT_EQ(value(train, "before_init_mem_gpu"), 100);
  // Each start resets the peak and empties the cache; each stop empties it again.
  EXPECT_EQ(resets, 2);
  EXPECT_EQ(empties, 4);
}

TEST(TrainerMemoryTracker, AStageThatThrewLeavesTheNextOneMeasured) {
  TrainerMemoryTracker tracker(false, std::nullopt);
  tracker.start("init");
  tracker.stop("init");
  {
    const MemoryStage stage(tracker, "train");  // train() threw: never stopped
  }
  tracker.start("test");
  EXPECT_EQ(keys(tracker.stop("test")),
            (std::vector<std::string>{"init_mem_cpu_alloc_delta", "init_mem_cpu_peaked_delta",
                                      "test_mem_cpu_alloc_delta", "test_mem_cpu_peaked_delta",
                                      "before_init_mem_cpu"}));
}

TEST(TrainerMemoryTracker, SkippedMeasuresNothing) {
  int reads = 0;
  TrainerMemoryTracker::DeviceCounters device{[] {}, [] {},
                                              [&] {
                                                ++reads;
                                                return std::make_pair(int64_t{0}, int64_t{0});
                                              }};
  TrainerMemoryTracker by_default, told(true, device);
  for (TrainerMemoryTracker* tracker : {&by_default, &told}) {
    EXPECT_TRUE(tracker->skipped());
    tracker->start("init");
    EXPECT_TRUE(tracker->stop("init").empty());
    tracker->start("train");
    EXPECT_TRUE(tracker->stop("train").empty());
  }
  EXPECT_EQ(reads, 0);
}

TEST(TrainerMemoryTracker, MetricsPrintAsTransformersPrintsThem) {
  // Whole MB, floored as Python's >> floors: -1 byte is -1MB.
  EXPECT_EQ(format_metrics("train", {{"train_mem_cpu_alloc_delta", 114655232},
                                     {"train_mem_cpu_peaked_delta", 0},
                                     {"init_mem_gpu_alloc_delta", -1},
                                     {"before_init_mem_cpu", 396824576}}),
            "***** train metrics *****\n"
            "  before_init_mem_cpu        = 378MB\n"
            "  init_mem_gpu_alloc_delta   =  -1MB\n"
            "  train_mem_cpu_alloc_delta  = 109MB\n"
            "  train_mem_cpu_peaked_delta =   0MB\n");
}

}  // namespace memory_tracker_test
}  // namespace trainer
