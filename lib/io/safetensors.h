// The safetensors format (8-byte little-endian header length, JSON header with dtype, shape and
// data_offsets, raw little-endian data), so Python's `safetensors` loads what we save and back.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/types.h>

#include "lib/base/files.h"
#include "lib/io/safetensors_header.h"

namespace trainer::io {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// Writes tensors (any device; copied to CPU, contiguous) to `path` atomically, in the given
// order, with {"format": "pt"} metadata as PyTorch's save_file writes it, plus `metadata`.
// The header is padded so that the data section starts 8-byte aligned in the file.
// With a `batch`, the file lands at its commit.
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const Metadata& metadata = {}, base::WriteBatch* batch = nullptr);

// Reads every tensor of a safetensors file, in file order. Throws InputError naming the file
// and the problem: short file, header length past the end, invalid JSON, unknown dtype,
// offsets that do not match the shape or fall outside the data.
NamedTensors load_safetensors(const std::string& path);

// A safetensors file mapped into memory: its tensors point into the mapping (no copy), so
// processes that map the same file share its pages. Writing to a tensor gives that process a
// private copy of the page it touched; the file never changes. The mapping lives as long as any
// of the tensors.
struct MappedSafetensors {
  NamedTensors tensors;
  Metadata metadata;
  // CRC-32 of the data section (everything after the header), computed when `checksum` is asked.
  uint32_t data_crc32 = 0;
};

// Maps `path`; with `checksum`, also reads every page to compute data_crc32. Throws InputError as
// load_safetensors does.
MappedSafetensors map_safetensors(const std::string& path, bool checksum = false);

// CRC-32 (zlib's) of the bytes the tensors hold, in order, as save_safetensors lays them out.
uint32_t data_crc32(const NamedTensors& tensors);

// save_pretrained's weights in `dir`: model.safetensors, or, when the tensors hold more than
// `max_shard_bytes`, shards model-00001-of-0000N.safetensors (each at most max_shard_bytes unless
// one tensor alone is larger, in order) and model.safetensors.index.json ({"metadata":
// {"total_size"}, "weight_map"}), as Transformers writes them. Returns the file names written.
std::vector<std::string> save_model_weights(const std::string& dir, const NamedTensors& tensors,
                                            uint64_t max_shard_bytes,
                                            base::WriteBatch* batch = nullptr);

// The files of `dir`'s weights: model.safetensors, else the shards that
// model.safetensors.index.json's weight_map names (each once, in the index's order). Throws
// InputError naming the index for a weight_map that is missing or not an object, a value that is
// not a file name of the folder, a shard that does not exist, and naming `dir` when it has
// neither file (`hint` appended).
std::vector<std::string> model_weight_files(const std::string& dir, const std::string& hint = "");

// The weights save_model_weights wrote in `dir` (model.safetensors, else the index's shards),
// mapped. Throws InputError naming the file for a missing file, a bad index (a shard outside the
// folder, a missing shard), or a damaged shard.
NamedTensors map_model_weights(const std::string& dir);

// A module's parameters and buffers under PyTorch's names (conv1.weight, ...).
NamedTensors state_dict(const torch::nn::Module& module);

// A check of one tensor before load_state_dict copies it (it throws to refuse the tensor).
using LoadCheck = std::function<void(const std::string& name, const torch::Tensor& tensor)>;

// Copies `tensors` into the module's parameters and buffers, one at a time: `check` first, then
// the copy, then the tensor's pages leave this process's memory where it is a tensor of
// map_safetensors (release_mapped_pages), so that a model is never whole twice in memory. Every
// name must match with the same shape, and none may be missing or extra; throws InputError
// naming the first mismatch before anything is copied.
void load_state_dict(torch::nn::Module& module, const NamedTensors& tensors,
                     const std::string& source, const LoadCheck& check = nullptr);

// For a tensor of map_safetensors whose values have been read (copied elsewhere): the pages only
// its bytes fill leave this process's resident memory (madvise MADV_DONTNEED; the file's pages
// stay in the page cache, and reading the tensor again maps them back). A page written to through
// the tensor would go back to the file's bytes: call it only on tensors nothing wrote to. Any
// other tensor is left alone.
void release_mapped_pages(const torch::Tensor& tensor);

// Whether every value of `tensor` is finite. A contiguous float32, bf16 or float16 tensor on the
// CPU is read in place (its exponent bits); torch::isfinite(t).all() would allocate about 5 bytes
// a value (1.3 GB for a 128k x 2k embedding, which the allocator then keeps).
bool all_finite(const torch::Tensor& tensor);

}  // namespace trainer::io
