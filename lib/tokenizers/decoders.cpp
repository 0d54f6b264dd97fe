// Decoders: ByteLevel's characters back to bytes, or the tokens joined by spaces.
#include "lib/tokenizers/decoders.h"

#include "lib/base/utf8.h"
#include "lib/tokenizers/pre_tokenizers.h"

namespace trainer::tokenizers {

void Decoder::set_byte_level() {
  byte_level_ = true;
  const std::array<char32_t, 256> chars = bytes_to_unicode();
  for (int b = 0; b < 256; ++b) char_bytes_[chars[b]] = static_cast<uint8_t>(b);
}

std::string Decoder::decode(const std::vector<std::string_view>& tokens) const {
  std::string bytes;
  for (size_t k = 0; k < tokens.size(); ++k) {
    const std::string_view token = tokens[k];
    if (!byte_level_) {  // no decoder: the tokens joined by spaces
      if (k > 0) bytes += ' ';
      bytes += token;
      continue;
    }
    // A token whose characters all stand for bytes is those bytes; any other as it is.
    std::string decoded;
    bool all = true;
    for (size_t i = 0; i < token.size() && all;) {
      size_t length;
      auto it = char_bytes_.find(base::decode_utf8(token, i, length));
      if (it == char_bytes_.end()) {
        all = false;
      } else {
        decoded += static_cast<char>(it->second);
      }
      i += length;
    }
    if (all) {
      bytes += decoded;
    } else {
      bytes += token;
    }
  }
  return bytes;
}

}  // namespace trainer::tokenizers
