// The SFT data cache's file: a magic, the counts, then each row's three lengths and values.
#include "trl/sft_cache.h"

#include <sys/stat.h>
#include <zlib.h>

#include <filesystem>

#include <fmt/format.h>

#include "lib/base/files.h"
#include "trl/cache_bytes.h"

namespace trainer::trl {
namespace {

using cache_bytes::put;
using cache_bytes::Reader;

constexpr char kMagic[8] = {'T', 'R', 'S', 'F', 'T', '1', 0, 0};

}  // namespace

std::string sft_cache_key(const std::string& path, const std::string& tokenizer_fingerprint,
                          const std::string& template_source, const std::string& options) {
  std::string text = fmt::format("v1|{}|{}|{}|{}|", tokenizer_fingerprint, template_source.size(),
                                 template_source, options);
  struct stat info {};
  std::error_code ec;
  const std::string real = std::filesystem::weakly_canonical(path, ec).string();
  if (::stat(path.c_str(), &info) == 0) {
    text +=
        fmt::format("{}:{}:{}.{}", real, info.st_size, info.st_mtim.tv_sec, info.st_mtim.tv_nsec);
  }
  const auto* bytes = reinterpret_cast<const Bytef*>(text.data());
  return fmt::format("{:08x}{:08x}", crc32(0, bytes, text.size()), adler32(1, bytes, text.size()));
}

void write_sft_cache(const std::string& path, const SftData& data) {
  std::string bytes(kMagic, sizeof kMagic);
  for (int64_t v : {static_cast<int64_t>(data.shape), data.examples, data.tokens, data.dropped,
                    data.truncated, static_cast<int64_t>(data.rows.size())}) {
    put(bytes, v);
  }
  for (const SftRow& row : data.rows) {
    put(bytes, row.input_ids);
    put(bytes, row.labels);
    put(bytes, row.seq_lengths);
  }
  std::filesystem::create_directories(base::parent_dir(path));
  base::write_file_atomic(path, bytes);
}

std::optional<SftData> read_sft_cache(const std::string& path) {
  if (!base::is_regular_file(path)) return std::nullopt;
  const std::string bytes = base::read_file(path);
  if (bytes.size() < sizeof kMagic || bytes.compare(0, sizeof kMagic, kMagic, sizeof kMagic) != 0) {
    return std::nullopt;
  }
  Reader in{bytes, sizeof kMagic};
  SftData data;
  int64_t shape = 0, rows = 0;
  if (!in.get(shape) || !in.get(data.examples) || !in.get(data.tokens) || !in.get(data.dropped) ||
      !in.get(data.truncated) || !in.get(rows) || shape < 0 || shape > 3 || rows < 0) {
    return std::nullopt;
  }
  data.shape = static_cast<SftShape>(shape);
  for (int64_t i = 0; i < rows; ++i) {
    SftRow row;
    if (!in.get(row.input_ids) || !in.get(row.labels) || !in.get(row.seq_lengths) ||
        row.labels.size() != row.input_ids.size()) {
      return std::nullopt;
    }
    int64_t packed = 0;
    for (int32_t length : row.seq_lengths) packed += length;
    if (!row.seq_lengths.empty() && packed != static_cast<int64_t>(row.input_ids.size())) {
      return std::nullopt;
    }
    data.rows.push_back(std::move(row));
  }
  if (in.at != bytes.size()) return std::nullopt;
  return data;
}

}  // namespace trainer::trl
