// The Accelerator's collectives (Accelerate's utils/operations.py): gather, gather_for_metrics
// (without the rows that even out the processes), reduce, pad_across_processes, the barrier.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "lib/accelerate/accelerator.h"
#include "lib/base/text.h"

namespace trainer {
namespace {

// `tensor` with `dim` grown to `length` by rows of `value`, after it (before with `first`).
torch::Tensor pad_to(const torch::Tensor& tensor, int64_t dim, int64_t length, int64_t value,
                     bool first) {
  const int64_t mine = tensor.size(dim);
  if (mine == length) return tensor;
  auto sizes = tensor.sizes().vec();
  sizes[dim] = length;
  torch::Tensor padded = torch::full(sizes, value, tensor.options());
  padded.narrow(dim, first ? length - mine : 0, mine).copy_(tensor);
  return padded;
}

// The largest size any process's tensor has along `dim`.
int64_t longest_along(const std::vector<std::vector<int64_t>>& shapes, int64_t dim) {
  int64_t longest = 0;
  for (const auto& s : shapes) longest = std::max(longest, s[dim]);
  return longest;
}

}  // namespace

std::vector<std::vector<int64_t>> Accelerator::gather_shapes(const torch::Tensor& tensor,
                                                             int64_t& dim, const char* what) {
  constexpr int64_t kMaxDims = 8;
  // [dims, dtype, dim, sizes...]; dims -1 marks a tensor of more dimensions than fit.
  std::vector<int64_t> header(3 + kMaxDims, -1);
  header[0] = tensor.dim() <= kMaxDims ? tensor.dim() : -1;
  header[1] = static_cast<int64_t>(tensor.scalar_type());
  header[2] = dim;
  for (int64_t d = 0; d < std::min(tensor.dim(), kMaxDims); ++d) header[3 + d] = tensor.size(d);
  auto all = dist::all_gather(torch::tensor(header, torch::kLong).to(device_));
  // Every process checks every process's header, so all of them throw the same error.
  std::vector<std::vector<int64_t>> shapes;
  std::vector<torch::ScalarType> types;
  std::vector<int64_t> dims;
  for (const auto& h : all) {
    torch::Tensor cpu = h.to(torch::kCPU);
    const int64_t* v = cpu.data_ptr<int64_t>();
    if (v[0] < 0) {
      throw std::invalid_argument(fmt::format(
          "{}: process {} has a tensor of more than {} dimensions", what, shapes.size(), kMaxDims));
    }
    shapes.emplace_back(v + 3, v + 3 + v[0]);
    types.push_back(static_cast<torch::ScalarType>(v[1]));
    dims.push_back(v[2]);
  }
  for (size_t q = 1; q < dims.size(); ++q) {
    if (dims[q] != dims[0]) {
      throw std::invalid_argument(fmt::format("{}: process {} passed dim {} but process 0 dim {}",
                                              what, q, dims[q], dims[0]));
    }
  }
  const auto ndim = static_cast<int64_t>(shapes[0].size());
  if (dim < 0) dim += ndim;
  if (ndim > 0 && (dim < 0 || dim >= ndim)) {
    throw std::invalid_argument(
        fmt::format("{}: dim {} is not allowed for tensors of {} dimensions", what, dims[0], ndim));
  }
  for (size_t q = 1; q < shapes.size(); ++q) {
    bool same = shapes[q].size() == shapes[0].size() && types[q] == types[0];
    for (size_t d = 0; same && d < shapes[q].size(); ++d) {
      same = static_cast<int64_t>(d) == dim || shapes[q][d] == shapes[0][d];
    }
    if (!same) {
      throw std::invalid_argument(fmt::format(
          "{}: process {} has a {} tensor of shape {} but process 0 has a {} tensor of shape {} "
          "(only dimension {} may differ)",
          what, q, c10::toString(types[q]), base::shape_text(shapes[q]), c10::toString(types[0]),
          base::shape_text(shapes[0]), dim));
    }
  }
  return shapes;
}

torch::Tensor Accelerator::pad_across_processes(const torch::Tensor& tensor, int64_t dim,
                                                int64_t pad_index, bool pad_first) {
  if (num_processes_ == 1) return tensor;
  auto shapes = gather_shapes(tensor, dim, "pad_across_processes");
  if (tensor.dim() == 0) return tensor;  // every process has a 0-dim tensor: nothing to pad
  return pad_to(tensor, dim, longest_along(shapes, dim), pad_index, pad_first);
}

torch::Tensor Accelerator::gather_rows(const torch::Tensor& tensor, bool for_metrics) {
  torch::Tensor t = tensor.dim() == 0 ? tensor.reshape({1}) : tensor;
  if (num_processes_ == 1) return t;
  int64_t dim = 0;
  auto shapes = gather_shapes(t, dim, for_metrics ? "gather_for_metrics" : "gather");
  std::vector<int64_t> keep;
  for (const auto& s : shapes) keep.push_back(s[0]);
  const GradientState& state = *state_;
  if (for_metrics && state.batch_rows.size() == shapes.size()) {
    bool per_example = true;
    for (size_t q = 0; q < shapes.size(); ++q) per_example &= shapes[q][0] == state.batch_rows[q];
    if (per_example) keep = state.real_rows;
  }
  torch::Tensor padded = pad_to(t.to(device_), 0, longest_along(shapes, 0), 0, false);
  auto parts = dist::all_gather(padded.contiguous());
  std::vector<torch::Tensor> rows;
  for (size_t q = 0; q < parts.size(); ++q) rows.push_back(parts[q].narrow(0, 0, keep[q]));
  return torch::cat(rows).to(t.device());
}

torch::Tensor Accelerator::gather(const torch::Tensor& tensor) {
  return gather_rows(tensor, false);
}

torch::Tensor Accelerator::gather_for_metrics(const torch::Tensor& tensor) {
  return gather_rows(tensor, true);
}

torch::Tensor Accelerator::reduce(const torch::Tensor& tensor, Reduction reduction) {
  torch::Tensor out = tensor.to(device_).clone();
  if (num_processes_ > 1) {
    dist::all_reduce(out,
                     reduction == Reduction::kMax ? dist::ReduceOp::kMax : dist::ReduceOp::kSum);
  }
  if (reduction == Reduction::kMean) out = out / static_cast<double>(num_processes_);
  return out.to(tensor.device());
}

void Accelerator::wait_for_everyone() {
  if (num_processes_ > 1) dist::barrier();
}

}  // namespace trainer
