// Pre-tokenizers: ICU's Unicode classes, the scanners of GPT-2's and Llama-3's patterns, Split
// patterns under ICU's regular expressions, and the stages run in order.
#include "lib/tokenizers/pre_tokenizers.h"

#include <array>
#include <cstdint>
#include <stdexcept>

#include <fmt/format.h>
#include <unicode/regex.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include "lib/base/errors.h"
#include "lib/base/text.h"
#include "lib/base/utf8.h"

namespace trainer::tokenizers {

namespace {

// The code point at text[i] of valid UTF-8, and its length.
inline UChar32 next_code_point(std::string_view text, size_t i, size_t& length) {
  return static_cast<UChar32>(base::decode_utf8(text, i, length));
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

// How long one search of a Split pattern may run, in ICU's units (about a millisecond each on
// these machines): a nested repetition ("(a+)+$") backtracks without end on a line of 40 letters,
// where `tokenizers` (Oniguruma's retry limit) gives up too.
constexpr int32_t kRegexTimeLimit = 200;

}  // namespace

Splitter::Splitter() = default;
Splitter::Splitter(Splitter&&) noexcept = default;
Splitter& Splitter::operator=(Splitter&&) noexcept = default;
Splitter::~Splitter() = default;

Splitter Splitter::compile(std::string_view pattern, bool is_regex, bool fast,
                           const std::string& where, const std::string& what) {
  Splitter s;
  if (!is_regex) {
    s.literal_ = std::string(pattern);
    return s;
  }
  if (fast && pattern == kGpt2Pattern) {
    s.scanner_ = Scanner::kGpt2;
    return s;
  }
  if (fast && pattern == kLlama3Pattern) {
    s.scanner_ = Scanner::kLlama3;
    return s;
  }
  s.pattern_ = std::string(pattern);
  s.where_ = where;
  s.what_ = what;
  const std::string translated = icu_pattern(pattern, where);
  UErrorCode status = U_ZERO_ERROR;
  UParseError error;
  s.regex_.reset(icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(translated),
                                            UREGEX_MULTILINE, error, status));
  if (U_FAILURE(status)) {
    throw InputError(fmt::format("{}: {} {} does not compile under ICU ({} at {})", where, what,
                                 base::shown_text(std::string(pattern), 60), u_errorName(status),
                                 error.offset));
  }
  return s;
}

void Splitter::matches(std::string_view s, std::vector<Span>& out) const {
  if (scanner_ == Scanner::kGpt2) return split_gpt2(s, out);
  if (scanner_ == Scanner::kLlama3) return split_llama3(s, out);
  if (!regex_) {
    if (literal_.empty()) {
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
    for (size_t at = s.find(literal_); at != std::string_view::npos;
         at = s.find(literal_, at + literal_.size())) {
      out.push_back({at, at + literal_.size()});
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
  std::unique_ptr<icu::RegexMatcher> matcher(regex_->matcher(text, status));
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
        "{}: {} {} backtracks without end on the text {} (ICU "
        "gave up: {}; tokenizers' Oniguruma gives up on such patterns too, past its retry "
        "limit); simplify the pattern",
        where_, what_, base::shown_text(pattern_, 60), base::shown_text(s, 40),
        u_errorName(status)));
  }
  if (U_FAILURE(status)) {
    throw std::runtime_error(fmt::format("ICU regex failed: {}", u_errorName(status)));
  }
}

std::array<char32_t, 256> bytes_to_unicode() {
  std::array<char32_t, 256> chars{};
  char32_t extra = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    chars[b] = printable ? static_cast<char32_t>(b) : 256 + extra++;
  }
  return chars;
}

void PreTokenizer::read(const nlohmann::ordered_json& p, const JsonReader& reader, bool fast) {
  const std::string type = JsonReader::type_name(p);
  if (type == "Sequence") {
    for (const auto& item : reader.sequence(p, "pre_tokenizer", "pretokenizers")) {
      read(item, reader, fast);
    }
    return;
  }
  if (byte_level) reader.refuse("a pre_tokenizer after ByteLevel is not supported");
  PreTokenizerStage stage;
  if (type == "ByteLevel") {
    byte_level = true;
    stage.prefix_space = reader.flag(p, "add_prefix_space", true);
    stage.split = reader.flag(p, "use_regex", true);
    if (stage.split) stage.splitter = Splitter::compile(kGpt2Pattern, true, fast, reader.where());
  } else if (type == "Split") {
    bool regex = false;
    const std::string pattern = reader.pattern(p, "pre_tokenizer Split", regex);
    const std::string behavior = reader.string_field(p, "behavior", "pre_tokenizer Split");
    const std::pair<const char*, SplitBehavior> behaviors[] = {
        {"Isolated", SplitBehavior::kIsolated},
        {"Removed", SplitBehavior::kRemoved},
        {"MergedWithPrevious", SplitBehavior::kMergedWithPrevious},
        {"MergedWithNext", SplitBehavior::kMergedWithNext},
        {"Contiguous", SplitBehavior::kContiguous}};
    bool known = false;
    for (const auto& [name, value] : behaviors) {
      if (behavior == name) stage.behavior = value, known = true;
    }
    if (!known) {
      reader.refuse(
          fmt::format("pre_tokenizer Split behavior {} is not supported (Isolated, Removed, "
                      "MergedWithPrevious, MergedWithNext, Contiguous)",
                      base::shown_text(behavior)));
    }
    if (reader.flag(p, "invert", false)) {
      reader.refuse("pre_tokenizer Split with invert true is not supported");
    }
    stage.splitter = Splitter::compile(pattern, regex, fast, reader.where());
  } else if (type == "Metaspace") {
    stage.metaspace = true;
    stage.replacement = reader.character_field(p, "replacement", "pre_tokenizer Metaspace");
    const std::string scheme =
        p.contains("prepend_scheme") && !p["prepend_scheme"].is_null()
            ? reader.string_field(p, "prepend_scheme", "pre_tokenizer Metaspace")
            : "always";
    if (scheme == "always") {
      stage.prepend = PrependScheme::kAlways;
    } else if (scheme == "first") {
      stage.prepend = PrependScheme::kFirst;
    } else if (scheme == "never") {
      stage.prepend = PrependScheme::kNever;
    } else {
      reader.refuse(
          fmt::format("pre_tokenizer Metaspace's prepend_scheme {} is not always, first or never",
                      base::shown_text(scheme)));
    }
    // The older key: false must agree with a prepend_scheme "never" (tokenizers refuses it else).
    if (!reader.flag(p, "add_prefix_space", true) && stage.prepend != PrependScheme::kNever) {
      reader.refuse(fmt::format(
          "pre_tokenizer Metaspace's add_prefix_space false does not match its prepend_scheme {} "
          "(false means \"never\")",
          scheme));
    }
    stage.split = reader.flag(p, "split", true);
  } else {
    reader.refuse(fmt::format(
        "pre_tokenizer {} is not supported (ByteLevel, Split, Metaspace, or a Sequence of them)",
        type));
  }
  stages.push_back(std::move(stage));
}

void PreTokenizer::add_metaspace(PrependScheme scheme, bool split) {
  PreTokenizerStage stage;
  stage.metaspace = true;
  stage.replacement = "\u2581";
  stage.prepend = scheme;
  stage.split = split;
  stages.push_back(std::move(stage));
}

bool PreTokenizer::origin_matters() const {
  for (const auto& stage : stages) {
    if (stage.metaspace && stage.prepend == PrependScheme::kFirst) return true;
  }
  return false;
}

void PreTokenizer::split(std::string_view piece, const Align* align, bool at_origin,
                         const WordFn& word) const {
  std::vector<std::vector<Span>> spans(stages.size());
  split_from(piece, align, at_origin, 0, spans, word);
}

namespace {

// The pieces a Split cuts out of a text of `size` bytes at its `matches`, as `behavior` says.
void cut(size_t size, const std::vector<Span>& matches, SplitBehavior behavior,
         std::vector<Span>& out) {
  size_t at = 0;
  switch (behavior) {
    case SplitBehavior::kIsolated:
    case SplitBehavior::kRemoved:
      for (const Span& m : matches) {
        if (m.begin > at) out.push_back({at, m.begin});
        if (behavior == SplitBehavior::kIsolated && m.end > m.begin) out.push_back(m);
        at = std::max(at, m.end);
      }
      break;
    case SplitBehavior::kMergedWithPrevious:  // a piece ends with each match
      for (const Span& m : matches) {
        if (m.end > at) out.push_back({at, m.end});
        at = std::max(at, m.end);
      }
      break;
    case SplitBehavior::kMergedWithNext:  // a piece starts with each match
      for (const Span& m : matches) {
        if (m.begin > at) out.push_back({at, m.begin});
        at = std::max(at, m.begin);
      }
      break;
    case SplitBehavior::kContiguous:  // matches next to each other are one piece
      for (size_t k = 0; k < matches.size();) {
        const size_t begin = matches[k].begin;
        size_t end = matches[k].end;
        while (++k < matches.size() && matches[k].begin == end) end = matches[k].end;
        if (begin > at) out.push_back({at, begin});
        if (end > begin) out.push_back({begin, end});
        at = std::max(at, end);
      }
      break;
  }
  if (at < size) out.push_back({at, size});
}

}  // namespace

void PreTokenizer::split_from(std::string_view piece, const Align* align, bool at_origin, size_t k,
                              std::vector<std::vector<Span>>& spans, const WordFn& word) const {
  if (piece.empty()) return;
  if (k == stages.size()) return word(piece, align);
  const PreTokenizerStage& stage = stages[k];
  // A stage that rewrites the piece (ByteLevel's prefix space, Metaspace) cuts its own copy.
  NormalizedText own;
  if (stage.prefix_space && piece[0] != ' ') {
    TextBuilder b(align != nullptr);
    b.add(" ", align ? align[0] : Align{});
    b.copy(piece, align);
    own = b.take();
  } else if (stage.metaspace) {
    TextBuilder b(align != nullptr);
    const bool prepend = stage.prepend == PrependScheme::kAlways ||
                         (stage.prepend == PrependScheme::kFirst && at_origin);
    // (after the spaces are replaced: a piece that starts with one has its replacement already)
    if (prepend && piece[0] != ' ' &&
        piece.substr(0, stage.replacement.size()) != stage.replacement) {
      b.add(stage.replacement, align ? align[0] : Align{});
    }
    size_t from = 0;  // only U+0020 is a space here
    for (size_t at = piece.find(' '); at != std::string_view::npos; at = piece.find(' ', from)) {
      b.copy(piece.substr(from, at - from), align ? align + from : nullptr);
      b.add(stage.replacement, align ? align[at] : Align{});
      from = at + 1;
    }
    b.copy(piece.substr(from), align ? align + from : nullptr);
    own = b.take();
  }
  if (stage.prefix_space || stage.metaspace) {
    if (!own.text.empty()) {
      piece = own.text;
      align = own.tracked ? own.align.data() : nullptr;
    }
  }
  if (!stage.split) return split_from(piece, align, at_origin, k + 1, spans, word);
  std::vector<Span>& mine = spans[k];
  mine.clear();
  if (stage.metaspace) {
    for (size_t at = piece.find(stage.replacement); at != std::string_view::npos;
         at = piece.find(stage.replacement, at + stage.replacement.size())) {
      mine.push_back({at, at + stage.replacement.size()});
    }
  } else {
    stage.splitter.matches(piece, mine);
  }
  std::vector<Span> pieces;
  cut(piece.size(), mine, stage.metaspace ? SplitBehavior::kMergedWithNext : stage.behavior,
      pieces);
  for (const Span& p : pieces) {
    split_from(piece.substr(p.begin, p.end - p.begin), align ? align + p.begin : nullptr,
               at_origin && p.begin == 0, k + 1, spans, word);
  }
}

}  // namespace trainer::tokenizers
