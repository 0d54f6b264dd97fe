// BPE: a word's symbols merged pair by pair in the order of the merges' ranks (a priority queue
// over a linked list of symbols), as `tokenizers`' BPE merges them, and the cache of words.
#include "lib/tokenizers/bpe.h"

#include <functional>
#include <queue>

#include "lib/base/utf8.h"
#include "lib/tokenizers/pre_tokenizers.h"

namespace trainer::tokenizers {

void Bpe::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id, prev, next;
    bool gone;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  // The first symbols: each byte (byte-level) or each character; what is not in the vocab is the
  // unknown token (fused when fuse_unk) or nothing, as tokenizers' BPE does.
  int32_t pending_unk = -1;
  auto add = [&](int32_t id) {
    const auto n = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, n - 1, -1, false});
    if (n > 0) symbols[n - 1].next = n;
  };
  for (size_t i = 0; i < word.size();) {
    int32_t id = -1;
    size_t length = 1;
    if (byte_level) {
      id = byte_ids[static_cast<uint8_t>(word[i])];
    } else {
      base::decode_utf8(word, i, length);
      auto it = vocab.find(std::string(word.substr(i, length)));
      if (it != vocab.end()) id = it->second;
    }
    i += length;
    if (id >= 0) {
      if (pending_unk >= 0) add(pending_unk), pending_unk = -1;
      add(id);
    } else if (unk_id) {
      if (pending_unk >= 0 && !fuse_unk) add(pending_unk);
      pending_unk = *unk_id;
    }
  }
  if (pending_unk >= 0) add(pending_unk);

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
    auto it = merges.find(pair_key(symbols[pos].id, symbols[next].id));
    if (it != merges.end()) queue.push({it->second.first, pos, it->second.second});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) push(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& s = symbols[top.pos];
    if (s.gone || s.next < 0) continue;
    auto it = merges.find(pair_key(s.id, symbols[s.next].id));
    if (it == merges.end() || it->second.second != top.id || it->second.first != top.rank) {
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
  auto whole = ignore_merges ? vocab.find(token) : vocab.end();
  if (whole != vocab.end()) {
    out.push_back(whole->second);
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
