// TrainerMemoryTracker (memory_tracker.h): Transformers' start, stop and update_metrics, with the
// CPU peak from the kernel's high-water mark instead of a sampling thread.
#include "trainer/memory_tracker.h"

#include <algorithm>

namespace trainer {

TrainerMemoryTracker::TrainerMemoryTracker(bool skip, std::optional<DeviceCounters> device)
    : skip_(skip), device_(std::move(device)) {
  if (!skip_) peak_ = std::make_unique<runtime::ResidentPeak>();
}

void TrainerMemoryTracker::start(const std::string& stage) {
  if (skip_ || current_) return;  // an inner stage: the outer one counts its memory
  current_ = stage;
  if (device_) {
    device_->reset_peak();
    device_->empty_cache();
    gpu_begin_ = device_->read().first;
  }
  cpu_begin_ = runtime::resident_bytes();
  peak_->start();
}

TrainerMemoryTracker::Values TrainerMemoryTracker::stop(const std::string& stage) {
  if (skip_ || current_ != stage) return {};
  current_.reset();
  const int64_t cpu_peak = peak_->stop();
  if (device_) {
    device_->empty_cache();
    const auto [now, peak] = device_->read();
    gpu_[stage] = {gpu_begin_, now - gpu_begin_, std::max<int64_t>(0, peak - now)};
  }
  const int64_t cpu_now = runtime::resident_bytes();
  cpu_[stage] = {cpu_begin_, cpu_now - cpu_begin_, std::max<int64_t>(0, cpu_peak - cpu_now)};
  if (stage == "init") return {};  // reported with the next stage

  std::vector<std::string> stages = {stage};
  if (!init_reported_) {
    stages.insert(stages.begin(), "init");
    init_reported_ = true;
  }
  Values values;
  for (const std::string& name : stages) {
    const auto cpu = cpu_.find(name);
    const auto gpu = gpu_.find(name);
    if (cpu != cpu_.end()) values.emplace_back(name + "_mem_cpu_alloc_delta", cpu->second.alloc);
    if (gpu != gpu_.end()) values.emplace_back(name + "_mem_gpu_alloc_delta", gpu->second.alloc);
    if (cpu != cpu_.end()) values.emplace_back(name + "_mem_cpu_peaked_delta", cpu->second.peaked);
    if (gpu != gpu_.end()) values.emplace_back(name + "_mem_gpu_peaked_delta", gpu->second.peaked);
  }
  // The memory in use when the Trainer was made: what came before any stage measured.
  if (stages.front() == "init" && cpu_.count("init")) {
    values.emplace_back("before_init_mem_cpu", cpu_["init"].begin);
    if (gpu_.count("init")) values.emplace_back("before_init_mem_gpu", gpu_["init"].begin);
  }
  return values;
}

void TrainerMemoryTracker::abandon(const std::string& stage) {
  if (skip_ || current_ != stage) return;
  current_.reset();
  peak_->stop();
}

}  // namespace trainer
