// TensorBoard event files written by hand, without TensorFlow or protobuf: CRC-32C, TFRecord
// framing, the few Event protocol buffers a training run needs (file version, scalar, text), and
// a writer that names and fills a file as torch.utils.tensorboard's SummaryWriter does.
// Torch-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace trainer::base {
class AppendFile;
}  // namespace trainer::base

namespace trainer::io {

// CRC-32C (Castagnoli, iSCSI's), continuing from `crc` (0 to start): crc32c("123456789") is
// 0xe3069283.
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);
// TFRecord's masked CRC-32C: rotated right by 15 bits plus 0xa282ead8.
uint32_t masked_crc32c(const void* data, size_t size);

// One TFRecord: the length (uint64, little-endian), its masked CRC-32C, the data, its masked
// CRC-32C.
std::string tfrecord(const std::string& data);

// Serialized tensorboard.Event messages, fields in number order as protobuf writes them (byte
// for byte what torch.utils.tensorboard writes for the same values). A step of 0 is left out, as
// proto3 leaves out defaults.
// {wall_time, file_version: "brain.Event:2", source_metadata: {writer}}: a file's first event.
std::string file_version_event(double wall_time, const std::string& writer);
// {wall_time, step, summary: {value: [{tag, simple_value}]}}: add_scalar's event.
std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value);
// A text summary as add_text(tag, text) writes it: tag "<tag>/text_summary", the text plugin's
// metadata, and a DT_STRING tensor of shape [1] holding the text.
std::string text_event(double wall_time, int64_t step, const std::string& tag,
                       const std::string& text);

// Seconds since the epoch, with sub-second precision (an Event's wall_time).
double wall_time_now();

// This machine's name, as Python's socket.gethostname() gives it (in event files' names and in
// Transformers' default logging_dir).
std::string host_name();

// An event file in `dir`, named as TensorBoard's EventFileWriter names it:
// events.out.tfevents.<unix seconds, 10 digits>.<host>.<pid>.<n>, n counting the writers this
// process opened. Records are written when flush() is called (each log's events at once), so a
// killed process loses nothing flushed. Throws std::runtime_error naming the file when it cannot
// be created or written.
class EventFileWriter {
 public:
  // Creates `dir` (and its parents) and the file, and writes the file-version event.
  explicit EventFileWriter(const std::string& dir);
  ~EventFileWriter();
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  void add_scalar(const std::string& tag, float value, int64_t step);
  void add_text(const std::string& tag, const std::string& text, int64_t step = 0);
  // Writes the records added since the last flush to the file.
  void flush();
  // Flushes, then flushes the file to the disk and closes it. The destructor closes too, but
  // does not throw.
  void close();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::unique_ptr<base::AppendFile> file_;
  std::string pending_;
};

}  // namespace trainer::io
