// NumPy's .npy format: magic, version 1.0, a little-endian uint16 header length, a Python dict
// literal padded with spaces to a multiple of 64 bytes ending in a newline, then the data.
#include "lib/io/npy.h"

#include <stdexcept>

#include <fmt/format.h>

namespace trainer::io {

std::string npy_bytes(const std::string& descr, const std::vector<int64_t>& shape, const void* data,
                      size_t size) {
  if (descr.size() < 3) throw std::invalid_argument("npy: bad dtype '" + descr + "'");
  size_t count = 1;
  std::string dims;
  for (int64_t d : shape) {
    if (d < 0) throw std::invalid_argument("npy: negative dimension");
    count *= static_cast<size_t>(d);
    dims += fmt::format("{}, ", d);
  }
  if (shape.size() > 1) dims.erase(dims.size() - 2);  // (N,) keeps its comma, (N, C) does not
  const size_t item = static_cast<size_t>(std::stoul(descr.substr(2)));
  if (count * item != size) {
    throw std::invalid_argument(
        fmt::format("npy: {} bytes for {} elements of {} bytes", size, count, item));
  }
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, dims);
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(static_cast<const char*>(data), size);
  return out;
}

}  // namespace trainer::io
