// Added tokens: each pass leftmost and longest first; a single_word match touched by a word
// character is dropped (nothing shorter is tried there), lstrip and rstrip take the whitespace
// around a match.
#include "lib/tokenizers/added_vocabulary.h"

#include <algorithm>

#include <unicode/uchar.h>

#include "lib/base/utf8.h"

namespace trainer::tokenizers {

namespace {

// Rust regex's \w: alphabetic, marks, decimal digits, connector punctuation, join controls.
bool is_word_char(char32_t c) {
  const auto u = static_cast<UChar32>(c);
  if (u_hasBinaryProperty(u, UCHAR_ALPHABETIC) || u_hasBinaryProperty(u, UCHAR_JOIN_CONTROL)) {
    return true;
  }
  return (U_GET_GC_MASK(u) & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) != 0;
}

// The start of the character that ends at text[at] (at > 0).
size_t previous_char(std::string_view text, size_t at) {
  do --at;
  while (at > 0 && (static_cast<uint8_t>(text[at]) & 0xC0) == 0x80);
  return at;
}

char32_t char_at(std::string_view text, size_t at, size_t& length) {
  return base::decode_utf8(text, at, length);
}

}  // namespace

void AddedVocabulary::split_at(std::string_view text, const std::vector<Token>& list,
                               std::vector<Piece>& out) {
  if (list.empty()) {
    if (!text.empty()) out.push_back({text, -1});
    return;
  }
  bool first_bytes[256] = {};
  for (const auto& a : list) first_bytes[static_cast<uint8_t>(a.content[0])] = true;
  size_t from = 0;  // the end of the last piece cut
  for (size_t i = 0; i < text.size(); ++i) {
    if (!first_bytes[static_cast<uint8_t>(text[i])]) continue;
    const Token* found = nullptr;
    for (const auto& a : list) {
      if (a.content[0] == text[i] && text.compare(i, a.content.size(), a.content) == 0) {
        found = &a;
        break;
      }
    }
    if (!found) continue;
    size_t start = i, stop = i + found->content.size();
    size_t length;
    if (found->single_word &&
        ((start > 0 && is_word_char(char_at(text, previous_char(text, start), length))) ||
         (stop < text.size() && is_word_char(char_at(text, stop, length))))) {
      i = stop - 1;  // dropped, and nothing else is matched inside it
      continue;
    }
    if (found->lstrip) {
      while (start > from) {
        const size_t p = previous_char(text, start);
        if (!u_isUWhiteSpace(static_cast<UChar32>(char_at(text, p, length)))) break;
        start = p;
      }
    }
    if (found->rstrip) {
      while (stop < text.size() &&
             u_isUWhiteSpace(static_cast<UChar32>(char_at(text, stop, length)))) {
        stop += length;
      }
    }
    if (start > from) out.push_back({text.substr(from, start - from), -1});
    out.push_back({text.substr(start, stop - start), found->id});
    from = stop;
    i = stop - 1;
  }
  if (from < text.size()) out.push_back({text.substr(from), -1});
}

void AddedVocabulary::add(const std::string& content, Token token, bool normalized) {
  if (content.empty()) return;
  ids_[content] = token.id;
  if (token.content.empty()) return;  // normalized to nothing: never matched
  (normalized ? normalized_ : raw_).push_back(std::move(token));
}

void AddedVocabulary::finish() {
  for (auto* list : {&raw_, &normalized_}) {
    std::stable_sort(list->begin(), list->end(), [](const Token& a, const Token& b) {
      return a.content.size() > b.content.size();
    });
  }
}

}  // namespace trainer::tokenizers
