// libFuzzer target for the safetensors header (lib/io/safetensors_header.cpp): the input is a
// whole file. Only trainer::InputError may leave the parser, and every entry it accepts must
// describe bytes inside the file that match its shape and dtype.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "lib/base/errors.h"
#include "lib/io/safetensors_header.h"

namespace {
volatile uint8_t sink;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  trainer::io::SafetensorsHeader header;
  try {
    header =
        trainer::io::parse_safetensors_header(reinterpret_cast<const char*>(data), size, "fuzz");
  } catch (const trainer::InputError&) {
    return 0;
  }
  if (header.data_start < 8 || header.data_start > size) abort();
  const uint64_t data_size = size - header.data_start;
  for (const auto& e : header.entries) {
    size_t item = trainer::io::safetensors_dtype_size(e.dtype);
    if (item == 0 || e.begin > e.end || e.end > data_size) abort();
    unsigned __int128 bytes = item;
    for (int64_t d : e.shape) {
      if (d < 0) abort();
      bytes *= static_cast<uint64_t>(d);
    }
    if (bytes != e.end - e.begin) abort();
    // Reads the tensor's bytes, as load_safetensors copies them: ASan checks the range.
    uint8_t sum = 0;
    for (uint64_t i = e.begin; i < e.end; ++i) sum += data[header.data_start + i];
    sink = sum;
  }
  return 0;
}
