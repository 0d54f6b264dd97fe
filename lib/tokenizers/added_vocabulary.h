// The added tokens of tokenizer.json: found in the raw text before anything else (leftmost,
// longest first; the normalized: false ones before the others), as `tokenizers`' AddedVocabulary
// finds them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace trainer::tokenizers {

class AddedVocabulary {
 public:
  struct Token {
    std::string content;
    int32_t id;
  };
  // A piece of text: an added token's (id >= 0) or text between them (id -1).
  using Piece = std::pair<std::string_view, int32_t>;

  // Adds a token (`normalized`: matched in the second pass); an empty content is never matched.
  void add(const std::string& content, int32_t id, bool normalized);
  // Orders each pass longest first (ties in the order added); call once all are added.
  void finish();

  // Cuts `text` at the added tokens, first those not normalized, then the others in what is
  // left, appending the pieces in order.
  void split(std::string_view text, std::vector<Piece>& out) const;

  // The id of an added token's content.
  const std::unordered_map<std::string, int32_t>& ids() const { return ids_; }

 private:
  std::vector<Token> raw_, normalized_;
  std::unordered_map<std::string, int32_t> ids_;
};

}  // namespace trainer::tokenizers
