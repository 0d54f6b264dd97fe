// The CUDA-only pieces of the GPU path behind a torch-typed interface, so that one translation
// unit (cuda.cpp) includes CUDA's headers: TF32, graph-capture state, free device memory, the
// caching allocator's counters (the memory metrics), and StepGraph, a whole training step
// captured once as a CUDA graph and replayed. Everything here
// compiles and links on any machine (LibTorch carries CUDA); calling it without a CUDA device
// throws, except available() and is_capturing(), which answer false.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <torch/types.h>

namespace trainer::cuda {

// Whether a CUDA device is present (and LibTorch can use it).
bool available();
// Transformers' tf32: TF32 tensor-core math for float32 matrix products (cuBLAS) and
// convolutions (cuDNN), or not.
void set_tf32(bool enabled);
// Whether the current CUDA stream is capturing a graph (false without CUDA).
bool is_capturing();
// Bytes free on `device` now (cudaMemGetInfo), as the caching allocator's free blocks do not count.
int64_t free_memory(const torch::Device& device);
// The caching allocator's bytes in tensors on `device`: now, and the most since the last
// reset_peak_memory (torch.cuda.memory_allocated and max_memory_allocated).
struct AllocatedMemory {
  int64_t now = 0;
  int64_t peak = 0;
};
AllocatedMemory allocated_memory(const torch::Device& device);
// Starts the peak of allocated_memory(device) afresh (torch.cuda.reset_peak_memory_stats).
void reset_peak_memory(const torch::Device& device);
// Hands the caching allocator's unused blocks back to CUDA (torch.cuda.empty_cache).
void empty_cache();

// One training step as a CUDA graph, as torch.cuda.graph does it: warm_up() runs the step eagerly
// on a side stream (lazily made cuBLAS handles and workspaces then belong to that stream), then
// capture() records it once (nothing runs while capturing), and replay() runs the recording on
// the current stream. The step must read its inputs from, and write its outputs to, tensors that
// outlive the graph (static buffers): a replay reuses the same memory. Random ops draw from the
// default CUDA generator, whose offset each replay advances as eager steps would.
class StepGraph {
 public:
  explicit StepGraph(const torch::Device& device);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // Runs `step` on the side stream, ordered after and before the current stream's work.
  void warm_up(const std::function<void()>& step);
  // Records `step`. Returns "" when the graph is ready to replay, else one line saying why it
  // could not be captured (an op that syncs with the host, say); the CUDA error is cleared and
  // the graph left empty. Exceptions from `step` are caught and reported the same way.
  std::string capture(const std::function<void()>& step);
  // Runs the recorded step. Throws std::logic_error before a successful capture().
  void replay();
  bool captured() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainer::cuda
