// libFuzzer target for the IDX reader (lib/data/idx.cpp). The input is decoded as a file's bytes
// (gzip when it starts with 1f 8b), and gzip-compressed in one and in two members it must decode
// to what the plain bytes decode to. Only trainer::InputError may leave the reader.
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>

#include <zlib.h>

#include "lib/data/idx.h"
#include "lib/base/errors.h"

namespace {

using trainer::data::IdxArray;

std::string gzip(const std::string& bytes) {
  z_stream stream{};
  if (deflateInit2(&stream, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) abort();
  std::string out(deflateBound(&stream, bytes.size()), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  stream.avail_in = static_cast<uInt>(bytes.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  if (deflate(&stream, Z_FINISH) != Z_STREAM_END) abort();
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

std::optional<IdxArray> attempt(const std::function<IdxArray()>& decode) {
  try {
    IdxArray array = decode();
    // What a successful read promises its callers (MnistDataset wraps data in a tensor of dims).
    if (array.dims.empty() || array.dims.size() > 4) abort();
    unsigned __int128 product = 1;
    for (int64_t d : array.dims) {
      if (d < 0) abort();
      product *= static_cast<uint64_t>(d);
    }
    if (product != array.data.size()) abort();
    return array;
  } catch (const trainer::InputError&) {
    return std::nullopt;
  }
}

bool same(const std::optional<IdxArray>& a, const std::optional<IdxArray>& b) {
  if (a.has_value() != b.has_value()) return false;
  return !a || (a->dims == b->dims && a->data == b->data);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  auto raw = attempt([&] { return trainer::data::decode_idx(bytes, "fuzz"); });
  if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) return 0;  // gzip: nothing to compare
  if (!same(raw, attempt([&] { return trainer::data::parse_idx(bytes, "fuzz"); }))) abort();
  if (!same(raw, attempt([&] { return trainer::data::decode_idx(gzip(bytes), "fuzz"); }))) abort();
  size_t cut = size / 3;
  std::string members = gzip(bytes.substr(0, cut)) + gzip(bytes.substr(cut));
  if (!same(raw, attempt([&] { return trainer::data::decode_idx(members, "fuzz"); }))) abort();
  return 0;
}
