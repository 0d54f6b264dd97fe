// The one translation unit that includes CUDA's headers: TF32, capture state, device memory, the
// caching allocator's counters, and the CUDA graph of a training step (see cuda.h).
#include "lib/runtime/cuda.h"

#include <ATen/Context.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <torch/cuda.h>

#include "lib/runtime/error_text.h"

namespace trainer::cuda {
namespace {

void require_cuda(const char* what) {
  if (!torch::cuda::is_available()) {
    throw std::runtime_error(fmt::format("{} needs a CUDA device and none is present", what));
  }
}

// The device's index ("cuda" without one: the current device).
c10::DeviceIndex index_of(const torch::Device& device) {
  return device.has_index() ? device.index() : c10::cuda::current_device();
}

}  // namespace

bool available() { return torch::cuda::is_available(); }

void set_tf32(bool enabled) {
  at::globalContext().setAllowTF32CuBLAS(enabled);
  at::globalContext().setAllowTF32CuDNN(enabled);
}

bool is_capturing() {
  return torch::cuda::is_available() &&
         c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None;
}

int64_t free_memory(const torch::Device& device) {
  require_cuda("free_memory");
  c10::cuda::CUDAGuard guard(device.index());
  size_t free = 0, total = 0;
  C10_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return static_cast<int64_t>(free);
}

AllocatedMemory allocated_memory(const torch::Device& device) {
  require_cuda("allocated_memory");
  using c10::CachingDeviceAllocator::StatType;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index_of(device));
  const auto& bytes = stats.allocated_bytes[static_cast<size_t>(StatType::AGGREGATE)];
  return {bytes.current, bytes.peak};
}

void reset_peak_memory(const torch::Device& device) {
  require_cuda("reset_peak_memory");
  c10::cuda::CUDACachingAllocator::resetPeakStats(index_of(device));
}

void empty_cache() {
  require_cuda("empty_cache");
  c10::cuda::CUDACachingAllocator::emptyCache();
}

struct StepGraph::Impl {
  explicit Impl(const torch::Device& device)
      : device(device), stream(c10::cuda::getStreamFromPool(false, device.index())) {}
  torch::Device device;
  c10::cuda::CUDAStream stream;
  std::unique_ptr<at::cuda::CUDAGraph> graph;
};

StepGraph::StepGraph(const torch::Device& device) {
  require_cuda("a CUDA graph");
  impl_ = std::make_unique<Impl>(device);
}

StepGraph::~StepGraph() = default;

void StepGraph::warm_up(const std::function<void()>& step) {
  c10::cuda::CUDAGuard device_guard(impl_->device.index());
  auto current = c10::cuda::getCurrentCUDAStream(impl_->device.index());
  at::cuda::CUDAEvent before, after;
  before.record(current);
  before.block(impl_->stream);
  {
    c10::cuda::CUDAStreamGuard guard(impl_->stream);
    step();
  }
  after.record(impl_->stream);
  after.block(current);
}

std::string StepGraph::capture(const std::function<void()>& step) {
  c10::cuda::CUDAGuard device_guard(impl_->device.index());
  c10::cuda::device_synchronize();  // as torch.cuda.graph: nothing else in flight
  auto graph = std::make_unique<at::cuda::CUDAGraph>();
  c10::cuda::CUDAStreamGuard guard(impl_->stream);
  try {
    graph->capture_begin();
    step();
    graph->capture_end();
  } catch (const std::exception& e) {
    std::string why = runtime::error_line(e);
    // End the broken capture (capture_end also hands the allocator's pool back), then clear
    // the error it leaves so that the eager step after it runs.
    if (c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None) {
      try {
        graph->capture_end();
      } catch (const std::exception&) {
      }
    }
    (void)cudaGetLastError();
    (void)graph.release();  // a half-made graph is not reset: its pool stays reserved
    return why;
  }
  impl_->graph = std::move(graph);
  return "";
}

void StepGraph::replay() {
  if (!impl_->graph) throw std::logic_error("StepGraph::replay before a successful capture");
  impl_->graph->replay();
}

bool StepGraph::captured() const { return impl_->graph != nullptr; }

}  // namespace trainer::cuda
