// The header of a safetensors file, parsed and checked without LibTorch (so that it can be fuzzed
// on its own): which tensors the file holds, their dtype names, shapes and byte ranges.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace trainer::io {

using Metadata = std::map<std::string, std::string>;

// One tensor's entry in the header: what its bytes hold and where they are.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // one of the names safetensors_dtype_size() knows: "F32", "BF16", ...
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // [begin, end): offsets from the start of the data section
  uint64_t end = 0;    // end - begin == product of shape * dtype size
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;  // in file order
  Metadata metadata;                      // "__metadata__" (string to string)
  uint64_t data_start = 0;                // offset of the data section in the file
};

// Bytes per element of a dtype name the trainer reads and writes (F64, F32, F16, BF16, I64,
// I32, I16, I8, U8, BOOL); 0 for any other name.
size_t safetensors_dtype_size(const std::string& dtype);

// Parses and checks the header of a safetensors file of `size` bytes starting at `bytes`.
// Throws InputError ("corrupt safetensors file <path>: ...") for a file shorter than 8 bytes, a
// header length past the end, invalid JSON, a header that is not an object, an entry without
// dtype / shape / data_offsets or with values of the wrong type, an unknown dtype, a negative
// dimension, a shape whose byte size overflows 64 bits, data_offsets outside the data section or
// not matching the shape, tensors whose bytes overlap, a __metadata__ that does not map strings
// to strings. Every entry returned lies inside the data section.
SafetensorsHeader parse_safetensors_header(const char* bytes, uint64_t size,
                                           const std::string& path);

// Whether `name` is a file name save_model_weights writes (model.safetensors, the index, a shard).
bool is_model_weights_file(const std::string& name);

// "50GB", "100KB", "5GiB", "1000" (bytes), as Transformers' convert_file_size_to_int reads them
// (KB, MB, GB: powers of 1000; KiB, MiB, GiB: of 1024). Throws InputError naming `what`.
uint64_t parse_file_size(const std::string& text, const std::string& what);

}  // namespace trainer::io
