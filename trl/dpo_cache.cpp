// The DPO data cache's file: a magic, the shape and counts, then each row's three id lists.
#include "trl/dpo_cache.h"

#include <filesystem>

#include "lib/base/files.h"
#include "trl/cache_bytes.h"

namespace trainer::trl {
namespace {

using cache_bytes::put;
using cache_bytes::Reader;

constexpr char kMagic[8] = {'T', 'R', 'D', 'P', 'O', '1', 0, 0};

}  // namespace

void write_dpo_cache(const std::string& path, const DpoData& data) {
  std::string bytes(kMagic, sizeof kMagic);
  for (int64_t v :
       {static_cast<int64_t>(data.shape), static_cast<int64_t>(data.implicit_prompt), data.examples,
        data.dropped, data.identical, data.tokens, static_cast<int64_t>(data.rows.size())}) {
    put(bytes, v);
  }
  for (const DpoRow& row : data.rows) {
    put(bytes, row.prompt_ids);
    put(bytes, row.chosen_ids);
    put(bytes, row.rejected_ids);
  }
  std::filesystem::create_directories(base::parent_dir(path));
  base::write_file_atomic(path, bytes);
}

std::optional<DpoData> read_dpo_cache(const std::string& path) {
  if (!base::is_regular_file(path)) return std::nullopt;
  const std::string bytes = base::read_file(path);
  if (bytes.size() < sizeof kMagic || bytes.compare(0, sizeof kMagic, kMagic, sizeof kMagic) != 0) {
    return std::nullopt;
  }
  Reader in{bytes, sizeof kMagic};
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
  if (in.at != bytes.size() || tokens != data.tokens) return std::nullopt;
  return data;
}

}  // namespace trainer::trl
