// Normalizers of tokenizer.json: Prepend, Replace, NFC/NFD/NFKC/NFKD (Unicode 9.0, as the
// `tokenizers` wheel's tables), Lowercase, Strip, StripAccents, an empty Precompiled, and a
// Sequence of them, each keeping (when asked) where every byte of its output came from in the
// original text, as `tokenizers`' NormalizedString aligns it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/tokenizers/json_reader.h"

namespace trainer::tokenizers {

// The bytes [begin, end) of the original text a byte of normalized text comes from.
struct Align {
  uint32_t begin, end;
};

// Text on its way through the normalizer and the pre-tokenizer: its bytes and, when tracked,
// each byte's Align (empty and untracked: nobody asked where the bytes came from).
struct NormalizedText {
  std::string text;
  std::vector<Align> align;
  bool tracked = false;

  // `text` with each byte aligned to itself (tracked) or not tracked.
  static NormalizedText of(std::string_view text, bool track);
};

// Builds a NormalizedText out of pieces, each aligned to one span of the original.
class TextBuilder {
 public:
  explicit TextBuilder(bool tracked) { out_.tracked = tracked; }
  void add(std::string_view bytes, Align align);
  // Bytes [from, to) of `source` with their own alignment.
  void copy(const NormalizedText& source, size_t from, size_t to);
  // `bytes` with the alignment `align` gives each (nullptr: untracked).
  void copy(std::string_view bytes, const Align* align);
  NormalizedText take() { return std::move(out_); }

 private:
  NormalizedText out_;
};

class Normalizer {
 public:
  Normalizer();
  Normalizer(Normalizer&&) noexcept;
  Normalizer& operator=(Normalizer&&) noexcept;
  ~Normalizer();

  // Reads tokenizer.json's "normalizer" (not null), refusing what is not built in one line.
  static Normalizer from_json(const nlohmann::ordered_json& j, const JsonReader& reader);
  // NFC alone (Transformers' Qwen2Tokenizer) and Replace " " -> "▁" alone (its GemmaTokenizer).
  static Normalizer nfc();
  static Normalizer replace_spaces();

  bool empty() const;
  // `text` normalized, in place.
  void apply(NormalizedText& text) const;
  // The normalized form of `text` (untracked).
  std::string normalize(std::string_view text) const;

  struct Step;

 private:
  std::vector<std::unique_ptr<Step>> steps_;
};

}  // namespace trainer::tokenizers
