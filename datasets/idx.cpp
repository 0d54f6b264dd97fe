// IDX reader: zlib's gzread reads gzip and plain files alike, so one path serves both.
#include "datasets/idx.h"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <zlib.h>

#include "lib/io/errors.h"

namespace trainer::data {
namespace {

// Reads the whole (decompressed) content of a file.
std::string read_all(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    throw InputError(fmt::format("cannot open IDX file {}: {}", path,
                                 errno ? std::strerror(errno) : "out of memory"));
  }
  std::string content;
  char buffer[1 << 16];
  while (true) {
    int n = gzread(file, buffer, sizeof buffer);
    if (n < 0) {
      int code = 0;
      std::string message = gzerror(file, &code);
      gzclose(file);
      throw InputError(fmt::format("corrupt IDX file {}: {}", path, message));
    }
    if (n == 0) break;
    content.append(buffer, static_cast<size_t>(n));
  }
  int code = 0;
  const char* message = gzerror(file, &code);
  if (code != Z_OK && code != Z_BUF_ERROR) {
    std::string text = message;
    gzclose(file);
    throw InputError(fmt::format("corrupt IDX file {}: {}", path, text));
  }
  // A gzip stream cut short reads without an error code from gzread on some zlib versions;
  // gzclose reports it.
  if (gzclose(file) == Z_BUF_ERROR) {
    throw InputError(fmt::format("corrupt IDX file {}: compressed data is truncated", path));
  }
  return content;
}

}  // namespace

IdxArray read_idx(const std::string& path) {
  std::string bytes = read_all(path);
  auto byte = [&](size_t i) { return static_cast<uint8_t>(bytes[i]); };
  if (bytes.size() < 4) {
    throw InputError(fmt::format("corrupt IDX file {}: {} bytes, shorter than the 4-byte magic",
                                 path, bytes.size()));
  }
  if (byte(0) != 0 || byte(1) != 0) {
    throw InputError(
        fmt::format("corrupt IDX file {}: wrong magic number 0x{:02x}{:02x}{:02x}{:02x} (expected "
                    "0x000008NN for unsigned bytes)",
                    path, byte(0), byte(1), byte(2), byte(3)));
  }
  if (byte(2) != 0x08) {
    throw InputError(fmt::format(
        "unsupported IDX file {}: element type 0x{:02x}, only unsigned bytes (0x08) are read", path,
        byte(2)));
  }
  size_t ndims = byte(3);
  if (ndims == 0 || ndims > 4) {
    throw InputError(
        fmt::format("corrupt IDX file {}: {} dimensions (allowed: 1 to 4)", path, ndims));
  }
  size_t header = 4 + 4 * ndims;
  if (bytes.size() < header) {
    throw InputError(fmt::format("corrupt IDX file {}: truncated header ({} of {} bytes)", path,
                                 bytes.size(), header));
  }
  IdxArray array;
  uint64_t expected = 1;
  for (size_t d = 0; d < ndims; ++d) {
    size_t at = 4 + 4 * d;
    uint64_t size = (uint64_t{byte(at)} << 24) | (uint64_t{byte(at + 1)} << 16) |
                    (uint64_t{byte(at + 2)} << 8) | uint64_t{byte(at + 3)};
    array.dims.push_back(static_cast<int64_t>(size));
    expected *= size;
  }
  uint64_t found = bytes.size() - header;
  if (found < expected) {
    throw InputError(
        fmt::format("truncated IDX file {}: header promises {} bytes of data, found {}", path,
                    expected, found));
  }
  if (found > expected) {
    throw InputError(fmt::format(
        "corrupt IDX file {}: {} bytes after the {} bytes of data that the header promises", path,
        found - expected, expected));
  }
  array.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  return array;
}

}  // namespace trainer::data
