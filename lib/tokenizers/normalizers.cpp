// Normalizers: each step rewrites the text and, when tracked, aligns every output byte to the
// original bytes it came from (inserted text to the character it stands before or replaces).
#include "lib/tokenizers/normalizers.h"

#include <fmt/format.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/uniset.h>
#include <unicode/unistr.h>
#include <unicode/ustring.h>

#include "lib/base/errors.h"
#include "lib/base/text.h"
#include "lib/base/utf8.h"
#include "lib/tokenizers/pre_tokenizers.h"

namespace trainer::tokenizers {

NormalizedText NormalizedText::of(std::string_view text, bool track) {
  NormalizedText t;
  t.text = std::string(text);
  t.tracked = track;
  if (!track) return t;
  t.align.resize(text.size());
  for (size_t i = 0; i < text.size();) {
    size_t length;
    base::decode_utf8(text, i, length);
    for (size_t k = 0; k < length; ++k) {
      t.align[i + k] = {static_cast<uint32_t>(i), static_cast<uint32_t>(i + length)};
    }
    i += length;
  }
  return t;
}

void TextBuilder::add(std::string_view bytes, Align align) {
  out_.text += bytes;
  if (out_.tracked) out_.align.insert(out_.align.end(), bytes.size(), align);
}

void TextBuilder::copy(const NormalizedText& source, size_t from, size_t to) {
  if (from >= to) return;
  copy(std::string_view(source.text).substr(from, to - from),
       source.tracked ? source.align.data() + from : nullptr);
}

void TextBuilder::copy(std::string_view bytes, const Align* align) {
  out_.text += bytes;
  if (out_.tracked) out_.align.insert(out_.align.end(), align, align + bytes.size());
}

struct Normalizer::Step {
  virtual ~Step() = default;
  virtual void apply(NormalizedText& t) const = 0;
};

namespace {

using json = nlohmann::ordered_json;

bool is_ascii(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// The alignment of the character at byte `at` (untracked text: none).
Align align_at(const NormalizedText& t, size_t at) { return t.tracked ? t.align[at] : Align{}; }

// Calls f(begin, length, code point) for each character of `s`.
template <typename F>
void for_each_char(std::string_view s, F&& f) {
  for (size_t i = 0; i < s.size();) {
    size_t length;
    const char32_t c = base::decode_utf8(s, i, length);
    f(i, length, c);
    i += length;
  }
}

struct Prepend : Normalizer::Step {
  std::string prepend;
  void apply(NormalizedText& t) const override {
    if (t.text.empty()) return;  // an empty text stays empty
    TextBuilder b(t.tracked);
    b.add(prepend, align_at(t, 0));
    b.copy(t, 0, t.text.size());
    t = b.take();
  }
};

struct Replace : Normalizer::Step {
  bool is_regex = false;
  std::string literal, content;
  Splitter regex;

  // The matches `tokenizers` replaces: non-overlapping, left to right; an empty match right where
  // a non-empty one ended is not one (Oniguruma's iteration), and an empty String matches at
  // every character boundary.
  std::vector<Span> matches(std::string_view s) const {
    std::vector<Span> found;
    if (is_regex) {
      std::vector<Span> all;
      regex.matches(s, all);
      size_t last_end = 0;
      bool last_nonempty = false;
      for (const Span& m : all) {
        if (m.begin == m.end && last_nonempty && m.begin == last_end) continue;
        found.push_back(m);
        last_end = m.end, last_nonempty = m.end > m.begin;
      }
    } else if (literal.empty()) {
      found.push_back({0, 0});
      for_each_char(s, [&](size_t i, size_t length, char32_t) {
        found.push_back({i + length, i + length});
      });
    } else {
      for (size_t at = s.find(literal); at != std::string_view::npos;
           at = s.find(literal, at + literal.size())) {
        found.push_back({at, at + literal.size()});
      }
    }
    return found;
  }

  void apply(NormalizedText& t) const override {
    const std::vector<Span> found = matches(t.text);
    if (found.empty()) return;
    TextBuilder b(t.tracked);
    size_t at = 0;
    for (const Span& m : found) {
      b.copy(t, at, m.begin);
      // The content stands where the match's last character stood.
      b.add(content, m.end == 0 ? Align{0, 0} : align_at(t, m.end - 1));
      at = m.end;
    }
    b.copy(t, at, t.text.size());
    t = b.take();
  }
};

// The characters of Unicode 9.0, the version of the `tokenizers` wheel's normalization tables:
// later ones are left as they are, as there.
const icu::UnicodeSet& unicode9() {
  static const icu::UnicodeSet* set = [] {
    UErrorCode status = U_ZERO_ERROR;
    auto* s = new icu::UnicodeSet(icu::UnicodeString(u"[:age=9.0:]"), status);
    if (U_FAILURE(status)) throw std::runtime_error("ICU has no [:age=9.0:] set");
    s->freeze();
    return s;
  }();
  return *set;
}

bool in_unicode9(char32_t c) { return unicode9().contains(static_cast<UChar32>(c)); }

struct UnicodeForm : Normalizer::Step {
  std::unique_ptr<icu::FilteredNormalizer2> form, decompose_form;
  const icu::Normalizer2* decompose = nullptr;  // the form's D, on Unicode 9.0

  explicit UnicodeForm(const std::string& name) {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* base = name == "NFC"    ? icu::Normalizer2::getNFCInstance(status)
                                   : name == "NFD"  ? icu::Normalizer2::getNFDInstance(status)
                                   : name == "NFKC" ? icu::Normalizer2::getNFKCInstance(status)
                                                    : icu::Normalizer2::getNFKDInstance(status);
    if (U_FAILURE(status)) throw std::runtime_error("ICU has no " + name + " normalizer");
    form = std::make_unique<icu::FilteredNormalizer2>(*base, unicode9());
    const bool compat = name == "NFKC" || name == "NFKD";
    const icu::Normalizer2* d = compat ? icu::Normalizer2::getNFKDInstance(status)
                                       : icu::Normalizer2::getNFDInstance(status);
    if (U_FAILURE(status)) throw std::runtime_error("ICU has no decomposition for " + name);
    decompose_form = std::make_unique<icu::FilteredNormalizer2>(*d, unicode9());
    decompose = decompose_form.get();
  }

  std::string normalized(std::string_view s) const {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2& n = *form;
    const icu::UnicodeString out = n.normalize(
        icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), static_cast<int32_t>(s.size()))),
        status);
    if (U_FAILURE(status)) throw std::runtime_error("ICU normalization failed");
    std::string bytes;
    out.toUTF8String(bytes);
    return bytes;
  }

  void apply(NormalizedText& t) const override {
    if (is_ascii(t.text)) return;  // every form leaves ASCII as it is
    if (!t.tracked) {
      t.text = normalized(t.text);
      return;
    }
    // Segment by segment (a boundary before each character that starts one), as tokenizers'
    // alignments go: each character in stands for as many characters of the decomposed segment
    // as its own decomposition has, in order; a composed character out stands for as many of
    // those as its decomposition has, and is aligned where the first of those is.
    TextBuilder b(true);
    std::vector<size_t> starts;  // of the segment's characters
    std::vector<Align> decomposed;
    size_t segment = 0;
    std::string one;
    auto flush = [&](size_t end) {
      if (starts.empty()) return;
      decomposed.clear();
      for (size_t start : starts) {
        size_t length;
        base::decode_utf8(t.text, start, length);
        for (size_t k = 0; k < decomposed_length(std::string_view(t.text).substr(start, length));
             ++k) {
          decomposed.push_back(t.align[start]);
        }
      }
      const std::string out = normalized(std::string_view(t.text).substr(segment, end - segment));
      size_t used = 0;
      for_each_char(out, [&](size_t i, size_t length, char32_t) {
        const std::string_view c = std::string_view(out).substr(i, length);
        const size_t n = std::max<size_t>(1, decomposed_length(c));
        const size_t first = std::min(used, decomposed.size() - 1);
        b.add(c, decomposed[first]);
        used += n;
      });
      starts.clear();
    };
    for_each_char(t.text, [&](size_t i, size_t, char32_t c) {
      if (!starts.empty() && form->hasBoundaryBefore(static_cast<UChar32>(c))) {
        flush(i);
        segment = i;
      }
      starts.push_back(i);
    });
    flush(t.text.size());
    t = b.take();
  }

  // The number of characters of `c`'s decomposition under this form's D (NFD or NFKD).
  size_t decomposed_length(std::string_view c) const {
    UErrorCode status = U_ZERO_ERROR;
    const icu::UnicodeString out = decompose->normalize(
        icu::UnicodeString::fromUTF8(icu::StringPiece(c.data(), static_cast<int32_t>(c.size()))),
        status);
    return U_FAILURE(status) ? 1 : static_cast<size_t>(out.countChar32());
  }
};

struct Lowercase : Normalizer::Step {
  void apply(NormalizedText& t) const override {
    if (is_ascii(t.text)) {
      for (char& c : t.text) c = static_cast<char>(ascii_lower(c));
      return;
    }
    // Each character by itself, as Rust's char::to_lowercase (no final sigma: no context).
    TextBuilder b(t.tracked);
    std::string lower;
    for_each_char(t.text, [&](size_t i, size_t length, char32_t c) {
      if (c < 0x80) {
        const char l = ascii_lower(static_cast<char>(c));
        b.add(std::string_view(&l, 1), align_at(t, i));
        return;
      }
      UChar in[2], out[8];
      int32_t n = 0;
      U16_APPEND_UNSAFE(in, n, static_cast<UChar32>(c));
      UErrorCode status = U_ZERO_ERROR;
      const int32_t m = u_strToLower(out, 8, in, n, "", &status);
      if (U_FAILURE(status)) {
        b.copy(t, i, i + length);
        return;
      }
      lower.clear();
      icu::UnicodeString(out, m).toUTF8String(lower);
      b.add(lower, align_at(t, i));
    });
    t = b.take();
  }
};

struct Strip : Normalizer::Step {
  bool left = true, right = true;
  void apply(NormalizedText& t) const override {
    size_t begin = 0, end = t.text.size();
    bool seen = false;
    size_t last_kept_end = 0, first_kept = t.text.size();
    for_each_char(t.text, [&](size_t i, size_t length, char32_t c) {
      if (!u_isUWhiteSpace(static_cast<UChar32>(c))) {
        if (!seen) first_kept = i, seen = true;
        last_kept_end = i + length;
      }
    });
    if (left) begin = first_kept;
    if (right) end = seen ? last_kept_end : 0;
    if (!seen) begin = end = (left || right) ? 0 : t.text.size();
    if (begin == 0 && end == t.text.size()) return;
    TextBuilder b(t.tracked);
    b.copy(t, begin, std::max(begin, end));
    t = b.take();
  }
};

struct StripAccents : Normalizer::Step {
  void apply(NormalizedText& t) const override {
    if (is_ascii(t.text)) return;
    TextBuilder b(t.tracked);
    for_each_char(t.text, [&](size_t i, size_t length, char32_t c) {
      const uint32_t mask = U_GET_GC_MASK(static_cast<UChar32>(c));
      if ((mask & (U_GC_MN_MASK | U_GC_MC_MASK | U_GC_ME_MASK)) && in_unicode9(c)) return;
      b.copy(t, i, i + length);
    });
    t = b.take();
  }
};

void read_into(const json& j, const JsonReader& reader,
               std::vector<std::unique_ptr<Normalizer::Step>>& steps) {
  const std::string type = JsonReader::type_name(j);
  if (type == "Sequence") {
    for (const json& item : reader.sequence(j, "normalizer", "normalizers")) {
      read_into(item, reader, steps);
    }
  } else if (type == "Prepend") {
    auto s = std::make_unique<Prepend>();
    s->prepend = reader.string_field(j, "prepend", "normalizer Prepend");
    steps.push_back(std::move(s));
  } else if (type == "Replace") {
    auto s = std::make_unique<Replace>();
    const std::string pattern = reader.pattern(j, "normalizer Replace", s->is_regex);
    s->content = reader.string_field(j, "content", "normalizer Replace");
    if (s->is_regex) {
      s->regex = Splitter::compile(pattern, true, false, reader.where(),
                                   "the normalizer Replace's pattern");
    } else {
      s->literal = pattern;
    }
    steps.push_back(std::move(s));
  } else if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    steps.push_back(std::make_unique<UnicodeForm>(type));
  } else if (type == "Lowercase") {
    steps.push_back(std::make_unique<Lowercase>());
  } else if (type == "Strip") {
    auto s = std::make_unique<Strip>();
    for (const char* key : {"strip_left", "strip_right"}) {
      if (!j.contains(key) || !j[key].is_boolean()) {
        reader.refuse(
            fmt::format("normalizer Strip's \"{}\" is missing or not true or false", key));
      }
    }
    s->left = j["strip_left"].get<bool>(), s->right = j["strip_right"].get<bool>();
    steps.push_back(std::move(s));
  } else if (type == "StripAccents") {
    steps.push_back(std::make_unique<StripAccents>());
  } else if (type == "Precompiled") {
    // SentencePiece's character map: an empty (or absent) one maps nothing; a real one is not
    // built here.
    if (j.contains("precompiled_charsmap") && !j["precompiled_charsmap"].is_null() &&
        j["precompiled_charsmap"] != "") {
      reader.refuse(
          "normalizer Precompiled with a non-empty precompiled_charsmap is not supported (only an "
          "empty one, which maps nothing)");
    }
  } else {
    reader.refuse(fmt::format(
        "normalizer {} is not supported (Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD, "
        "Lowercase, Strip, StripAccents, an empty Precompiled)",
        type));
  }
}

}  // namespace

Normalizer::Normalizer() = default;
Normalizer::Normalizer(Normalizer&&) noexcept = default;
Normalizer& Normalizer::operator=(Normalizer&&) noexcept = default;
Normalizer::~Normalizer() = default;

Normalizer Normalizer::from_json(const json& j, const JsonReader& reader) {
  Normalizer n;
  read_into(j, reader, n.steps_);
  return n;
}

Normalizer Normalizer::nfc() {
  Normalizer n;
  n.steps_.push_back(std::make_unique<UnicodeForm>("NFC"));
  return n;
}

Normalizer Normalizer::replace_spaces() {
  Normalizer n;
  auto s = std::make_unique<Replace>();
  s->literal = " ", s->content = "\u2581";
  n.steps_.push_back(std::move(s));
  return n;
}

bool Normalizer::empty() const { return steps_.empty(); }

void Normalizer::apply(NormalizedText& text) const {
  for (const auto& step : steps_) step->apply(text);
}

std::string Normalizer::normalize(std::string_view text) const {
  NormalizedText t = NormalizedText::of(text, false);
  apply(t);
  return std::move(t.text);
}

}  // namespace trainer::tokenizers
