// The node's cache of a TRL trainer's prepared data, as run_clm's tokenized blocks are cached
// (lib/data/clm.cpp): the node's first process prepares a split and writes it, the others read
// it; a later run with the same file, tokenizer, template and options reads it too. One file a
// split: an 8-byte magic that says whose rows follow, the counts, the rows. Torch-free.
#pragma once

#include <optional>
#include <string>

#include "trl/dpo_data.h"
#include "trl/grpo_data.h"
#include "trl/reward_data.h"
#include "trl/sft_data.h"

namespace trainer::trl {

// A hex key of what decides a split's rows: the data file (path, size, modification time), the
// tokenizer's fingerprint, the chat template's source, and `options` (every option that changes
// the rows, written by the caller as text, the trainer's name first).
std::string data_cache_key(const std::string& path, const std::string& tokenizer_fingerprint,
                           const std::string& template_source, const std::string& options);

// Writes `data` to `path` atomically (its folder made).
void write_sft_cache(const std::string& path, const SftData& data);
void write_dpo_cache(const std::string& path, const DpoData& data);
void write_grpo_cache(const std::string& path, const GrpoData& data);
void write_reward_cache(const std::string& path, const RewardData& data);

// The data written there, or nothing when the file is absent, not whole, or another trainer's.
std::optional<SftData> read_sft_cache(const std::string& path);
std::optional<DpoData> read_dpo_cache(const std::string& path);
std::optional<GrpoData> read_grpo_cache(const std::string& path);
std::optional<RewardData> read_reward_cache(const std::string& path);

// The same, chosen by the data's type (as TrlSource reads and writes a split).
inline void write_data_cache(const std::string& path, const SftData& data) {
  write_sft_cache(path, data);
}
inline void write_data_cache(const std::string& path, const DpoData& data) {
  write_dpo_cache(path, data);
}
inline void read_data_cache(const std::string& path, std::optional<SftData>& data) {
  data = read_sft_cache(path);
}
inline void read_data_cache(const std::string& path, std::optional<DpoData>& data) {
  data = read_dpo_cache(path);
}
inline void write_data_cache(const std::string& path, const GrpoData& data) {
  write_grpo_cache(path, data);
}
inline void read_data_cache(const std::string& path, std::optional<GrpoData>& data) {
  data = read_grpo_cache(path);
}
inline void write_data_cache(const std::string& path, const RewardData& data) {
  write_reward_cache(path, data);
}
inline void read_data_cache(const std::string& path, std::optional<RewardData>& data) {
  data = read_reward_cache(path);
}

}  // namespace trainer::trl
