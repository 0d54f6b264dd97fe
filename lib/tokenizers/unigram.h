// Unigram, SentencePiece's model in tokenizer.json: the pieces and their scores, the best
// segmentation of a word by Viterbi, unknown runs fused (and their bytes' tokens under
// byte_fallback), with the ids `tokenizers`' Unigram gives.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/tokenizers/bpe.h"

namespace trainer::tokenizers {

class Unigram {
 public:
  Vocab vocab;                 // piece -> id (a piece listed twice: its last id)
  std::vector<double> scores;  // by id
  std::optional<int32_t> unk_id;
  bool byte_fallback = false;

  // Adds the next piece (its id is its place in the list).
  void add(std::string piece, double score);
  // Builds the trie of the pieces and the unknown token's score; call once all are added.
  void finish();

  // Appends the ids of one word. Throws InputError for a character no piece covers when the model
  // has no unk_id (`where` names the tokenizer).
  void tokenize(std::string_view word, std::vector<int32_t>& out, const std::string& where) const;

 private:
  // The trie: (node << 8 | byte) -> (child node, id of the piece that ends there or -1).
  MergeTable trie_;
  int32_t nodes_ = 1;
  double unk_score_ = 0;
  std::array<int32_t, 256> fallback_ids_{};
};

}  // namespace trainer::tokenizers
