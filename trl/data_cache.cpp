// The data caches' files: a magic (whose rows), the counts, then each row's id lists.
#include "trl/data_cache.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <vector>

#include <fmt/format.h>

#include "lib/base/files.h"
#include "trl/cache_bytes.h"

namespace trainer::trl {
namespace {

using cache_bytes::put;
using cache_bytes::Reader;

constexpr char kSftMagic[8] = {'T', 'R', 'S', 'F', 'T', '1', 0, 0};
constexpr char kDpoMagic[8] = {'T', 'R', 'D', 'P', 'O', '1', 0, 0};
constexpr char kGrpoMagic[8] = {'T', 'R', 'G', 'R', 'P', 'O', '1', 0};
constexpr char kRewardMagic[8] = {'T', 'R', 'R', 'W', 'D', '1', 0, 0};

// The file: `magic`, the `counts`, then each row's id lists (`lists`, members of Row), written
// to `path` atomically, its folder made.
template <typename Row, typename... Lists>
void write_cache_file(const std::string& path, const char (&magic)[8],
                      std::initializer_list<int64_t> counts, const std::vector<Row>& rows,
                      Lists Row::*... lists) {
  std::string bytes(magic, sizeof magic);
  for (int64_t v : counts) put(bytes, v);
  for (const Row& row : rows) (put(bytes, row.*lists), ...);
  std::filesystem::create_directories(base::parent_dir(path));
  base::write_file_atomic(path, bytes);
}

// The file's bytes when it is there and starts with `magic`.
std::optional<std::string> read_cache_file(const std::string& path, const char (&magic)[8]) {
  if (!base::is_regular_file(path)) return std::nullopt;
  std::string bytes = base::read_file(path);
  if (bytes.size() < sizeof magic || bytes.compare(0, sizeof magic, magic, sizeof magic) != 0) {
    return std::nullopt;
  }
  return bytes;
}

}  // namespace

std::string data_cache_key(const std::string& path, const std::string& tokenizer_fingerprint,
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
  write_cache_file(path, kSftMagic,
                   {static_cast<int64_t>(data.shape), data.examples, data.tokens, data.dropped,
                    data.truncated, static_cast<int64_t>(data.rows.size())},
                   data.rows, &SftRow::input_ids, &SftRow::labels, &SftRow::seq_lengths);
}

std::optional<SftData> read_sft_cache(const std::string& path) {
  const std::optional<std::string> bytes = read_cache_file(path, kSftMagic);
  if (!bytes) return std::nullopt;
  Reader in{*bytes, sizeof kSftMagic};
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
  if (in.at != bytes->size()) return std::nullopt;
  return data;
}

void write_dpo_cache(const std::string& path, const DpoData& data) {
  write_cache_file(
      path, kDpoMagic,
      {static_cast<int64_t>(data.shape), static_cast<int64_t>(data.implicit_prompt), data.examples,
       data.dropped, data.identical, data.tokens, static_cast<int64_t>(data.rows.size())},
      data.rows, &DpoRow::prompt_ids, &DpoRow::chosen_ids, &DpoRow::rejected_ids);
}

std::optional<DpoData> read_dpo_cache(const std::string& path) {
  const std::optional<std::string> bytes = read_cache_file(path, kDpoMagic);
  if (!bytes) return std::nullopt;
  Reader in{*bytes, sizeof kDpoMagic};
  DpoData data;
  int64_t shape = 0, implicit = 0, rows = 0;
  if (!in.get(shape) || !in.get(implicit) || !in.get(data.examples) || !in.get(data.dropped) ||
      !in.get(data.identical) || !in.get(data.tokens) || !in.get(rows) || shape < 0 || shape > 1 ||
      implicit < 0 || implicit > 1 || rows < 0 || data.examples < 0 || data.dropped < 0 ||
      data.identical < 0 || data.tokens < 0) {
    return std::nullopt;
  }
  data.shape = static_cast<DpoShape>(shape);
  data.implicit_prompt = implicit == 1;
  int64_t tokens = 0;
  for (int64_t i = 0; i < rows; ++i) {
    DpoRow row;
    if (!in.get(row.prompt_ids) || !in.get(row.chosen_ids) || !in.get(row.rejected_ids)) {
      return std::nullopt;
    }
    tokens += static_cast<int64_t>(2 * row.prompt_ids.size() + row.chosen_ids.size() +
                                   row.rejected_ids.size());
    data.rows.push_back(std::move(row));
  }
  if (in.at != bytes->size() || tokens != data.tokens) return std::nullopt;
  return data;
}

void write_reward_cache(const std::string& path, const RewardData& data) {
  std::string bytes(kRewardMagic, sizeof kRewardMagic);
  for (int64_t v : {static_cast<int64_t>(data.shape), static_cast<int64_t>(data.implicit_prompt),
                    static_cast<int64_t>(data.margins), data.examples, data.dropped, data.tokens,
                    static_cast<int64_t>(data.rows.size())}) {
    put(bytes, v);
  }
  for (const RewardRow& row : data.rows) {
    put(bytes, row.chosen_ids);
    put(bytes, row.rejected_ids);
    int64_t bits = 0;
    std::memcpy(&bits, &row.margin, sizeof bits);
    put(bytes, bits);
  }
  std::filesystem::create_directories(base::parent_dir(path));
  base::write_file_atomic(path, bytes);
}

std::optional<RewardData> read_reward_cache(const std::string& path) {
  const std::optional<std::string> bytes = read_cache_file(path, kRewardMagic);
  if (!bytes) return std::nullopt;
  Reader in{*bytes, sizeof kRewardMagic};
  RewardData data;
  int64_t shape = 0, implicit = 0, margins = 0, rows = 0;
  if (!in.get(shape) || !in.get(implicit) || !in.get(margins) || !in.get(data.examples) ||
      !in.get(data.dropped) || !in.get(data.tokens) || !in.get(rows) || shape < 0 || shape > 1 ||
      implicit < 0 || implicit > 1 || margins < 0 || margins > 1 || rows < 0 || data.examples < 0 ||
      data.dropped < 0 || data.tokens < 0) {
    return std::nullopt;
  }
  data.shape = static_cast<DpoShape>(shape);
  data.implicit_prompt = implicit == 1;
  data.margins = margins == 1;
  int64_t tokens = 0;
  for (int64_t i = 0; i < rows; ++i) {
    RewardRow row;
    int64_t bits = 0;
    if (!in.get(row.chosen_ids) || !in.get(row.rejected_ids) || !in.get(bits)) {
      return std::nullopt;
    }
    std::memcpy(&row.margin, &bits, sizeof bits);
    if (!std::isfinite(row.margin)) return std::nullopt;
    tokens += static_cast<int64_t>(row.chosen_ids.size() + row.rejected_ids.size());
    data.rows.push_back(std::move(row));
  }
  if (in.at != bytes->size() || tokens != data.tokens) return std::nullopt;
  return data;
}

void write_grpo_cache(const std::string& path, const GrpoData& data) {
  write_cache_file(path, kGrpoMagic,
                   {static_cast<int64_t>(data.conversational), data.examples, data.tokens,
                    static_cast<int64_t>(data.rows.size())},
                   data.rows, &GrpoRow::prompt_ids, &GrpoRow::record);
}

std::optional<GrpoData> read_grpo_cache(const std::string& path) {
  const std::optional<std::string> bytes = read_cache_file(path, kGrpoMagic);
  if (!bytes) return std::nullopt;
  Reader in{*bytes, sizeof kGrpoMagic};
  GrpoData data;
  int64_t conversational = 0, rows = 0;
  if (!in.get(conversational) || !in.get(data.examples) || !in.get(data.tokens) || !in.get(rows) ||
      conversational < 0 || conversational > 1 || rows < 0 || data.examples < 0 ||
      data.tokens < 0) {
    return std::nullopt;
  }
  data.conversational = conversational == 1;
  int64_t tokens = 0;
  for (int64_t i = 0; i < rows; ++i) {
    GrpoRow row;
    if (!in.get(row.prompt_ids) || !in.get(row.record)) return std::nullopt;
    tokens += static_cast<int64_t>(row.prompt_ids.size());
    data.rows.push_back(std::move(row));
  }
  if (in.at != bytes->size() || tokens != data.tokens) return std::nullopt;
  return data;
}

}  // namespace trainer::trl
