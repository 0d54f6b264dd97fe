// UTF-8: well-formed sequences, the maximal subparts of ill-formed ones, code points out.
#include "lib/base/utf8.h"

#include <cstdint>
#include <cstring>

namespace trainer::base {

Utf8Sequence utf8_at(std::string_view text, size_t at) {
  const auto b = static_cast<uint8_t>(text[at]);
  if (b < 0x80) return {true, 1};
  int need = 0;
  // The second byte's range rules out overlong forms, surrogates and code points past U+10FFFF.
  uint8_t lo = 0x80, hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    need = 1;
  } else if (b == 0xE0) {
    need = 2, lo = 0xA0;
  } else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) {
    need = 2;
  } else if (b == 0xED) {
    need = 2, hi = 0x9F;
  } else if (b == 0xF0) {
    need = 3, lo = 0x90;
  } else if (b >= 0xF1 && b <= 0xF3) {
    need = 3;
  } else if (b == 0xF4) {
    need = 3, hi = 0x8F;
  } else {
    return {false, 1};
  }
  size_t k = 1;
  for (int j = 0; j < need; ++j, ++k) {
    if (at + k >= text.size()) return {false, k};
    const auto c = static_cast<uint8_t>(text[at + k]);
    if (c < lo || c > hi) return {false, k};
    lo = 0x80, hi = 0xBF;
  }
  return {true, k};
}

size_t utf8_sequence_length(std::string_view text, size_t at) {
  const Utf8Sequence s = utf8_at(text, at);
  return s.valid ? s.length : 0;
}

size_t first_invalid_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    // ASCII eight bytes at a time.
    if (i + 8 <= text.size()) {
      uint64_t word;
      std::memcpy(&word, text.data() + i, 8);
      if ((word & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
    const Utf8Sequence s = utf8_at(text, i);
    if (!s.valid) return i;
    i += s.length;
  }
  return std::string_view::npos;
}

std::string replace_invalid_utf8(std::string_view text) {
  size_t i = first_invalid_utf8(text);
  if (i == std::string_view::npos) return std::string(text);
  std::string out(text.substr(0, i));
  out.reserve(text.size() + 16);
  while (i < text.size()) {
    const Utf8Sequence s = utf8_at(text, i);
    if (s.valid) {
      out.append(text.data() + i, s.length);
    } else {
      out += "\xEF\xBF\xBD";
    }
    i += s.length;
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

}  // namespace trainer::base
