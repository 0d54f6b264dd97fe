// The safetensors format (8-byte little-endian header length, JSON header with dtype, shape and
// data_offsets, raw little-endian data), so Python's `safetensors` loads what we save and back.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/types.h>

namespace trainer::io {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// Writes tensors (any device; copied to CPU, contiguous) to `path` atomically, in the given
// order, with {"format": "pt"} metadata as PyTorch's save_file writes it.
void save_safetensors(const std::string& path, const NamedTensors& tensors);

// Reads every tensor of a safetensors file, in file order. Throws InputError naming the file
// and the problem: short file, header length past the end, invalid JSON, unknown dtype,
// offsets that do not match the shape or fall outside the data.
NamedTensors load_safetensors(const std::string& path);

// A module's parameters and buffers under PyTorch's names (conv1.weight, ...).
NamedTensors state_dict(const torch::nn::Module& module);

// Copies `tensors` into the module's parameters and buffers. Every name must match with the
// same shape, and none may be missing or extra; throws InputError naming the first mismatch.
void load_state_dict(torch::nn::Module& module, const NamedTensors& tensors,
                     const std::string& source);

}  // namespace trainer::io
