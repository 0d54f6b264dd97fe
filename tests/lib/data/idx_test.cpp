// The IDX reader on files made here: plain and gzip, and every kind of bad file (truncated, wrong
// magic, unsupported type, trailing bytes, gzip bombs, headers that promise too much).
#include "lib/data/idx.h"

#include <fstream>

#include <gtest/gtest.h>
#include <zlib.h>

#include "lib/base/errors.h"
#include "tests/test_util.h"

namespace trainer::data {
namespace idx_test {

using testing::expect_input_error;

using testing::TempDir;
using testing::write_idx;

// `bytes` as one gzip member.
std::string gzip(const std::string& bytes) {
  z_stream stream{};
  deflateInit2(&stream, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&stream, bytes.size()), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  stream.avail_in = static_cast<uInt>(bytes.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  deflate(&stream, Z_FINISH);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

TEST(Idx, ReadsPlainAndGzipAlike) {
  TempDir dir;
  std::vector<uint8_t> data = {1, 2, 3, 4, 5, 6};
  write_idx(dir.file("plain"), {2, 3}, data, false);
  write_idx(dir.file("packed.gz"), {2, 3}, data, true);
  for (const char* name : {"plain", "packed.gz"}) {
    IdxArray array = read_idx(dir.file(name));
    EXPECT_EQ(array.dims, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(array.data, data);
  }
}

TEST(Idx, TruncatedDataNamesFileAndSizes) {
  TempDir dir;
  write_idx(dir.file("short.gz"), {10, 28, 28}, std::vector<uint8_t>(28 * 28 * 9), true);
  expect_input_error([&] { read_idx(dir.file("short.gz")); },
                     {"truncated", dir.file("short.gz"), "7840", "7056"});
}

TEST(Idx, TruncatedHeader) {
  TempDir dir;
  std::ofstream(dir.file("h"), std::ios::binary) << std::string("\0\0\x08\x03\0\0", 6);
  expect_input_error([&] { read_idx(dir.file("h")); }, {"truncated header", dir.file("h")});
}

TEST(Idx, WrongMagic) {
  TempDir dir;
  std::ofstream(dir.file("m"), std::ios::binary) << std::string("PK\x03\x04 not idx at all");
  expect_input_error([&] { read_idx(dir.file("m")); },
                     {"wrong magic number", "0x504b0304", dir.file("m")});
}

TEST(Idx, UnsupportedElementType) {
  TempDir dir;
  write_idx(dir.file("f"), {1}, {0, 0, 0, 0}, false, 0x0D);
  expect_input_error([&] { read_idx(dir.file("f")); },
                     {"element type 0x0d", "only unsigned bytes"});
}

TEST(Idx, TrailingBytes) {
  TempDir dir;
  write_idx(dir.file("t"), {2}, {1, 2, 3}, false);
  expect_input_error([&] { read_idx(dir.file("t")); }, {"1 bytes after the 2 bytes"});
}

TEST(Idx, CorruptGzipStream) {
  TempDir dir;
  write_idx(dir.file("c.gz"), {1000}, std::vector<uint8_t>(1000, 7), true);
  std::string bytes = testing::slurp(dir.file("c.gz"));
  std::ofstream(dir.file("c.gz"), std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  expect_input_error([&] { read_idx(dir.file("c.gz")); }, {dir.file("c.gz")});
}

TEST(Idx, GzipBombStopsAtThePromisedSize) {
  TempDir dir;
  // 64 MiB of zeros compress to about 64 KiB; the header promises 10 bytes.
  write_idx(dir.file("bomb.gz"), {10}, std::vector<uint8_t>(64 << 20), true);
  expect_input_error([&] { read_idx(dir.file("bomb.gz")); },
                     {dir.file("bomb.gz"), "data longer than the header promises (10 bytes)"});
}

TEST(Idx, DimensionsPromisingMoreThan4GiB) {
  TempDir dir;
  // 2^16 to the 4th is 2^64: a product in 64 bits wrapped to 0 and took the empty data.
  for (bool gzip : {false, true}) {
    write_idx(dir.file("wrap"), {65536, 65536, 65536, 65536}, {}, gzip);
    expect_input_error(
        [&] { read_idx(dir.file("wrap")); },
        {dir.file("wrap"), "dimensions 65536x65536x65536x65536", "more than the 4 GiB"});
    write_idx(dir.file("big"), {65536, 65537}, {1, 2, 3}, gzip);
    expect_input_error([&] { read_idx(dir.file("big")); }, {"65536x65537", "4 GiB"});
  }
  // A zero dimension after large ones promises nothing, as it should.
  write_idx(dir.file("empty"), {65536, 65536, 65536, 0}, {}, false);
  EXPECT_TRUE(read_idx(dir.file("empty")).data.empty());
}

TEST(Idx, ConcatenatedGzipMembersAndMemoryDecoding) {
  TempDir dir;
  std::vector<uint8_t> data = {1, 2, 3, 4, 5, 6};
  write_idx(dir.file("plain"), {2, 3}, data, false);
  write_idx(dir.file("a.gz"), {2, 3}, data, true);
  std::string plain = testing::slurp(dir.file("plain"));
  std::string gz = testing::slurp(dir.file("a.gz"));
  EXPECT_EQ(parse_idx(plain, "mem").data, data);
  EXPECT_EQ(decode_idx(plain, "mem").data, data);
  EXPECT_EQ(decode_idx(gz, "mem").data, data);
  // `cat a.gz b.gz` is one gzip stream of two members (here split inside the header), and bytes
  // after the last member that start no other one are ignored, as gzread does.
  std::string two = gzip(plain.substr(0, 5)) + gzip(plain.substr(5));
  EXPECT_EQ(decode_idx(two, "mem").data, data);
  EXPECT_EQ(decode_idx(gz + "trailing", "mem").data, data);
  expect_input_error([&] { decode_idx(gz + gz, "mem"); },
                     {"mem", "data longer than the header promises (6 bytes)"});
}

TEST(Idx, MissingFile) {
  expect_input_error([] { read_idx("/nonexistent/train-images-idx3-ubyte"); },
                     {"cannot open IDX file /nonexistent/train-images-idx3-ubyte"});
}

}  // namespace idx_test
}  // namespace trainer::data
