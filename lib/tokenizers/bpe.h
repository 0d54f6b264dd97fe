// BPE, the model of tokenizer.json: the vocabulary, the ranked merges, the unknown token, and a
// cache of the words already merged, with the ids `tokenizers`' BPE gives.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace trainer::tokenizers {

class Bpe {
 public:
  std::unordered_map<std::string, int32_t> vocab;
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges;  // (a, b) -> (rank, a+b)
  bool ignore_merges = false;
  std::optional<int32_t> unk_id;
  bool fuse_unk = false;
  // Byte-level: a word's first symbols are its bytes, each the vocab id of the character that
  // stands for it (-1: none); otherwise its characters.
  bool byte_level = false;
  std::array<int32_t, 256> byte_ids{};

  // The key of the merge of the tokens with ids a and b.
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
  }

  // Appends the ids of one word (ignore_merges: the word's own id when the vocab has it), through
  // the cache. Thread-safe.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

 private:
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;

  // The per-word cache: direct-mapped (a word's hash picks its slot; a newcomer replaces what
  // was there), allocated on first use.
  struct CacheSlot {
    std::string word;
    std::vector<int32_t> ids;
  };
  mutable std::mutex cache_mutex_;
  mutable std::vector<CacheSlot> cache_;
  static constexpr size_t kCacheSlots = size_t{1} << 17;
  static constexpr size_t kCachedWordBytes = 64;
};

}  // namespace trainer::tokenizers
