// Hugging Face tokenizer.json under ICU: loading (what is not supported is refused in one line),
// the added tokens, the pre-tokenizers (ICU regex, or scanners for GPT-2's and Llama-3's
// patterns), BPE with a per-word cache, the template, the byte-level decoder.
#include "lib/data/tokenizer.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>
#include <queue>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>
#include <unicode/regex.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/utf8.h>
#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"

namespace trainer::data {

namespace {

using json = nlohmann::json;

// GPT-2's split pattern (tokenizers' ByteLevel pre-tokenizer) and Llama-3's (its Split).
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// ---------------------------------------------------------------------------------------------
// UTF-8

// At text[i]: {true, length} for a well-formed sequence, else {false, the length of its maximal
// subpart} (the longest start of a well-formed sequence there, at least 1 byte).
std::pair<bool, size_t> utf8_at(std::string_view text, size_t i) {
  const auto b = static_cast<uint8_t>(text[i]);
  if (b < 0x80) return {true, 1};
  int need = 0;
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
    if (i + k >= text.size()) return {false, k};
    const auto c = static_cast<uint8_t>(text[i + k]);
    if (c < lo || c > hi) return {false, k};
    lo = 0x80, hi = 0xBF;
  }
  return {true, k};
}

bool valid_utf8(std::string_view text) {
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
    auto [ok, n] = utf8_at(text, i);
    if (!ok) return false;
    i += n;
  }
  return true;
}

// The code point at text[i] of valid UTF-8, and its length.
inline UChar32 next_code_point(std::string_view text, size_t i, size_t& length) {
  const auto b = static_cast<uint8_t>(text[i]);
  if (b < 0x80) {
    length = 1;
    return b;
  }
  UChar32 c;
  int32_t at = static_cast<int32_t>(i);
  U8_NEXT_UNSAFE(text.data(), at, c);
  length = static_cast<size_t>(at) - i;
  return c;
}

void append_utf8(std::string& out, UChar32 c) {
  char buffer[4];
  int32_t n = 0;
  U8_APPEND_UNSAFE(buffer, n, c);
  out.append(buffer, static_cast<size_t>(n));
}

// ---------------------------------------------------------------------------------------------
// Unicode classes (ICU): what Oniguruma's \p{L}, \p{N} and \s are in the split patterns.

enum Class : uint8_t { kLetter, kNumber, kSpace, kOther };

Class icu_class(UChar32 c) {
  if (u_isUWhiteSpace(c)) return kSpace;  // the White_Space property: Oniguruma's \s
  const uint32_t mask = U_GET_GC_MASK(c);
  if (mask & U_GC_L_MASK) return kLetter;
  if (mask & U_GC_N_MASK) return kNumber;
  return kOther;
}

const std::array<Class, 128> kAsciiClasses = [] {
  std::array<Class, 128> t{};
  for (UChar32 c = 0; c < 128; ++c) t[c] = icu_class(c);
  return t;
}();

struct Char {
  UChar32 cp;
  size_t length;
  Class cls;
};

inline Char char_at(std::string_view s, size_t i) {
  const auto b = static_cast<uint8_t>(s[i]);
  if (b < 0x80) return {b, 1, kAsciiClasses[b]};
  size_t length;
  const UChar32 c = next_code_point(s, i, length);
  return {c, length, icu_class(c)};
}

// The end of the run of characters of class `cls` that starts at s[i] (i itself when none).
inline size_t run_end(std::string_view s, size_t i, Class cls) {
  while (i < s.size()) {
    const Char c = char_at(s, i);
    if (c.cls != cls) break;
    i += c.length;
  }
  return i;
}

// ---------------------------------------------------------------------------------------------
// Splitting: spans of a piece, in bytes.

struct Span {
  size_t begin, end;
};

// The contraction ('s|'t|'re|'ve|'m|'ll|'d) after the apostrophe at s[i - 1]: its length in
// bytes, or 0. Case-insensitively as Oniguruma folds: S, and ſ (U+017F), whose fold is s.
size_t contraction(std::string_view s, size_t i, bool ignore_case) {
  if (i >= s.size()) return 0;
  auto at = [&](size_t k) -> char {
    if (k >= s.size()) return 0;
    const char c = s[k];
    return ignore_case && c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  };
  const char c = at(i);
  if (c == 's' || c == 't' || c == 'm' || c == 'd') return 1;
  if ((c == 'r' || c == 'v') && at(i + 1) == 'e') return 2;
  if (c == 'l' && at(i + 1) == 'l') return 2;
  if (ignore_case && c == '\xC5' && at(i + 1) == '\xBF') return 2;  // ſ
  return 0;
}

// A run of whitespace from s[i] (Oniguruma's \s+(?!\S)|\s+): all of it at the end of the piece,
// else all but its last character (which goes with what follows), else its one character.
size_t whitespace_end(std::string_view s, size_t i) {
  size_t last = i, end = i, count = 0;
  while (end < s.size()) {
    const Char c = char_at(s, end);
    if (c.cls != kSpace) break;
    last = end;
    end += c.length;
    ++count;
  }
  if (end == s.size() || count == 1) return end;
  return last;
}

// GPT-2's pattern: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
void split_gpt2(std::string_view s, std::vector<Span>& out) {
  size_t i = 0;
  while (i < s.size()) {
    size_t end;
    if (s[i] == '\'' && contraction(s, i + 1, false) > 0) {
      end = i + 1 + contraction(s, i + 1, false);
    } else {
      Char c = char_at(s, i);
      size_t from = i;
      if (s[i] == ' ' && i + 1 < s.size()) {
        const Char next = char_at(s, i + 1);
        if (next.cls != kSpace) c = next, from = i + 1;
      }
      end = c.cls == kSpace ? whitespace_end(s, i) : run_end(s, from, c.cls);
    }
    out.push_back({i, end});
    i = end;
  }
}

// Llama-3's pattern: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
// ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
void split_llama3(std::string_view s, std::vector<Span>& out) {
  size_t i = 0;
  while (i < s.size()) {
    size_t end = 0;
    const Char c = char_at(s, i);
    if (s[i] == '\'' && contraction(s, i + 1, true) > 0) {
      end = i + 1 + contraction(s, i + 1, true);
    } else if (c.cls == kLetter) {
      end = run_end(s, i, kLetter);
    } else if (c.cls != kNumber && c.cp != '\r' && c.cp != '\n' && i + c.length < s.size() &&
               char_at(s, i + c.length).cls == kLetter) {
      end = run_end(s, i + c.length, kLetter);
    } else if (c.cls == kNumber) {
      end = i + c.length;
      for (int k = 1; k < 3 && end < s.size(); ++k) {
        const Char d = char_at(s, end);
        if (d.cls != kNumber) break;
        end += d.length;
      }
    } else if (c.cls == kOther ||
               (s[i] == ' ' && i + 1 < s.size() && char_at(s, i + 1).cls == kOther)) {
      end = run_end(s, c.cls == kOther ? i : i + 1, kOther);
      while (end < s.size() && (s[end] == '\r' || s[end] == '\n')) ++end;
    } else {  // whitespace: up to its last line break, else as GPT-2's
      size_t run = i, last_break = std::string_view::npos;
      while (run < s.size()) {
        const Char d = char_at(s, run);
        if (d.cls != kSpace) break;
        if (d.cp == '\r' || d.cp == '\n') last_break = run;
        run += d.length;
      }
      end = last_break != std::string_view::npos ? last_break + 1 : whitespace_end(s, i);
    }
    out.push_back({i, end});
    i = end;
  }
}

// Oniguruma's pattern for ICU: \s and \S as the White_Space property.
std::string icu_pattern(std::string_view pattern, const std::string& where) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '\\' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    const char c = pattern[++i];
    if (c == 's') {
      out += "\\p{White_Space}";
    } else if (c == 'S') {
      out += "\\P{White_Space}";
    } else if (c == 'h' || c == 'H') {
      throw InputError(fmt::format(
          "{}: the pattern's \\{} (Oniguruma's hexadecimal digit) is not supported", where, c));
    } else {
      out += '\\';
      out += c;
    }
  }
  return out;
}

enum class Scanner { kNone, kGpt2, kLlama3 };

// How long one search of a Split pattern may run, in ICU's units (about a millisecond each on
// these machines): a nested repetition ("(a+)+$") backtracks without end on a line of 40 letters,
// where `tokenizers` (Oniguruma's retry limit) gives up too.
constexpr int32_t kRegexTimeLimit = 200;

// One way of cutting a piece: a scanner, an ICU regex, or a literal string.
struct Splitter {
  Scanner scanner = Scanner::kNone;
  std::unique_ptr<icu::RegexPattern> regex;
  std::string literal;  // when neither
  std::string pattern;  // the regex as tokenizer.json gives it, and the file, for messages
  std::string where;

  void matches(std::string_view s, std::vector<Span>& out) const {
    if (scanner == Scanner::kGpt2) return split_gpt2(s, out);
    if (scanner == Scanner::kLlama3) return split_llama3(s, out);
    if (!regex) {
      if (literal.empty()) {
        // `tokenizers` compiles a String pattern as the escaped regex: "" is the empty regex,
        // which matches between every two characters (below).
        for (size_t i = 0; i < s.size();) {
          size_t length;
          next_code_point(s, i, length);
          i += length;
          out.push_back({i, i});
        }
        return;
      }
      for (size_t at = s.find(literal); at != std::string_view::npos;
           at = s.find(literal, at + literal.size())) {
        out.push_back({at, at + literal.size()});
      }
      return;
    }
    // UTF-16 for ICU, with each unit's byte offset.
    icu::UnicodeString text;
    std::vector<size_t> offsets;
    offsets.reserve(s.size() + 1);
    for (size_t i = 0; i < s.size();) {
      size_t length;
      const UChar32 c = next_code_point(s, i, length);
      text.append(c);
      offsets.push_back(i);
      if (c > 0xFFFF) offsets.push_back(i);
      i += length;
    }
    offsets.push_back(s.size());
    UErrorCode status = U_ZERO_ERROR;
    std::unique_ptr<icu::RegexMatcher> matcher(regex->matcher(text, status));
    if (U_SUCCESS(status)) matcher->setTimeLimit(kRegexTimeLimit, status);
    while (U_SUCCESS(status) && matcher->find(status)) {
      const int32_t b = matcher->start(status), e = matcher->end(status);
      if (U_FAILURE(status)) break;
      // An empty match cuts the text where it is, as in `tokenizers` (an empty piece is
      // dropped): "" or "x*" splits between characters that match nothing else.
      out.push_back({offsets[b], offsets[e]});
    }
    if (status == U_REGEX_TIME_OUT || status == U_REGEX_STACK_OVERFLOW) {
      throw InputError(fmt::format(
          "{}: the pre_tokenizer's Split pattern {} backtracks without end on the text {} (ICU "
          "gave up: {}; tokenizers' Oniguruma gives up on such patterns too, past its retry "
          "limit); simplify the pattern",
          where, base::shown_text(pattern, 60), base::shown_text(s, 40), u_errorName(status)));
    }
    if (U_FAILURE(status)) {
      throw std::runtime_error(fmt::format("ICU regex failed: {}", u_errorName(status)));
    }
  }
};

// ---------------------------------------------------------------------------------------------
// SHA-256 (FIPS 180-4), for the fingerprint.

std::string sha256_hex(std::string_view data) {
  static constexpr uint32_t k[64] = {
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
      0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
      0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
      0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
      0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
      0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
      0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
      0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
      0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
      0xc67178f2};
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::string message(data);
  const uint64_t bits = static_cast<uint64_t>(data.size()) * 8;
  message += '\x80';
  while (message.size() % 64 != 56) message += '\0';
  for (int i = 7; i >= 0; --i) message += static_cast<char>((bits >> (8 * i)) & 0xFF);
  auto rotr = [](uint32_t x, int n) { return (x >> n) | (x << (32 - n)); };
  for (size_t block = 0; block < message.size(); block += 64) {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i) {
      const auto* p = reinterpret_cast<const uint8_t*>(message.data() + block + 4 * i);
      w[i] = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
    }
    for (int i = 16; i < 64; ++i) {
      const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; ++i) {
      const uint32_t t1 =
          hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
      const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      hh = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
  }
  std::string hex;
  for (uint32_t v : h) hex += fmt::format("{:08x}", v);
  return hex;
}

// GPT-2's bytes_to_unicode(): the printable character that stands for each byte.
std::array<UChar32, 256> byte_chars() {
  std::array<UChar32, 256> chars{};
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    chars[b] = printable ? b : 256 + extra++;
  }
  return chars;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

struct Tokenizer::Impl {
  std::string path, config_path;
  std::string json_bytes, config_bytes;
  bool has_config = false;
  std::string fingerprint;

  // The model.
  std::unordered_map<std::string, int32_t> vocab;
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges;  // (a, b) -> (rank, a+b)
  bool ignore_merges = false;
  std::optional<int32_t> unk_id;
  bool fuse_unk = false;

  // Added tokens, longest first, in the two passes tokenizers makes.
  struct Added {
    std::string content;
    int32_t id;
  };
  std::vector<Added> added_raw, added_normalized;
  std::unordered_map<std::string, int32_t> added_ids;

  // Pre-tokenizer stages; the last may be byte-level.
  struct Stage {
    Splitter splitter;
    bool split = true;          // false: the stage does not cut (ByteLevel without use_regex)
    bool removed = false;       // Removed: the matches are dropped, not kept as pieces
    bool prefix_space = false;  // ByteLevel's add_prefix_space
  };
  std::vector<Stage> stages;
  bool byte_level = false;
  std::array<int32_t, 256> byte_ids{};  // vocab id of each byte's character (-1: none)

  // Template (single): -1 for $A, else the ids of a special token.
  std::vector<std::vector<int32_t>> template_parts;
  bool has_template = false;

  bool byte_level_decoder = false;
  std::vector<std::string> tokens;  // by id ("" where none)
  std::vector<bool> has_token, special;
  std::unordered_map<UChar32, uint8_t> char_bytes;

  std::optional<int32_t> bos, eos, pad, unk;

  // The per-word cache: direct-mapped (a word's hash picks its slot; a newcomer replaces what
  // was there), allocated on first use.
  struct CacheSlot {
    std::string word;
    std::vector<int32_t> ids;
  };
  mutable std::mutex cache_mutex;
  mutable std::vector<CacheSlot> cache;
  static constexpr size_t kCacheSlots = size_t{1} << 17;
  static constexpr size_t kCachedWordBytes = 64;

  void bpe(std::string_view word, std::vector<int32_t>& out) const;
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  void pre_tokenize(std::string_view piece, size_t stage, std::vector<std::vector<Span>>& spans,
                    std::vector<int32_t>& out) const;
  void encode_text(std::string_view text, std::vector<int32_t>& out) const;
};

namespace {

using Impl = Tokenizer::Impl;

// A component's "type" as messages name it (cut short), or the component's JSON, cut short.
std::string json_type_name(const json& j) {
  if (j.is_object() && j.contains("type") && j["type"].is_string()) {
    return base::shown_text(j["type"].get<std::string>(), 60);
  }
  return base::shown(j);
}

// Loads tokenizer.json's components into `t`, refusing what is not supported in one line.
class Loader {
 public:
  Loader(Impl& t, const std::string& where) : t_(t), where_(where) {}

  [[noreturn]] void refuse(const std::string& what) const {
    throw InputError(fmt::format("{}: {}", where_, what));
  }

  const json& field(const json& j, const char* key, const char* within) const {
    if (!j.is_object() || !j.contains(key)) refuse(fmt::format("{} has no \"{}\"", within, key));
    return j[key];
  }

  std::string string_field(const json& j, const char* key, const char* within) const {
    const json& v = field(j, key, within);
    if (!v.is_string()) refuse(fmt::format("{}'s \"{}\" is not a string", within, key));
    return v.get<std::string>();
  }

  bool flag(const json& j, const char* key, bool fallback) const {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    if (!j[key].is_boolean()) refuse(fmt::format("\"{}\" is not true or false", key));
    return j[key].get<bool>();
  }

  void load(const json& root) {
    if (!root.is_object()) refuse("the file holds no JSON object");
    // tokenizers reads format 1.0 (and a file without a version); another is refused there.
    if (root.contains("version") && root["version"] != "1.0") {
      refuse(fmt::format("version {} is not supported (tokenizers reads \"1.0\")",
                         base::shown(root["version"])));
    }
    for (const char* key : {"truncation", "padding"}) {
      if (root.contains(key) && !root[key].is_null()) {
        refuse(fmt::format("{} is not supported (it must be null)", key));
      }
    }
    if (root.contains("normalizer") && !root["normalizer"].is_null()) {
      refuse(fmt::format("normalizer {} is not supported (it must be null)",
                         json_type_name(root["normalizer"])));
    }
    model(field(root, "model", "the file"));
    if (root.contains("added_tokens")) added_tokens(root["added_tokens"]);
    if (root.contains("pre_tokenizer") && !root["pre_tokenizer"].is_null()) {
      pre_tokenizer(root["pre_tokenizer"], true);
    }
    if (root.contains("post_processor") && !root["post_processor"].is_null()) {
      post_processor(root["post_processor"], true);
    }
    if (root.contains("decoder") && !root["decoder"].is_null()) decoder(root["decoder"]);
    finish();
  }

 private:
  void model(const json& m) {
    if (!m.is_object()) refuse("model is not a JSON object");
    const std::string type = m.contains("type") ? json_type_name(m) : "BPE";
    if (type != "BPE") refuse(fmt::format("model type {} is not supported (only BPE)", type));
    if (m.contains("dropout") && !m["dropout"].is_null() &&
        !(m["dropout"].is_number() && m["dropout"].get<double>() == 0)) {
      refuse(fmt::format("BPE dropout {} is not supported (it must be null)",
                         base::shown(m["dropout"])));
    }
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      if (m.contains(key) && !m[key].is_null() && m[key] != "") {
        refuse(
            fmt::format("BPE {} {} is not supported (it must be null)", key, base::shown(m[key])));
      }
    }
    if (flag(m, "byte_fallback", false)) refuse("BPE byte_fallback is not supported");
    t_.ignore_merges = flag(m, "ignore_merges", false);
    t_.fuse_unk = flag(m, "fuse_unk", false);
    const json& vocab = field(m, "vocab", "model");
    if (!vocab.is_object()) refuse("model's vocab is not a JSON object");
    t_.vocab.reserve(vocab.size());
    for (const auto& [token, id] : vocab.items()) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
        refuse(fmt::format("model's vocab gives {} the id {} (ids are integers >= 0)",
                           base::shown_text(token), base::shown(id)));
      }
      t_.vocab.emplace(token, id.get<int32_t>());
    }
    const json& merges = field(m, "merges", "model");
    if (!merges.is_array()) refuse("model's merges is not a JSON array");
    t_.merges.reserve(merges.size());
    int32_t rank = 0;
    for (const json& merge : merges) {
      std::string a, b;
      if (merge.is_string()) {
        const std::string text = merge.get<std::string>();
        const size_t space = text.find(' ');
        if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
          refuse(fmt::format("merge {} of model's merges is not two tokens with a space between",
                             base::shown_text(text)));
        }
        a = text.substr(0, space), b = text.substr(space + 1);
      } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
                 merge[1].is_string()) {
        a = merge[0].get<std::string>(), b = merge[1].get<std::string>();
      } else {
        refuse(fmt::format("merge {} of model's merges is not \"a b\" or [\"a\", \"b\"]",
                           base::shown(merge)));
      }
      auto ia = t_.vocab.find(a), ib = t_.vocab.find(b), iab = t_.vocab.find(a + b);
      const std::string missing = ia == t_.vocab.end()    ? a
                                  : ib == t_.vocab.end()  ? b
                                  : iab == t_.vocab.end() ? a + b
                                                          : "";
      if (ia == t_.vocab.end() || ib == t_.vocab.end() || iab == t_.vocab.end()) {
        refuse(fmt::format("merge {} of model's merges: {} is not in the vocab",
                           base::shown_text(a + " " + b), base::shown_text(missing)));
      }
      const uint64_t key = (uint64_t(uint32_t(ia->second)) << 32) | uint32_t(ib->second);
      // A pair given twice: the last one counts, as in tokenizers' map of merges.
      t_.merges.insert_or_assign(key, std::pair{rank++, iab->second});
    }
    if (m.contains("unk_token") && !m["unk_token"].is_null()) {
      if (!m["unk_token"].is_string()) refuse("model's unk_token is not a string");
      auto it = t_.vocab.find(m["unk_token"].get<std::string>());
      if (it == t_.vocab.end()) {
        refuse(
            fmt::format("model's unk_token {} is not in the vocab", base::shown(m["unk_token"])));
      }
      t_.unk_id = it->second;
    }
  }

  void added_tokens(const json& list) {
    if (!list.is_array()) refuse("added_tokens is not a JSON array");
    for (const json& token : list) {
      const std::string content = string_field(token, "content", "an added token");
      const json& id = field(token, "id", "an added token");
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
        refuse(fmt::format("added token {} has the id {} (ids are integers >= 0)",
                           base::shown_text(content), base::shown(id)));
      }
      for (const char* key : {"single_word", "lstrip", "rstrip"}) {
        if (flag(token, key, false)) {
          refuse(fmt::format("added token {}: {} true is not supported", base::shown_text(content),
                             key));
        }
      }
      const int32_t i = id.get<int32_t>();
      added_.push_back({content, i, flag(token, "special", false)});
      if (content.empty()) continue;
      (flag(token, "normalized", true) ? t_.added_normalized : t_.added_raw)
          .push_back({content, i});
      t_.added_ids[content] = i;
    }
    for (auto* list : {&t_.added_raw, &t_.added_normalized}) {
      std::stable_sort(list->begin(), list->end(), [](const Impl::Added& a, const Impl::Added& b) {
        return a.content.size() > b.content.size();
      });
    }
  }

  Splitter splitter_of(std::string_view pattern, bool is_regex) {
    Splitter s;
    if (!is_regex) {
      s.literal = std::string(pattern);
      return s;
    }
    if (options_fast && pattern == kGpt2Pattern) {
      s.scanner = Scanner::kGpt2;
      return s;
    }
    if (options_fast && pattern == kLlama3Pattern) {
      s.scanner = Scanner::kLlama3;
      return s;
    }
    s.pattern = std::string(pattern);
    s.where = where_;
    const std::string translated = icu_pattern(pattern, where_);
    UErrorCode status = U_ZERO_ERROR;
    UParseError error;
    s.regex.reset(
        icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(translated), 0, error, status));
    if (U_FAILURE(status)) {
      refuse(fmt::format("the pre_tokenizer's pattern {} does not compile under ICU ({} at {})",
                         base::shown_text(std::string(pattern), 60), u_errorName(status),
                         error.offset));
    }
    return s;
  }

  void pre_tokenizer(const json& p, bool top) {
    const std::string type = json_type_name(p);
    if (type == "Sequence" && top) {
      const json& list = field(p, "pretokenizers", "pre_tokenizer Sequence");
      if (!list.is_array()) refuse("pre_tokenizer Sequence's pretokenizers is not a JSON array");
      for (const json& item : list) pre_tokenizer(item, false);
      return;
    }
    if (t_.byte_level) refuse("a pre_tokenizer after ByteLevel is not supported");
    Impl::Stage stage;
    if (type == "ByteLevel") {
      t_.byte_level = true;
      stage.prefix_space = flag(p, "add_prefix_space", true);
      stage.split = flag(p, "use_regex", true);
      if (stage.split) stage.splitter = splitter_of(kGpt2Pattern, true);
    } else if (type == "Split") {
      const json& pattern = field(p, "pattern", "pre_tokenizer Split");
      const bool regex = pattern.is_object() && pattern.contains("Regex");
      if (!(regex || (pattern.is_object() && pattern.contains("String"))) ||
          !pattern[regex ? "Regex" : "String"].is_string()) {
        refuse("pre_tokenizer Split's pattern is not {\"Regex\": ...} or {\"String\": ...}");
      }
      const std::string behavior = string_field(p, "behavior", "pre_tokenizer Split");
      if (behavior != "Isolated" && behavior != "Removed") {
        refuse(fmt::format("pre_tokenizer Split behavior {} is not supported (Isolated, Removed)",
                           behavior));
      }
      if (flag(p, "invert", false)) refuse("pre_tokenizer Split with invert true is not supported");
      stage.removed = behavior == "Removed";
      stage.splitter = splitter_of(pattern[regex ? "Regex" : "String"].get<std::string>(), regex);
    } else {
      refuse(fmt::format(
          "pre_tokenizer {} is not supported (ByteLevel, Split, or a Sequence of them)", type));
    }
    t_.stages.push_back(std::move(stage));
  }

  void post_processor(const json& p, bool top) {
    const std::string type = json_type_name(p);
    if (type == "Sequence" && top) {
      const json& list = field(p, "processors", "post_processor Sequence");
      if (!list.is_array()) refuse("post_processor Sequence's processors is not a JSON array");
      for (const json& item : list) post_processor(item, false);
      return;
    }
    if (type == "ByteLevel") return;  // offsets only
    if (type != "TemplateProcessing") {
      refuse(fmt::format(
          "post_processor {} is not supported (ByteLevel, TemplateProcessing, or a Sequence)",
          type));
    }
    if (t_.has_template) refuse("a second post_processor TemplateProcessing is not supported");
    t_.has_template = true;
    const json& single = field(p, "single", "post_processor TemplateProcessing");
    const json& specials = field(p, "special_tokens", "post_processor TemplateProcessing");
    if (!single.is_array()) refuse("post_processor TemplateProcessing's single is not an array");
    for (const json& piece : single) {
      if (piece.contains("Sequence")) {
        if (piece["Sequence"].value("id", "") != "A") {
          refuse("post_processor TemplateProcessing's single names a sequence other than $A");
        }
        t_.template_parts.push_back({-1});
      } else if (piece.contains("SpecialToken")) {
        const std::string name = piece["SpecialToken"].value("id", "");
        if (!specials.contains(name) || !specials[name].contains("ids") ||
            !specials[name]["ids"].is_array()) {
          refuse(fmt::format("post_processor TemplateProcessing: special token {} has no ids",
                             base::shown_text(name)));
        }
        std::vector<int32_t> ids;
        for (const json& id : specials[name]["ids"]) {
          if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
            refuse(fmt::format("post_processor TemplateProcessing: special token {} has id {}",
                               base::shown_text(name), base::shown(id)));
          }
          ids.push_back(id.get<int32_t>());
          template_tokens_.emplace_back(name, ids.back());
        }
        t_.template_parts.push_back(std::move(ids));
      } else {
        refuse(fmt::format("post_processor TemplateProcessing: piece {} is not understood",
                           base::shown(piece)));
      }
    }
  }

  void decoder(const json& d) {
    const std::string type = json_type_name(d);
    if (type != "ByteLevel") refuse(fmt::format("decoder {} is not supported (ByteLevel)", type));
    t_.byte_level_decoder = true;
  }

  void finish() {
    int64_t size = 0;
    for (const auto& [token, id] : t_.vocab) size = std::max<int64_t>(size, int64_t{id} + 1);
    for (const auto& a : added_) size = std::max<int64_t>(size, int64_t{a.id} + 1);
    t_.tokens.assign(size, "");
    t_.has_token.assign(size, false);
    t_.special.assign(size, false);
    for (const auto& [name, id] : template_tokens_) {
      if (id >= size) {
        refuse(fmt::format(
            "post_processor TemplateProcessing: special token {} has id {}, outside the "
            "vocabulary (0..{})",
            base::shown_text(name), id, size - 1));
      }
    }
    for (const auto& [token, id] : t_.vocab) t_.tokens[id] = token, t_.has_token[id] = true;
    for (const auto& a : added_) {
      t_.tokens[a.id] = a.content, t_.has_token[a.id] = true, t_.special[a.id] = a.special;
    }
    const std::array<UChar32, 256> chars = byte_chars();
    for (int b = 0; b < 256; ++b) {
      t_.char_bytes[chars[b]] = static_cast<uint8_t>(b);
      std::string text;
      append_utf8(text, chars[b]);
      auto it = t_.vocab.find(text);
      t_.byte_ids[b] = it == t_.vocab.end() ? -1 : it->second;
    }
  }

  struct AddedToken {
    std::string content;
    int32_t id;
    bool special;
  };

  Impl& t_;
  std::string where_;
  std::vector<AddedToken> added_;
  std::vector<std::pair<std::string, int32_t>> template_tokens_;  // the template's ids, by name

 public:
  bool options_fast = true;
};

// The id of a special token named in tokenizer_config.json (a string or {"content": ...}).
std::optional<int32_t> config_token(const json& config, const char* key, const Impl& t,
                                    const std::string& where) {
  if (!config.contains(key) || config[key].is_null()) return std::nullopt;
  const json& v = config[key];
  std::string token;
  if (v.is_string()) {
    token = v.get<std::string>();
  } else if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    token = v["content"].get<std::string>();
  } else {
    throw InputError(fmt::format("{}: {} is not a string or {{\"content\": ...}}", where, key));
  }
  if (auto it = t.added_ids.find(token); it != t.added_ids.end()) return it->second;
  if (auto it = t.vocab.find(token); it != t.vocab.end()) return it->second;
  throw InputError(fmt::format("{}: {} {} is not a token of the tokenizer", where, key,
                               base::shown_text(token)));
}

// Cuts `text` at the added tokens of `list` (leftmost, longest first), appending the pieces:
// {text, -1} or {token, id}.
void split_added(std::string_view text, const std::vector<Impl::Added>& list,
                 std::vector<std::pair<std::string_view, int32_t>>& out) {
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

void Impl::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id, prev, next;
    bool gone;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  // The first symbols: each byte (byte-level) or each character; what is not in the vocab is the
  // unknown token (fused when fuse_unk) or nothing, as tokenizers' BPE does.
  int32_t pending_unk = -1;
  auto add = [&](int32_t id) {
    const auto n = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, n - 1, -1, false});
    if (n > 0) symbols[n - 1].next = n;
  };
  for (size_t i = 0; i < word.size();) {
    int32_t id = -1;
    size_t length = 1;
    if (byte_level) {
      id = byte_ids[static_cast<uint8_t>(word[i])];
    } else {
      next_code_point(word, i, length);
      auto it = vocab.find(std::string(word.substr(i, length)));
      if (it != vocab.end()) id = it->second;
    }
    i += length;
    if (id >= 0) {
      if (pending_unk >= 0) add(pending_unk), pending_unk = -1;
      add(id);
    } else if (unk_id) {
      if (pending_unk >= 0 && !fuse_unk) add(pending_unk);
      pending_unk = *unk_id;
    }
  }
  if (pending_unk >= 0) add(pending_unk);

  struct Candidate {
    int32_t rank, pos, id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  auto pair_key = [](int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto push = [&](int32_t pos) {
    const int32_t next = symbols[pos].next;
    if (next < 0) return;
    auto it = merges.find(pair_key(symbols[pos].id, symbols[next].id));
    if (it != merges.end()) queue.push({it->second.first, pos, it->second.second});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) push(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& s = symbols[top.pos];
    if (s.gone || s.next < 0) continue;
    auto it = merges.find(pair_key(s.id, symbols[s.next].id));
    if (it == merges.end() || it->second.second != top.id || it->second.first != top.rank) {
      continue;  // this pair changed since
    }
    Symbol& right = symbols[s.next];
    right.gone = true;
    s.id = top.id;
    s.next = right.next;
    if (s.next >= 0) symbols[s.next].prev = top.pos;
    if (s.prev >= 0) push(s.prev);
    push(top.pos);
  }
  for (const Symbol& s : symbols) {
    if (!s.gone) out.push_back(s.id);
  }
}

// The ids of one word (ignore_merges: the word's own id when the vocab has it), through the cache.
void Impl::bpe(std::string_view word, std::vector<int32_t>& out) const {
  if (word.size() == 1 && byte_level && byte_ids[static_cast<uint8_t>(word[0])] >= 0) {
    out.push_back(byte_ids[static_cast<uint8_t>(word[0])]);
    return;
  }
  const bool cached = word.size() <= kCachedWordBytes;
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a
  for (char c : word) hash = (hash ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  const size_t slot = (hash ^ (hash >> 29)) & (kCacheSlots - 1);
  if (cached) {
    std::lock_guard<std::mutex> lock(cache_mutex);
    if (cache.empty()) cache.resize(kCacheSlots);
    const CacheSlot& entry = cache[slot];
    if (!entry.ids.empty() && entry.word == word) {
      out.insert(out.end(), entry.ids.begin(), entry.ids.end());
      return;
    }
  }
  const size_t start = out.size();
  std::string token;
  if (ignore_merges) {
    if (byte_level) {
      static const std::array<UChar32, 256> chars = byte_chars();
      for (char b : word) append_utf8(token, chars[static_cast<uint8_t>(b)]);
    } else {
      token = std::string(word);
    }
  }
  auto whole = ignore_merges ? vocab.find(token) : vocab.end();
  if (whole != vocab.end()) {
    out.push_back(whole->second);
  } else {
    merge_word(word, out);
  }
  if (cached && out.size() > start) {
    std::lock_guard<std::mutex> lock(cache_mutex);
    CacheSlot& entry = cache[slot];
    entry.word.assign(word);
    entry.ids.assign(out.begin() + static_cast<std::ptrdiff_t>(start), out.end());
  }
}

void Impl::pre_tokenize(std::string_view piece, size_t k, std::vector<std::vector<Span>>& spans,
                        std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (k == stages.size()) return bpe(piece, out);
  const Stage& stage = stages[k];
  std::string prefixed;
  if (stage.prefix_space && piece[0] != ' ') {
    prefixed = " " + std::string(piece);
    piece = prefixed;
  }
  if (!stage.split) return pre_tokenize(piece, k + 1, spans, out);
  std::vector<Span>& mine = spans[k];
  mine.clear();
  stage.splitter.matches(piece, mine);
  // Isolated: the matches and what lies between them; Removed: only what lies between.
  size_t at = 0;
  const size_t count = mine.size();
  for (size_t m = 0; m < count; ++m) {
    const Span span = spans[k][m];  // deeper stages reuse their own vectors, not this one
    if (span.begin > at) pre_tokenize(piece.substr(at, span.begin - at), k + 1, spans, out);
    if (!stage.removed) {
      pre_tokenize(piece.substr(span.begin, span.end - span.begin), k + 1, spans, out);
    }
    at = span.end;
  }
  if (at < piece.size()) pre_tokenize(piece.substr(at), k + 1, spans, out);
}

void Impl::encode_text(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<std::pair<std::string_view, int32_t>> first, pieces;
  split_added(text, added_raw, first);
  for (const auto& [piece, id] : first) {
    if (id >= 0) {
      pieces.push_back({piece, id});
    } else {
      split_added(piece, added_normalized, pieces);
    }
  }
  std::vector<std::vector<Span>> spans(stages.size());
  for (const auto& [piece, id] : pieces) {
    if (id >= 0) {
      out.push_back(id);
    } else {
      pre_tokenize(piece, 0, spans, out);
    }
  }
}

// ---------------------------------------------------------------------------------------------

std::string replace_invalid_utf8(std::string_view text) {
  if (valid_utf8(text)) return std::string(text);
  std::string out;
  out.reserve(text.size() + 16);
  for (size_t i = 0; i < text.size();) {
    auto [ok, n] = utf8_at(text, i);
    if (ok) {
      out.append(text.data() + i, n);
    } else {
      out += "\xEF\xBF\xBD";
    }
    i += n;
  }
  return out;
}

Tokenizer Tokenizer::load(const std::string& path) { return load(path, Options{}); }

Tokenizer Tokenizer::load(const std::string& path, const Options& options) {
  auto impl = std::make_shared<Impl>();
  const bool folder = base::is_directory(path);
  impl->path = folder ? base::join_path(path, "tokenizer.json") : path;
  if (folder && !base::is_regular_file(impl->path)) {
    throw InputError(fmt::format("tokenizer folder {} has no tokenizer.json", path));
  }
  if (!folder && !base::is_regular_file(path)) {
    throw InputError(
        fmt::format("tokenizer {} does not exist (give a folder with tokenizer.json, "
                    "or the file)",
                    path));
  }
  impl->json_bytes = base::read_file(impl->path, SIZE_MAX, "tokenizer ");
  const std::string where = fmt::format("tokenizer {}", impl->path);
  const json root = base::parse_json(impl->json_bytes, where);
  Loader loader(*impl, where);
  loader.options_fast = options.fast_split;
  try {
    loader.load(root);
  } catch (const json::exception& e) {  // a value of another type where the loader reads one
    throw InputError(fmt::format("{}: {}", where, base::json_error_text(e)));
  }

  impl->config_path = base::join_path(base::parent_dir(impl->path), "tokenizer_config.json");
  if (base::exists(impl->config_path)) {
    impl->has_config = true;
    impl->config_bytes = base::read_file(impl->config_path, SIZE_MAX, "tokenizer config ");
    const std::string config_where = fmt::format("tokenizer config {}", impl->config_path);
    const json config = base::parse_json(impl->config_bytes, config_where);
    if (!config.is_object()) throw InputError(config_where + ": the file holds no JSON object");
    // AutoTokenizer builds the class tokenizer_config.json names: those below use tokenizer.json
    // as it is; another (BertTokenizer, LlamaTokenizer, ...) may build a different tokenizer
    // than the one read here, and the ids would not be Transformers'.
    if (config.contains("tokenizer_class") && !config["tokenizer_class"].is_null()) {
      const json& named = config["tokenizer_class"];
      const std::vector<std::string> same = {"PreTrainedTokenizerFast", "TokenizersBackend",
                                             "GPT2Tokenizer", "GPT2TokenizerFast"};
      if (!named.is_string() ||
          std::find(same.begin(), same.end(), named.get<std::string>()) == same.end()) {
        throw InputError(
            fmt::format("{}: tokenizer_class {} is not supported (PreTrainedTokenizerFast, "
                        "TokenizersBackend, GPT2Tokenizer, GPT2TokenizerFast: the classes that use "
                        "tokenizer.json as it is)",
                        config_where, base::shown(named)));
      }
    }
    impl->bos = config_token(config, "bos_token", *impl, config_where);
    impl->eos = config_token(config, "eos_token", *impl, config_where);
    impl->pad = config_token(config, "pad_token", *impl, config_where);
    impl->unk = config_token(config, "unk_token", *impl, config_where);
  }
  if (!impl->unk) impl->unk = impl->unk_id;
  impl->fingerprint = sha256_hex(impl->json_bytes + impl->config_bytes);
  Tokenizer t;
  t.impl_ = std::move(impl);
  return t;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::string fixed;
  if (!valid_utf8(text)) {
    fixed = replace_invalid_utf8(text);
    text = fixed;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (!add_special_tokens || !impl_->has_template) {
    impl_->encode_text(text, ids);
    return ids;
  }
  for (const auto& part : impl_->template_parts) {
    if (part.size() == 1 && part[0] == -1) {
      impl_->encode_text(text, ids);
    } else {
      ids.insert(ids.end(), part.begin(), part.end());
    }
  }
  return ids;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  const Impl& t = *impl_;
  std::string bytes;
  bool first = true;
  for (int32_t id : ids) {
    if (id < 0 || id >= static_cast<int64_t>(t.tokens.size()) || !t.has_token[id]) continue;
    if (skip_special_tokens && t.special[id]) continue;
    const std::string& token = t.tokens[id];
    if (!t.byte_level_decoder) {  // no decoder: the tokens joined by spaces
      if (!first) bytes += ' ';
      bytes += token;
      first = false;
      continue;
    }
    // A token whose characters all stand for bytes is those bytes; any other as it is.
    std::string decoded;
    bool all = true;
    for (size_t i = 0; i < token.size() && all;) {
      size_t length;
      auto it = t.char_bytes.find(next_code_point(token, i, length));
      if (it == t.char_bytes.end()) {
        all = false;
      } else {
        decoded += static_cast<char>(it->second);
      }
      i += length;
    }
    bytes += all ? decoded : token;
  }
  return replace_invalid_utf8(bytes);
}

int64_t Tokenizer::vocab_size() const { return static_cast<int64_t>(impl_->tokens.size()); }

std::optional<int32_t> Tokenizer::token_to_id(const std::string& token) const {
  if (auto it = impl_->added_ids.find(token); it != impl_->added_ids.end()) return it->second;
  if (auto it = impl_->vocab.find(token); it != impl_->vocab.end()) return it->second;
  return std::nullopt;
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  if (id < 0 || id >= vocab_size() || !impl_->has_token[id]) return std::nullopt;
  return impl_->tokens[id];
}

std::optional<int32_t> Tokenizer::bos_token_id() const { return impl_->bos; }
std::optional<int32_t> Tokenizer::eos_token_id() const { return impl_->eos; }
std::optional<int32_t> Tokenizer::pad_token_id() const { return impl_->pad; }
std::optional<int32_t> Tokenizer::unk_token_id() const { return impl_->unk; }
const std::string& Tokenizer::fingerprint() const { return impl_->fingerprint; }
const std::string& Tokenizer::path() const { return impl_->path; }

void Tokenizer::save(const std::string& dir) const {
  base::make_directories(dir);
  base::write_file_atomic(base::join_path(dir, "tokenizer.json"), impl_->json_bytes);
  if (impl_->has_config) {
    base::write_file_atomic(base::join_path(dir, "tokenizer_config.json"), impl_->config_bytes);
  }
}

}  // namespace trainer::data
