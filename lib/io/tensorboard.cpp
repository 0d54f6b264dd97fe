// TensorBoard event files by hand: CRC-32C, TFRecord framing, protobuf encoding of the Event
// messages, and the event-file writer.
#include "lib/io/tensorboard.h"

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>

#include <fmt/format.h>
#include <unistd.h>

#include "lib/base/files.h"

namespace trainer::io {
namespace {

// CRC-32C's reflected polynomial.
constexpr uint32_t kCastagnoli = 0x82f63b78;

std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (crc & 1 ? kCastagnoli : 0);
    table[byte] = crc;
  }
  return table;
}

void put_fixed32(std::string& out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

void put_fixed64(std::string& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

// Protobuf's wire format: varints, keys (field number and wire type), and the fields we write.
enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out += static_cast<char>((value & 0x7f) | 0x80);
    value >>= 7;
  }
  out += static_cast<char>(value);
}

void put_key(std::string& out, uint32_t field, WireType type) {
  put_varint(out, (uint64_t{field} << 3) | type);
}

void put_varint_field(std::string& out, uint32_t field, uint64_t value) {
  put_key(out, field, kVarint);
  put_varint(out, value);
}

// A string, bytes or embedded message.
void put_bytes_field(std::string& out, uint32_t field, const std::string& bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out += bytes;
}

void put_double_field(std::string& out, uint32_t field, double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  put_key(out, field, kFixed64);
  put_fixed64(out, bits);
}

void put_float_field(std::string& out, uint32_t field, float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  put_key(out, field, kFixed32);
  put_fixed32(out, bits);
}

// Event's fields: wall_time = 1, step = 2, file_version = 3, summary = 5, source_metadata = 10.
std::string event_header(double wall_time, int64_t step) {
  std::string event;
  put_double_field(event, 1, wall_time);
  if (step != 0) put_varint_field(event, 2, static_cast<uint64_t>(step));
  return event;
}

// An Event holding a Summary (field 5) of one Summary.Value (field 1).
std::string summary_event(double wall_time, int64_t step, const std::string& value) {
  std::string summary;
  put_bytes_field(summary, 1, value);
  std::string event = event_header(wall_time, step);
  put_bytes_field(event, 5, summary);
  return event;
}

// The writers this process opened: the last part of an event file's name.
std::atomic<int64_t> g_writers{0};

}  // namespace

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

uint32_t crc32c(const void* data, size_t size, uint32_t crc) {
  static const std::array<uint32_t, 256> table = make_crc32c_table();
  const auto* bytes = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ bytes[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string tfrecord(const std::string& data) {
  std::string record;
  record.reserve(data.size() + 16);
  put_fixed64(record, data.size());
  put_fixed32(record, masked_crc32c(record.data(), 8));
  record += data;
  put_fixed32(record, masked_crc32c(data.data(), data.size()));
  return record;
}

std::string file_version_event(double wall_time, const std::string& writer) {
  std::string event = event_header(wall_time, 0);
  put_bytes_field(event, 3, "brain.Event:2");
  std::string source;  // SourceMetadata: writer = 1
  put_bytes_field(source, 1, writer);
  put_bytes_field(event, 10, source);
  return event;
}

std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value) {
  // Summary.Value: tag = 1, simple_value = 2 (in a oneof: written even when 0).
  std::string entry;
  put_bytes_field(entry, 1, tag);
  put_float_field(entry, 2, value);
  return summary_event(wall_time, step, entry);
}

std::string text_event(double wall_time, int64_t step, const std::string& tag,
                       const std::string& text) {
  // TensorProto: dtype = 1 (DT_STRING = 7), tensor_shape = 2 (TensorShapeProto: dim = 2, each
  // Dim: size = 1), string_val = 8.
  std::string dim, shape, tensor;
  put_varint_field(dim, 1, 1);
  put_bytes_field(shape, 2, dim);
  put_varint_field(tensor, 1, 7);
  put_bytes_field(tensor, 2, shape);
  put_bytes_field(tensor, 8, text);
  // SummaryMetadata: plugin_data = 1 (PluginData: plugin_name = 1; the text plugin's content,
  // TextPluginData with version 0, serializes to nothing and is left out).
  std::string plugin, metadata;
  put_bytes_field(plugin, 1, "text");
  put_bytes_field(metadata, 1, plugin);
  // Summary.Value: tag = 1, tensor = 8, metadata = 9.
  std::string entry;
  put_bytes_field(entry, 1, tag + "/text_summary");
  put_bytes_field(entry, 8, tensor);
  put_bytes_field(entry, 9, metadata);
  return summary_event(wall_time, step, entry);
}

double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

EventFileWriter::EventFileWriter(const std::string& dir) {
  base::make_directories(dir, "TensorBoard log directory");
  const double now = wall_time_now();
  path_ =
      base::join_path(dir, fmt::format("events.out.tfevents.{:010d}.{}.{}.{}", static_cast<int64_t>(now),
                                 host_name(), ::getpid(), g_writers.fetch_add(1)));
  file_ = std::make_unique<base::AppendFile>(path_, /*truncate=*/true);
  pending_ = tfrecord(file_version_event(now, "trainer"));
  flush();
}

EventFileWriter::~EventFileWriter() {
  try {
    close();
  } catch (const std::exception&) {
    // A destructor does not throw; close() is where a failure is reported.
  }
}

void EventFileWriter::add_scalar(const std::string& tag, float value, int64_t step) {
  pending_ += tfrecord(scalar_event(wall_time_now(), step, tag, value));
}

void EventFileWriter::add_text(const std::string& tag, const std::string& text, int64_t step) {
  pending_ += tfrecord(text_event(wall_time_now(), step, tag, text));
}

void EventFileWriter::flush() {
  if (!file_ || pending_.empty()) return;
  std::string records;
  records.swap(pending_);
  file_->append(records);
}

void EventFileWriter::close() {
  if (!file_) return;
  flush();
  std::unique_ptr<base::AppendFile> file = std::move(file_);
  file->sync();
}

}  // namespace trainer::io
