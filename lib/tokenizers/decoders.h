// Decoders of tokenizer.json: how tokens become text again (ByteLevel: each character that stands
// for a byte is that byte; none: the tokens joined by spaces).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace trainer::tokenizers {

class Decoder {
 public:
  // Makes this the ByteLevel decoder.
  void set_byte_level();
  // The bytes of `tokens` (not yet checked as UTF-8).
  std::string decode(const std::vector<std::string_view>& tokens) const;

 private:
  bool byte_level_ = false;
  std::unordered_map<char32_t, uint8_t> char_bytes_;
};

}  // namespace trainer::tokenizers
