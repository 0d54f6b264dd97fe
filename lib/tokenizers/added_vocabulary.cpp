// Added tokens: the two passes over a text, each leftmost and longest first.
#include "lib/tokenizers/added_vocabulary.h"

#include <algorithm>

namespace trainer::tokenizers {

namespace {

// Cuts `text` at the tokens of `list` (leftmost, longest first), appending the pieces:
// {text, -1} or {token, id}.
void split_at(std::string_view text, const std::vector<AddedVocabulary::Token>& list,
              std::vector<AddedVocabulary::Piece>& out) {
  if (list.empty()) {
    out.push_back({text, -1});
    return;
  }
  bool first_bytes[256] = {};
  for (const auto& a : list) first_bytes[static_cast<uint8_t>(a.content[0])] = true;
  size_t from = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (!first_bytes[static_cast<uint8_t>(text[i])]) continue;
    for (const auto& a : list) {
      if (a.content[0] == text[i] && text.compare(i, a.content.size(), a.content) == 0) {
        if (i > from) out.push_back({text.substr(from, i - from), -1});
        out.push_back({text.substr(i, a.content.size()), a.id});
        from = i + a.content.size();
        i = from - 1;
        break;
      }
    }
  }
  if (from < text.size()) out.push_back({text.substr(from), -1});
}

}  // namespace

void AddedVocabulary::add(const std::string& content, int32_t id, bool normalized) {
  if (content.empty()) return;
  (normalized ? normalized_ : raw_).push_back({content, id});
  ids_[content] = id;
}

void AddedVocabulary::finish() {
  for (auto* list : {&raw_, &normalized_}) {
    std::stable_sort(list->begin(), list->end(), [](const Token& a, const Token& b) {
      return a.content.size() > b.content.size();
    });
  }
}

void AddedVocabulary::split(std::string_view text, std::vector<Piece>& out) const {
  std::vector<Piece> first;
  split_at(text, raw_, first);
  for (const Piece& piece : first) {
    if (piece.second >= 0) {
      out.push_back(piece);
    } else {
      split_at(piece.first, normalized_, out);
    }
  }
}

}  // namespace trainer::tokenizers
