// The node's cache of prepared DPO data, as trl/sft_cache.h caches SFT's: the node's first
// process prepares a split and writes it, the others read it. Torch-free. The key of a split is
// sft_cache_key's (the data file, the tokenizer, the template, the options as text).
#pragma once

#include <optional>
#include <string>

#include "trl/dpo_data.h"

namespace trainer::trl {

// Writes `data` to `path` atomically (its folder made).
void write_dpo_cache(const std::string& path, const DpoData& data);

// The data written there, or nothing when the file is absent, not whole, or not a DPO cache.
std::optional<DpoData> read_dpo_cache(const std::string& path);

}  // namespace trainer::trl
