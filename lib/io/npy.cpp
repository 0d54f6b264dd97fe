// NumPy's .npy format: magic, version 1.0, a little-endian uint16 header length, a Python dict
// literal padded with spaces to a multiple of 64 bytes ending in a newline, then the data.
#include "lib/io/npy.h"

#include <cstring>
#include <regex>
#include <stdexcept>

#include <fmt/format.h>

#include "lib/base/errors.h"

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

NpyMatrix read_npy_f8_matrix(const std::string& bytes, int64_t columns, const std::string& source) {
  auto bad = [&](const std::string& why) {
    return InputError(
        fmt::format("{} is not a float64 .npy array of {} columns: {}", source, columns, why));
  };
  if (bytes.size() < 10 || bytes.compare(0, 8, std::string("\x93NUMPY\x01\x00", 8)) != 0) {
    throw bad("no .npy version 1.0 header");
  }
  const size_t header_size =
      static_cast<uint8_t>(bytes[8]) | static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8;
  if (10 + header_size > bytes.size()) throw bad("the header runs past the end of the file");
  const std::string header = bytes.substr(10, header_size);
  static const std::regex kHeader(
      R"(\{'descr': '<f8', 'fortran_order': False, 'shape': \((\d{1,12}), (\d{1,4})\), \} *\n)");
  std::smatch match;
  if (!std::regex_match(header, match, kHeader)) throw bad("another dtype, order or shape");
  NpyMatrix matrix;
  matrix.rows = std::stoll(match[1].str());
  if (std::stoll(match[2].str()) != columns) {
    throw bad(fmt::format("it has {} columns", match[2].str()));
  }
  const size_t count = static_cast<size_t>(matrix.rows) * static_cast<size_t>(columns);
  if (bytes.size() - 10 - header_size != count * sizeof(double)) {
    throw bad(
        fmt::format("{} bytes of data for {} rows", bytes.size() - 10 - header_size, matrix.rows));
  }
  matrix.values.resize(count);
  std::memcpy(matrix.values.data(), bytes.data() + 10 + header_size, count * sizeof(double));
  return matrix;
}

}  // namespace trainer::io
