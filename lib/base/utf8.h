// UTF-8, the one validator of the tree: well-formed sequences as Unicode defines them (no overlong
// forms, surrogates or code points past U+10FFFF), the maximal subparts Python's
// errors="replace" turns into U+FFFD, and code points in and out.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace trainer::base {

// At text[at]: whether a well-formed sequence starts there, and its length; when none does, the
// length of its maximal subpart (the longest start of a well-formed sequence, at least 1 byte).
struct Utf8Sequence {
  bool valid;
  size_t length;
};
Utf8Sequence utf8_at(std::string_view text, size_t at);

// The length (1 to 4) of the well-formed UTF-8 sequence that starts at text[at], or 0 when the
// bytes there start none: a stray continuation byte, an overlong form, a surrogate, a code point
// past U+10FFFF, or a sequence cut off by the end of the text.
size_t utf8_sequence_length(std::string_view text, size_t at);

// The offset of the first byte that starts no well-formed sequence, or npos when `text` is UTF-8.
size_t first_invalid_utf8(std::string_view text);
inline bool is_valid_utf8(std::string_view text) {
  return first_invalid_utf8(text) == std::string_view::npos;
}

// A copy of `text` in which each ill-formed subpart (maximal, as Unicode recommends and Python's
// errors="replace" does) is U+FFFD; `text` itself when it is valid.
std::string replace_invalid_utf8(std::string_view text);

// The code point at text[at] of valid UTF-8, and its length in `length`.
inline char32_t decode_utf8(std::string_view text, size_t at, size_t& length) {
  const auto b = static_cast<unsigned char>(text[at]);
  if (b < 0x80) {
    length = 1;
    return b;
  }
  length = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
  char32_t c = b & (0x7F >> length);
  for (size_t k = 1; k < length; ++k)
    c = (c << 6) | (static_cast<unsigned char>(text[at + k]) & 0x3F);
  return c;
}

// Appends code point `c` (at most U+10FFFF) as UTF-8.
void append_utf8(std::string& out, char32_t c);

}  // namespace trainer::base
