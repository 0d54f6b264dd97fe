// The added tokens of tokenizer.json, found as `tokenizers`' AddedVocabulary finds them: those
// not normalized in the raw text, the others in each normalized piece (leftmost, longest first);
// single_word, lstrip and rstrip as there.
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
    std::string content;  // what is matched (a normalized token: its normalized form)
    int32_t id = -1;
    bool single_word = false;  // matched only where no word character touches it
    bool lstrip = false;       // takes the whitespace before it
    bool rstrip = false;       // and after it
  };
  // A piece of text: an added token's (id >= 0) or text between them (id -1).
  using Piece = std::pair<std::string_view, int32_t>;

  // Adds a token (`normalized`: matched in normalized pieces) of `content` (its id by content).
  void add(const std::string& content, Token token, bool normalized);
  // Orders each pass longest first (ties in the order added); call once all are added.
  void finish();

  // Cuts the raw `text` at the tokens that are not normalized, appending the pieces in order.
  void split_raw(std::string_view text, std::vector<Piece>& out) const {
    split_at(text, raw_, out);
  }
  // Cuts a normalized piece at the normalized tokens.
  void split_normalized(std::string_view text, std::vector<Piece>& out) const {
    split_at(text, normalized_, out);
  }
  bool has_normalized() const { return !normalized_.empty(); }

  // The id of an added token's content.
  const std::unordered_map<std::string, int32_t>& ids() const { return ids_; }

 private:
  static void split_at(std::string_view text, const std::vector<Token>& list,
                       std::vector<Piece>& out);

  std::vector<Token> raw_, normalized_;
  std::unordered_map<std::string, int32_t> ids_;
};

}  // namespace trainer::tokenizers
