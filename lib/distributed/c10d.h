// The one place that includes c10d (torch.distributed's C++ core) and holds what differs between
// LibTorch versions. Gloo's process group is compiled in every torch wheel but its header is
// guarded by USE_C10D_GLOO, which Torch's CMake config exports; gloo's own headers come from
// Debian's libgloo-dev, since the wheel does not ship them.
#pragma once

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace trainer::dist::compat {

// c10d::Reducer's constructor gained arguments over 2.x; this is 2.11's.
inline std::shared_ptr<c10d::Reducer> make_reducer(std::vector<at::Tensor> params,
                                                   std::vector<std::vector<size_t>> buckets,
                                                   c10::intrusive_ptr<c10d::ProcessGroup> group,
                                                   int64_t bucket_bytes_cap,
                                                   int64_t first_bucket_bytes_cap,
                                                   bool find_unused_parameters) {
  std::vector<bool> sparse(params.size(), false);
  return std::make_shared<c10d::Reducer>(std::move(params), std::move(buckets), std::move(group),
                                         sparse, bucket_bytes_cap, find_unused_parameters,
                                         /*gradient_as_bucket_view=*/false,
                                         std::unordered_map<size_t, std::string>{},
                                         first_bucket_bytes_cap,
                                         /*skip_all_reduce_unused_params=*/false,
                                         /*use_python_reducer=*/false,
                                         // Empty, as Python's DDP passes it: rebuilt buckets then
                                         // follow first_bucket_bytes_cap and bucket_bytes_cap.
                                         /*bucket_bytes_cap_list=*/std::vector<int64_t>{});
}

}  // namespace trainer::dist::compat
