// Unigram: the trie of the pieces, Viterbi over a word's bytes (the first best path wins a tie),
// unknown characters fused into one run, and ids as `tokenizers`' Unigram gives them.
#include "lib/tokenizers/unigram.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/text.h"
#include "lib/base/utf8.h"

namespace trainer::tokenizers {

void Unigram::add(std::string piece, double score) {
  vocab.insert_or_assign(std::move(piece), static_cast<int32_t>(scores.size()));
  scores.push_back(score);
}

void Unigram::finish() {
  double lowest = 0;
  for (size_t i = 0; i < scores.size(); ++i)
    lowest = i == 0 ? scores[0] : std::min(lowest, scores[i]);
  unk_score_ = lowest - 10.0;
  trie_.reserve(vocab.size() * 4);
  for (const auto& [piece, id] : vocab) {
    int32_t node = 0;
    for (size_t k = 0; k < piece.size(); ++k) {
      const uint64_t key = (uint64_t(uint32_t(node)) << 8) | static_cast<uint8_t>(piece[k]);
      const MergeTable::Merge* child = trie_.find(key);
      const bool last = k + 1 == piece.size();
      if (!child) {
        trie_.insert_or_assign(key, {nodes_, last ? id : -1});
        node = nodes_++;
      } else {
        node = child->first;
        if (last) trie_.insert_or_assign(key, {node, id});
      }
    }
  }
  fallback_ids_ = byte_fallback_ids(vocab);
}

void Unigram::tokenize(std::string_view word, std::vector<int32_t>& out,
                       const std::string& where) const {
  const size_t n = word.size();
  if (n == 0) return;
  struct Best {
    double score = 0;
    int64_t start = -1;  // none yet
    int32_t id = -1;
  };
  std::vector<Best> best(n + 1);
  for (size_t pos = 0; pos < n;) {
    const double base = best[pos].score;
    size_t char_length;
    base::decode_utf8(word, pos, char_length);
    bool single = false;
    int32_t node = 0;
    for (size_t end = pos; end < n; ++end) {
      const MergeTable::Merge* child =
          trie_.find((uint64_t(uint32_t(node)) << 8) | static_cast<uint8_t>(word[end]));
      if (!child) break;
      node = child->first;
      if (child->second < 0) continue;
      const double candidate = base + scores[static_cast<size_t>(child->second)];
      Best& b = best[end + 1];
      if (b.start < 0 || candidate > b.score)
        b = {candidate, static_cast<int64_t>(pos), child->second};
      if (end + 1 - pos == char_length) single = true;
    }
    if (!single) {  // no piece of this one character: the unknown token covers it
      if (!unk_id) {
        throw InputError(
            fmt::format("{}: the Unigram model has no unk_id and no piece for {} (in {})", where,
                        base::shown_text(word.substr(pos, char_length)), base::shown_text(word)));
      }
      const double candidate = base + unk_score_;
      Best& b = best[pos + char_length];
      if (b.start < 0 || candidate > b.score) b = {candidate, static_cast<int64_t>(pos), *unk_id};
    }
    pos += char_length;
  }
  // Back from the end; runs of the unknown token fused into one piece.
  struct Piece {
    size_t begin, end;
    int32_t id;
  };
  std::vector<Piece> pieces;
  for (size_t end = n; end > 0;) {
    const Best& b = best[end];
    const auto begin = static_cast<size_t>(b.start);
    if (unk_id && b.id == *unk_id && !pieces.empty() && pieces.back().id == *unk_id) {
      pieces.back().begin = begin;
    } else {
      pieces.push_back({begin, end, b.id});
    }
    end = begin;
  }
  std::reverse(pieces.begin(), pieces.end());
  for (const Piece& p : pieces) {
    const std::string_view text = word.substr(p.begin, p.end - p.begin);
    if (const int32_t* id = vocab.find(text)) {
      out.push_back(*id);
      continue;
    }
    bool all = byte_fallback;
    for (size_t k = 0; k < text.size() && all; ++k)
      all = fallback_ids_[static_cast<uint8_t>(text[k])] >= 0;
    if (all) {
      for (char c : text) out.push_back(fallback_ids_[static_cast<uint8_t>(c)]);
    } else {
      out.push_back(*unk_id);  // a fused run is only made of the unknown token's pieces
    }
  }
}

}  // namespace trainer::tokenizers
