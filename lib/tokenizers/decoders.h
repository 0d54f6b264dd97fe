// Decoders of tokenizer.json: how tokens become text again. ByteLevel (each character that stands
// for a byte is that byte), Replace, ByteFallback ("<0xXX>" tokens as their bytes), Fuse, Strip,
// Metaspace, and a Sequence of them; none: the tokens joined by spaces.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/tokenizers/json_reader.h"

namespace trainer::tokenizers {

class Decoder {
 public:
  Decoder();
  Decoder(Decoder&&) noexcept;
  Decoder& operator=(Decoder&&) noexcept;
  ~Decoder();

  // Reads tokenizer.json's "decoder" (not null), refusing what is not built in one line.
  static Decoder from_json(const nlohmann::ordered_json& j, const JsonReader& reader);
  // Transformers' LlamaTokenizer's chain: Replace "▁" -> " ", ByteFallback, Fuse, and (`strip`)
  // Strip one leading space; `byte_level`: ByteLevel alone.
  static Decoder sentencepiece(bool strip);
  static Decoder byte_level();

  // The bytes of `tokens` (not yet checked as UTF-8).
  std::string decode(const std::vector<std::string_view>& tokens) const;

  struct Step;

 private:
  std::vector<std::unique_ptr<Step>> steps_;
  bool present_ = false;  // a decoder was given (none: the tokens joined by spaces)
};

}  // namespace trainer::tokenizers
