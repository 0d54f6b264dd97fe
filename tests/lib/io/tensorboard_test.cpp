// The hand-written TensorBoard event files: CRC-32C against published vectors, the Event
// encodings byte for byte against what torch.utils.tensorboard writes (bytes taken from its
// protobuf serialization), the TFRecord framing, and the writer's file name and records.
#include "lib/io/tensorboard.h"

#include <filesystem>
#include <regex>

#include <unistd.h>

#include <gtest/gtest.h>

#include "lib/base/files.h"
#include "tests/test_util.h"

namespace trainer {
namespace tensorboard_test {

using testing::slurp;
using testing::TempDir;

uint32_t crc_of(const std::string& text) { return io::crc32c(text.data(), text.size()); }

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

uint64_t read_u64(const std::string& bytes, size_t at) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(bytes[at + i]);
  return value;
}

uint32_t read_u32(const std::string& bytes, size_t at) {
  return static_cast<uint32_t>(read_u64(bytes.substr(at, 4) + std::string(4, '\0'), 0));
}

// The data of each TFRecord in `bytes`, checking the framing and both CRCs on the way.
std::vector<std::string> records_of(const std::string& bytes) {
  std::vector<std::string> records;
  size_t at = 0;
  while (at < bytes.size()) {
    EXPECT_LE(at + 12, bytes.size());
    if (at + 12 > bytes.size()) break;
    const uint64_t length = read_u64(bytes, at);
    EXPECT_EQ(read_u32(bytes, at + 8), io::masked_crc32c(bytes.data() + at, 8));
    EXPECT_LE(at + 16 + length, bytes.size());
    if (at + 16 + length > bytes.size()) break;
    std::string data = bytes.substr(at + 12, length);
    EXPECT_EQ(read_u32(bytes, at + 12 + length), io::masked_crc32c(data.data(), data.size()));
    records.push_back(data);
    at += 16 + length;
  }
  return records;
}

TEST(Crc32c, MatchesPublishedVectors) {
  // The check value of the CRC catalogue, and RFC 3720's (iSCSI) test vectors, appendix B.4.
  EXPECT_EQ(crc_of("123456789"), 0xe3069283u);
  EXPECT_EQ(crc_of(""), 0u);
  EXPECT_EQ(crc_of(std::string(32, '\0')), 0x8a9136aau);
  EXPECT_EQ(crc_of(std::string(32, '\xff')), 0x62a8ab43u);
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending += static_cast<char>(i);
    descending += static_cast<char>(31 - i);
  }
  EXPECT_EQ(crc_of(ascending), 0x46dd794eu);
  EXPECT_EQ(crc_of(descending), 0x113fdb5cu);
}

TEST(Crc32c, ContinuesAcrossPiecesAndMasksAsTfRecord) {
  const std::string text = "123456789";
  EXPECT_EQ(io::crc32c(text.data() + 4, 5, io::crc32c(text.data(), 4)), 0xe3069283u);
  // TensorBoard's masked_crc32c of the same bytes, and of nothing.
  EXPECT_EQ(io::masked_crc32c(text.data(), text.size()), 0xc78ab0e5u);
  EXPECT_EQ(io::masked_crc32c("", 0), 0xa282ead8u);
}

// Each record as torch.utils.tensorboard (with tensorboard 2.21's protobufs) writes it, framed.
TEST(EventEncoding, FileVersionEventIsTensorBoardsBytes) {
  EXPECT_EQ(io::tfrecord(io::file_version_event(1700000000.25, "trainer")),
            from_hex("2300000000000000b09f77430900001040fc54d9411a0d627261696e2e4576656e743a32520"
                     "90a07747261696e65723eaf09c9"));
}

TEST(EventEncoding, ScalarEventsAreTensorBoardsBytesZeroIncluded) {
  EXPECT_EQ(io::tfrecord(io::scalar_event(1700000000.5, 3, "train/loss", 0.5f)),
            from_hex("200000000000000029eda9500900002040fc54d94110032a130a110a0a747261696e2f6c6f"
                     "7373150000003f40d47335"));
  // simple_value sits in a oneof: a 0 is written, not left out as a default.
  EXPECT_EQ(io::tfrecord(io::scalar_event(1700000000.5, 300, "train/learning_rate", 0.0f)),
            from_hex("2a00000000000000ae8d91f50900002040fc54d94110ac022a1c0a1a0a13747261696e2f6c"
                     "6561726e696e675f726174651500000000899b0e93"));
}

TEST(EventEncoding, TextEventIsWhatAddTextWrites) {
  EXPECT_EQ(io::tfrecord(io::text_event(1700000000.75, 0, "args", "{\n  \"a\": 1\n}")),
            from_hex("420000000000000079f36eaa0900003040fc54d9412a370a350a11617267732f746578745f"
                     "73756d6d61727942160807120412020801420c7b0a20202261223a20310a7d4a080a060a04"
                     "74657874d26d9d33"));
}

TEST(EventFileWriter, NamesTheFileAsTensorBoardAndFlushesEachBatchOfRecords) {
  TempDir dir;
  const std::string logdir = dir.file("runs/a");
  const double before = io::wall_time_now();
  io::EventFileWriter writer(logdir);
  const std::string name = std::filesystem::path(writer.path()).filename().string();
  std::smatch match;
  ASSERT_TRUE(std::regex_match(name, match,
                               std::regex("events\\.out\\.tfevents\\.([0-9]{10})\\.(.+)\\.([0-9]+)"
                                          "\\.([0-9]+)")))
      << name;
  EXPECT_NEAR(std::stod(match[1]), before, 2);
  EXPECT_EQ(match[2], io::host_name());
  EXPECT_EQ(std::stoi(match[3]), ::getpid());
  // The file-version event is on the disk at once; added records wait for flush().
  EXPECT_EQ(records_of(slurp(writer.path())).size(), 1u);
  writer.add_scalar("train/loss", 1.5f, 1);
  writer.add_text("args", "{}");
  EXPECT_EQ(records_of(slurp(writer.path())).size(), 1u);
  writer.flush();
  auto records = records_of(slurp(writer.path()));
  ASSERT_EQ(records.size(), 3u);
  EXPECT_NE(records[0].find("brain.Event:2"), std::string::npos);
  EXPECT_NE(records[1].find("train/loss"), std::string::npos);
  EXPECT_NE(records[2].find("args/text_summary"), std::string::npos);
  writer.close();
  writer.close();  // closing twice is harmless
  // A second writer in this process gets the next number.
  io::EventFileWriter second(logdir);
  EXPECT_EQ(second.path().substr(second.path().rfind('.') + 1),
            std::to_string(std::stoi(match[4]) + 1));
}

TEST(EventFileWriter, ADirectoryThatCannotBeCreatedIsOneLine) {
  TempDir dir;
  base::write_file_atomic(dir.file("file"), "x");
  try {
    io::EventFileWriter writer(dir.file("file/runs"));
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot create TensorBoard log directory " +
                                         dir.file("file/runs") + ": " + dir.file("file") +
                                         " is not a directory");
  }
}

}  // namespace tensorboard_test
}  // namespace trainer
