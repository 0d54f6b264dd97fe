// IDX reader: a file's bytes are read whole and decoded from memory, gzip members through zlib's
// inflate (stopping as soon as the output exceeds what the IDX header promises), plain as they are.
#include "lib/data/idx.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <new>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <zlib.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/text.h"

namespace trainer::data {
namespace {

using Bytes = std::vector<uint8_t>;

// What an IDX header says, checked: its size, the dims and the data they promise.
struct Header {
  size_t size = 0;  // 4 + 4 * ndims
  std::vector<int64_t> dims;
  uint64_t data_bytes = 0;  // product of dims, at most kMaxIdxDataBytes
};

// The largest header: the magic and 4 dims.
constexpr size_t kMaxHeaderBytes = 4 + 4 * 4;

// Parses the header at the start of `bytes`, which hold the whole content or at least its first
// kMaxHeaderBytes.
Header parse_header(const uint8_t* bytes, size_t size, const std::string& source) {
  if (size < 4) {
    throw InputError(
        fmt::format("corrupt IDX file {}: {} bytes, shorter than the 4-byte magic", source, size));
  }
  if (bytes[0] != 0 || bytes[1] != 0) {
    throw InputError(
        fmt::format("corrupt IDX file {}: wrong magic number 0x{:02x}{:02x}{:02x}{:02x} (expected "
                    "0x000008NN for unsigned bytes)",
                    source, bytes[0], bytes[1], bytes[2], bytes[3]));
  }
  if (bytes[2] != 0x08) {
    throw InputError(fmt::format(
        "unsupported IDX file {}: element type 0x{:02x}, only unsigned bytes (0x08) are read",
        source, bytes[2]));
  }
  size_t ndims = bytes[3];
  if (ndims == 0 || ndims > 4) {
    throw InputError(
        fmt::format("corrupt IDX file {}: {} dimensions (allowed: 1 to 4)", source, ndims));
  }
  Header header;
  header.size = 4 + 4 * ndims;
  if (size < header.size) {
    throw InputError(fmt::format("corrupt IDX file {}: truncated header ({} of {} bytes)", source,
                                 size, header.size));
  }
  // Saturates above the limit: (2^32 + 1) * (2^32 - 1) still fits in 64 bits, and a later zero
  // dimension still makes the product zero.
  uint64_t expected = 1;
  for (size_t d = 0; d < ndims; ++d) {
    const uint8_t* at = bytes + 4 + 4 * d;
    uint64_t dim = (uint64_t{at[0]} << 24) | (uint64_t{at[1]} << 16) | (uint64_t{at[2]} << 8) |
                   uint64_t{at[3]};
    header.dims.push_back(static_cast<int64_t>(dim));
    expected = std::min(expected * dim, kMaxIdxDataBytes + 1);
  }
  if (expected > kMaxIdxDataBytes) {
    throw InputError(fmt::format(
        "corrupt IDX file {}: dimensions {} promise more than the 4 GiB of data an IDX file may "
        "hold here",
        source, base::dims_text(header.dims)));
  }
  header.data_bytes = expected;
  return header;
}

// Checks the whole uncompressed content against its header and keeps the data.
IdxArray finish(Bytes&& content, const std::string& source) {
  Header header = parse_header(content.data(), content.size(), source);
  uint64_t expected = header.data_bytes;
  uint64_t found = content.size() - header.size;
  if (found < expected) {
    throw InputError(
        fmt::format("truncated IDX file {}: header promises {} bytes of data, found {}", source,
                    expected, found));
  }
  if (found > expected) {
    throw InputError(fmt::format(
        "corrupt IDX file {}: {} bytes after the {} bytes of data that the header promises", source,
        found - expected, expected));
  }
  content.erase(content.begin(), content.begin() + static_cast<std::ptrdiff_t>(header.size));
  return IdxArray{std::move(header.dims), std::move(content)};
}

bool is_gzip(const uint8_t* bytes, size_t size) {
  return size >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b;
}

// Inflates gzip members one after the other, as gzread does: a member followed by bytes that do
// not start another member ends the stream (gzread ignores such trailing garbage).
class Inflater {
 public:
  Inflater(const uint8_t* in, size_t size, const std::string& source)
      : in_(in), in_left_(size), source_(source) {
    if (inflateInit2(&stream_, 16 + MAX_WBITS) != Z_OK) throw std::bad_alloc();
  }
  ~Inflater() { inflateEnd(&stream_); }
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;

  // Appends to `out` until it holds `want` bytes or the stream ends; never more than `want`.
  void fill(Bytes& out, size_t want) {
    uint8_t buffer[1 << 16];
    while (out.size() < want && !done_) {
      feed();
      size_t room = std::min(sizeof buffer, want - out.size());
      stream_.next_out = buffer;
      stream_.avail_out = static_cast<uInt>(room);
      int rc = inflate(&stream_, Z_NO_FLUSH);
      out.insert(out.end(), buffer, buffer + (room - stream_.avail_out));
      if (rc == Z_STREAM_END) {
        feed();
        if (stream_.avail_in >= 2 ? is_gzip(stream_.next_in, stream_.avail_in)
                                  : (stream_.avail_in == 1 && in_left_ > 0 &&
                                     stream_.next_in[0] == 0x1f && in_[0] == 0x8b)) {
          inflateReset(&stream_);
        } else {
          done_ = true;
        }
      } else if (rc == Z_BUF_ERROR) {
        // No progress with room to write: the input ran out before the member's end.
        throw InputError(fmt::format("corrupt IDX file {}: compressed data is truncated", source_));
      } else if (rc == Z_MEM_ERROR) {
        throw std::bad_alloc();
      } else if (rc != Z_OK) {
        throw InputError(fmt::format("corrupt IDX file {}: {}", source_,
                                     stream_.msg != nullptr ? stream_.msg : zError(rc)));
      }
    }
  }

 private:
  // Hands zlib the next piece of input when it has used up the last one (avail_in is 32 bits).
  void feed() {
    if (stream_.avail_in > 0 || in_left_ == 0) return;
    size_t n = std::min<size_t>(in_left_, UINT_MAX);
    stream_.next_in = const_cast<Bytef*>(in_);
    stream_.avail_in = static_cast<uInt>(n);
    in_ += n;
    in_left_ -= n;
  }

  z_stream stream_{};
  const uint8_t* in_;  // input not yet handed to zlib
  size_t in_left_;
  const std::string& source_;
  bool done_ = false;
};

IdxArray decode(Bytes&& bytes, const std::string& source) {
  if (!is_gzip(bytes.data(), bytes.size())) return finish(std::move(bytes), source);
  Inflater inflater(bytes.data(), bytes.size(), source);
  Bytes content;
  inflater.fill(content, kMaxHeaderBytes);
  // Throws for a bad header, or one promising too much, before the data is inflated.
  Header header = parse_header(content.data(), content.size(), source);
  uint64_t total = header.size + header.data_bytes;
  // One byte more than promised tells a stream that is too long; nothing beyond it is inflated.
  content.reserve(std::min<uint64_t>(total + 1, 4 * uint64_t{bytes.size()} + (1 << 16)));
  inflater.fill(content, total + 1);
  if (content.size() > total) {
    throw InputError(
        fmt::format("corrupt IDX file {}: data longer than the header promises ({} bytes)", source,
                    header.data_bytes));
  }
  return finish(std::move(content), source);
}

}  // namespace

IdxArray read_idx(const std::string& path) {
  // A device (/dev/zero) would never end and a pipe could block for ever: the data set's files
  // are found by name, so only regular files are read.
  return decode_idx(base::read_file(path, SIZE_MAX, "IDX file ", /*allow_pipes=*/false), path);
}

IdxArray decode_idx(const std::string& bytes, const std::string& source) {
  return decode(Bytes(bytes.begin(), bytes.end()), source);
}

IdxArray parse_idx(const std::string& bytes, const std::string& source) {
  return finish(Bytes(bytes.begin(), bytes.end()), source);
}

}  // namespace trainer::data
