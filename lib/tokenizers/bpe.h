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

// A vocabulary, token -> id: its entries in the order given, found by open addressing over their
// hashes. A Llama 3 tokenizer.json's merges look up 840,000 tokens while it loads, which
// std::unordered_map's scattered nodes made a third of the load.
class Vocab {
 public:
  struct Entry {
    std::string token;
    int32_t id;
  };
  // Room for n entries without growing.
  void reserve(size_t n);
  // token -> id; a token given again takes the new id (its place stays).
  void insert_or_assign(std::string token, int32_t id);
  // The id of `token`, or nullptr.
  const int32_t* find(std::string_view token) const;
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  void clear();
  std::vector<Entry>::const_iterator begin() const { return entries_.begin(); }
  std::vector<Entry>::const_iterator end() const { return entries_.end(); }

 private:
  // The slot where `token` (of hash `hash`) is, or the empty slot where it would go.
  size_t slot_of(std::string_view token, uint64_t hash) const;
  void grow(size_t slots);

  std::vector<Entry> entries_;
  std::vector<uint64_t> hashes_;  // each entry's
  // An entry's hash's high half and its index + 1 (0: empty): a lookup reads the entry only where
  // the halves agree. A power of two, at most half full.
  std::vector<uint64_t> slots_;
};

// The merges, (a, b) -> (rank, id of a+b), by open addressing over the pairs' keys
// (Bpe::pair_key): what each merge of each word's symbols looks up.
class MergeTable {
 public:
  using Merge = std::pair<int32_t, int32_t>;
  void reserve(size_t n);
  // A pair given again takes the new merge.
  void insert_or_assign(uint64_t key, Merge merge);
  // The merge of `key`, or nullptr.
  const Merge* find(uint64_t key) const;
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};  // no pair of ids >= 0 has this key
  struct Slot {
    uint64_t key = kEmpty;
    Merge merge;
  };
  size_t slot_of(uint64_t key) const;
  void grow(size_t slots);

  std::vector<Slot> slots_;  // a power of two, at most three quarters full
  size_t size_ = 0;
};

// The id of each byte's "<0xXX>" token in `vocab` (-1: none): byte_fallback's tokens, BPE's and
// Unigram's alike.
std::array<int32_t, 256> byte_fallback_ids(const Vocab& vocab);

class Bpe {
 public:
  Vocab vocab;
  MergeTable merges;  // (a, b) -> (rank, a+b)
  bool ignore_merges = false;
  std::optional<int32_t> unk_id;
  bool fuse_unk = false;
  // Byte-level: a word's first symbols are its bytes, each the vocab id of the character that
  // stands for it (-1: none); otherwise its characters.
  bool byte_level = false;
  std::array<int32_t, 256> byte_ids{};
  // byte_fallback: a character not in the vocab is its bytes' tokens "<0xXX>" (each byte's id in
  // fallback_ids, -1: none; a character with a byte that has none is unknown).
  bool byte_fallback = false;
  std::array<int32_t, 256> fallback_ids{};

  // The key of the merge of the tokens with ids a and b.
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
  }

  // Appends the ids of one word (ignore_merges: the word's own id when the vocab has it), through
  // the cache. Thread-safe.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

 private:
  // A word's symbols before any merge: each byte (byte-level) or each character, a character
  // not in the vocab its bytes' "<0xXX>" tokens (byte_fallback) or the unknown token (fused when
  // fuse_unk) or nothing, as tokenizers' BPE makes them.
  std::vector<int32_t> first_symbols(std::string_view word) const;
  // The word's ids: its symbols merged pair by pair in the order of the merges' ranks.
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
