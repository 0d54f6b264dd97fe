// Transformers' TrainerMemoryTracker (skip_memory_metrics false): the memory each of the Trainer's
// stages took, as metrics. Torch-free: a device's counters come in as functions
// (Trainer::device_memory_counters, over lib/runtime/cuda.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lib/runtime/memory.h"

namespace trainer {

// The stages are "init" (the Trainer's constructor), "train" (train()), "eval" (evaluate()) and
// "test" (predict()). Each reports, in bytes:
//   <stage>_mem_cpu_alloc_delta   the resident set (RSS) at its end minus at its start
//   <stage>_mem_cpu_peaked_delta  its peak during the stage above the end: max(0, peak - end)
// and, with a device's counters (CUDA), <stage>_mem_gpu_alloc_delta and _peaked_delta of the
// caching allocator's allocated bytes. alloc + peaked is what the stage needed above its start.
// A stage started while another is measured (an evaluation inside train()) is ignored, as in
// Transformers: the outer stage counts its memory. Init's metrics go with the first stage
// reported after it, followed by before_init_mem_cpu (and _gpu): the memory when init started.
// The CPU peak is the kernel's high-water mark, reset at each start (runtime::ResidentPeak), so
// one tracker at a time per process measures it rightly.
class TrainerMemoryTracker {
 public:
  // A device allocator's counters, as Transformers reads torch.cuda's.
  struct DeviceCounters {
    std::function<void()> reset_peak;                   // reset_peak_memory_stats
    std::function<void()> empty_cache;                  // empty_cache
    std::function<std::pair<int64_t, int64_t>()> read;  // allocated bytes now, and the peak
  };
  // The metrics of a stage, in Transformers' order: for init (its first time) then the stage,
  // alloc then peaked, each cpu then gpu; then before_init_mem_cpu and _gpu after init's.
  using Values = std::vector<std::pair<std::string, int64_t>>;

  // Measures nothing (skip_memory_metrics true).
  TrainerMemoryTracker() = default;
  // `skip`: skip_memory_metrics (nothing is measured). `device`: the counters of the device the
  // model trains on, none on the CPU.
  TrainerMemoryTracker(bool skip, std::optional<DeviceCounters> device);

  bool skipped() const { return skip_; }
  // Starts measuring `stage`, unless another stage is being measured.
  void start(const std::string& stage);
  // Ends `stage` and returns what to report with it (init's own stop returns nothing: its
  // metrics wait for the next stage). Nothing when `stage` is not the one being measured.
  Values stop(const std::string& stage);
  // Forgets `stage` when it is the one being measured (it threw), so that later stages count;
  // nothing after its stop().
  void abandon(const std::string& stage);

 private:
  struct Reading {
    int64_t begin = 0;
    int64_t alloc = 0;
    int64_t peaked = 0;
  };

  bool skip_ = true;
  std::optional<DeviceCounters> device_;
  std::unique_ptr<runtime::ResidentPeak> peak_;
  std::optional<std::string> current_;
  int64_t cpu_begin_ = 0;
  int64_t gpu_begin_ = 0;
  std::map<std::string, Reading> cpu_, gpu_;
  bool init_reported_ = false;
};

// Starts a stage, and abandons it when the scope ends before stop() (the call threw).
class MemoryStage {
 public:
  MemoryStage(TrainerMemoryTracker& tracker, std::string stage)
      : tracker_(tracker), stage_(std::move(stage)) {
    tracker_.start(stage_);
  }
  ~MemoryStage() { tracker_.abandon(stage_); }
  MemoryStage(const MemoryStage&) = delete;
  MemoryStage& operator=(const MemoryStage&) = delete;

 private:
  TrainerMemoryTracker& tracker_;
  std::string stage_;
};

}  // namespace trainer
