// BPE: a word's symbols merged pair by pair in the order of the merges' ranks (a priority queue
// over a linked list of symbols), as `tokenizers`' BPE merges them, and the cache of words.
#include "lib/tokenizers/bpe.h"

#include <algorithm>
#include <functional>
#include <queue>

#include <fmt/format.h>

#include "lib/base/utf8.h"
#include "lib/tokenizers/pre_tokenizers.h"

namespace trainer::tokenizers {

namespace {

// The smallest power of two that holds n entries at most half full (16 at least).
size_t slots_for(size_t n) {
  size_t slots = 16;
  while (slots < 2 * n) slots *= 2;
  return slots;
}

}  // namespace

void Vocab::reserve(size_t n) {
  entries_.reserve(n);
  hashes_.reserve(n);
  if (slots_for(n) > slots_.size()) grow(slots_for(n));
}

void Vocab::clear() {
  entries_.clear();
  hashes_.clear();
  std::fill(slots_.begin(), slots_.end(), 0);
}

size_t Vocab::slot_of(std::string_view token, uint64_t hash) const {
  const size_t mask = slots_.size() - 1;
  const uint64_t high = hash >> 32;
  for (size_t slot = hash & mask;; slot = (slot + 1) & mask) {
    const uint64_t held = slots_[slot];
    if (held == 0) return slot;
    if ((held >> 32) == high && entries_[(held & 0xFFFFFFFF) - 1].token == token) return slot;
  }
}

void Vocab::grow(size_t slots) {
  slots_.assign(slots, 0);
  for (size_t i = 0; i < entries_.size(); ++i) {
    slots_[slot_of(entries_[i].token, hashes_[i])] = (hashes_[i] >> 32 << 32) | (i + 1);
  }
}

void Vocab::insert_or_assign(std::string token, int32_t id) {
  if (2 * (entries_.size() + 1) > slots_.size()) grow(std::max<size_t>(16, 2 * slots_.size()));
  const uint64_t hash = std::hash<std::string_view>()(token);
  const size_t slot = slot_of(token, hash);
  if (slots_[slot] != 0) {
    entries_[(slots_[slot] & 0xFFFFFFFF) - 1].id = id;
    return;
  }
  entries_.push_back({std::move(token), id});
  hashes_.push_back(hash);
  slots_[slot] = (hash >> 32 << 32) | entries_.size();
}

const int32_t* Vocab::find(std::string_view token) const {
  if (slots_.empty()) return nullptr;
  const uint64_t held = slots_[slot_of(token, std::hash<std::string_view>()(token))];
  return held == 0 ? nullptr : &entries_[(held & 0xFFFFFFFF) - 1].id;
}

std::array<int32_t, 256> byte_fallback_ids(const Vocab& vocab) {
  std::array<int32_t, 256> ids{};
  for (int b = 0; b < 256; ++b) {
    const int32_t* id = vocab.find(fmt::format("<0x{:02X}>", b));
    ids[b] = id ? *id : -1;
  }
  return ids;
}

// (Three quarters full at most: the 280,147 merges of a Llama 3 tokenizer fit 2^19 slots, 8 MB.)
void MergeTable::reserve(size_t n) {
  size_t slots = 16;
  while (4 * n > 3 * slots) slots *= 2;
  if (slots > slots_.size()) grow(slots);
}

size_t MergeTable::slot_of(uint64_t key) const {
  const size_t mask = slots_.size() - 1;
  // The key's bits mixed (splitmix64's finaliser): pair keys differ mostly in their high half.
  uint64_t h = key;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
  h ^= h >> 31;
  for (size_t slot = h & mask;; slot = (slot + 1) & mask) {
    if (slots_[slot].key == kEmpty || slots_[slot].key == key) return slot;
  }
}

void MergeTable::grow(size_t slots) {
  std::vector<Slot> held = std::move(slots_);
  slots_.assign(slots, Slot{});
  for (const Slot& s : held) {
    if (s.key != kEmpty) slots_[slot_of(s.key)] = s;
  }
}

void MergeTable::insert_or_assign(uint64_t key, Merge merge) {
  if (4 * (size_ + 1) > 3 * slots_.size()) grow(std::max<size_t>(16, 2 * slots_.size()));
  Slot& slot = slots_[slot_of(key)];
  if (slot.key == kEmpty) ++size_;
  slot = {key, merge};
}

const MergeTable::Merge* MergeTable::find(uint64_t key) const {
  if (slots_.empty()) return nullptr;
  const Slot& slot = slots_[slot_of(key)];
  return slot.key == kEmpty ? nullptr : &slot.merge;
}

std::vector<int32_t> Bpe::first_symbols(std::string_view word) const {
  std::vector<int32_t> ids;
  ids.reserve(word.size());
  int32_t pending_unk = -1;
  for (size_t i = 0; i < word.size();) {
    int32_t id = -1;
    size_t length = 1;
    if (byte_level) {
      id = byte_ids[static_cast<uint8_t>(word[i])];
    } else {
      base::decode_utf8(word, i, length);
      if (const int32_t* found = vocab.find(word.substr(i, length))) id = *found;
    }
    if (id < 0 && byte_fallback && !byte_level) {
      bool all = true;
      for (size_t k = 0; k < length; ++k)
        all = all && fallback_ids[static_cast<uint8_t>(word[i + k])] >= 0;
      if (all) {  // the bytes' tokens; a pending unknown token waits (as tokenizers' BPE does)
        for (size_t k = 0; k < length; ++k)
          ids.push_back(fallback_ids[static_cast<uint8_t>(word[i + k])]);
        i += length;
        continue;
      }
    }
    i += length;
    if (id >= 0) {
      if (pending_unk >= 0) ids.push_back(pending_unk), pending_unk = -1;
      ids.push_back(id);
    } else if (unk_id) {
      if (pending_unk >= 0 && !fuse_unk) ids.push_back(pending_unk);
      pending_unk = *unk_id;
    }
  }
  if (pending_unk >= 0) ids.push_back(pending_unk);
  return ids;
}

void Bpe::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id, prev, next;
    bool gone;
  };
  std::vector<Symbol> symbols;
  for (int32_t id : first_symbols(word)) {
    const auto n = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, n - 1, n + 1, false});
  }
  if (!symbols.empty()) symbols.back().next = -1;

  struct Candidate {
    int32_t rank, pos, id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto push = [&](int32_t pos) {
    const int32_t next = symbols[pos].next;
    if (next < 0) return;
    if (const MergeTable::Merge* merge = merges.find(pair_key(symbols[pos].id, symbols[next].id))) {
      queue.push({merge->first, pos, merge->second});
    }
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) push(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& s = symbols[top.pos];
    if (s.gone || s.next < 0) continue;
    const MergeTable::Merge* merge = merges.find(pair_key(s.id, symbols[s.next].id));
    if (!merge || merge->second != top.id || merge->first != top.rank) {
      continue;  // this pair changed since
    }
    Symbol& right = symbols[s.next];
    right.gone = true;
    s.id = top.id;
    s.next = right.next;
    if (s.next >= 0) symbols[s.next].prev = top.pos;
    if (s.prev >= 0) push(s.prev);
    push(top.pos);
  }
  for (const Symbol& s : symbols) {
    if (!s.gone) out.push_back(s.id);
  }
}

// The ids of one word (ignore_merges: the word's own id when the vocab has it), through the cache.
void Bpe::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.size() == 1 && byte_level && byte_ids[static_cast<uint8_t>(word[0])] >= 0) {
    out.push_back(byte_ids[static_cast<uint8_t>(word[0])]);
    return;
  }
  const bool cached = word.size() <= kCachedWordBytes;
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a
  for (char c : word) hash = (hash ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  const size_t slot = (hash ^ (hash >> 29)) & (kCacheSlots - 1);
  if (cached) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.empty()) cache_.resize(kCacheSlots);
    const CacheSlot& entry = cache_[slot];
    if (!entry.ids.empty() && entry.word == word) {
      out.insert(out.end(), entry.ids.begin(), entry.ids.end());
      return;
    }
  }
  const size_t start = out.size();
  std::string token;
  if (ignore_merges) {
    if (byte_level) {
      static const std::array<char32_t, 256> chars = bytes_to_unicode();
      for (char b : word) base::append_utf8(token, chars[static_cast<uint8_t>(b)]);
    } else {
      token = std::string(word);
    }
  }
  const int32_t* whole = ignore_merges ? vocab.find(token) : nullptr;
  if (whole) {
    out.push_back(*whole);
  } else {
    merge_word(word, out);
  }
  if (cached && out.size() > start) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    CacheSlot& entry = cache_[slot];
    entry.word.assign(word);
    entry.ids.assign(out.begin() + static_cast<std::ptrdiff_t>(start), out.end());
  }
}

}  // namespace trainer::tokenizers
