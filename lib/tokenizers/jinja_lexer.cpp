// The Jinja lexer as jinja2's lexer.py runs under Transformers' settings (trim_blocks,
// lstrip_blocks, no trailing newline kept): text between tags with the whitespace control of
// `-`, `+`, trim_blocks and lstrip_blocks applied, comments dropped, raw blocks as text, and the
// tokens inside {{ }} and {% %}.
#include <cctype>
#include <cstdlib>

#include <fmt/format.h>

#include "lib/base/utf8.h"
#include "lib/tokenizers/jinja_ast.h"
#include "lib/tokenizers/jinja_int.h"

namespace trainer::tokenizers::jinja {
namespace {

using Type = Token::Type;

[[noreturn]] void fail(int line, const std::string& what) {
  throw TemplateError(TemplateError::Kind::kSyntax, line, what);
}

// Python's str.rstrip(): trailing white space (Unicode's, as str.isspace) removed.
std::string_view rstrip(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t begin = end - 1;
    while (begin > 0 && (static_cast<unsigned char>(s[begin]) & 0xC0) == 0x80) --begin;
    size_t length = 1;
    if (!is_space(base::decode_utf8(s, begin, length))) break;
    end = begin;
  }
  return s.substr(0, end);
}

// The length of the white space at s[at...] (\s* of Python's re on str).
size_t space_run(std::string_view s, size_t at) {
  size_t i = at;
  while (i < s.size()) {
    size_t length = 1;
    if (!is_space(base::decode_utf8(s, i, length))) break;
    i += length;
  }
  return i - at;
}

bool all_space(std::string_view s) { return !s.empty() && space_run(s, 0) == s.size(); }

int count_lines(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Newlines as \n, and the one trailing newline dropped (keep_trailing_newline false).
std::string normalize(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A string literal's body as Python's "unicode-escape" codec reads it after jinja2 turned its
// non-ASCII characters into \x, \u or \U escapes ("backslashreplace").
std::string unescape(std::string_view body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size();) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      out += body[i++];
      continue;
    }
    const char c = body[i + 1];
    i += 2;
    switch (c) {
      case '\n':
        break;
      case '\\':
      case '\'':
      case '"':
        out += c;
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'v':
        out += '\v';
        break;
      case 'x':
      case 'u':
      case 'U': {
        const size_t n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        char32_t cp = 0;
        for (size_t k = 0; k < n; ++k) {
          const int h = i + k < body.size() ? hex_value(body[i + k]) : -1;
          if (h < 0) fail(line, fmt::format("truncated \\{} escape in a string", c));
          cp = cp * 16 + static_cast<char32_t>(h);
        }
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
          fail(line, fmt::format("\\{} escape out of range in a string", c));
        base::append_utf8(out, cp);
        i += n;
        break;
      }
      case 'N':
        fail(line, "\\N{...} escapes are not supported in a string");
      default:
        if (c >= '0' && c <= '7') {
          char32_t cp = static_cast<char32_t>(c - '0');
          for (int k = 0; k < 2 && i < body.size() && body[i] >= '0' && body[i] <= '7'; ++k)
            cp = cp * 8 + static_cast<char32_t>(body[i++] - '0');
          base::append_utf8(out, cp);
        } else if (static_cast<unsigned char>(c) >= 0x80) {
          // "\é" was "\\xe9" for the codec: a backslash, then the escape's letters as text.
          size_t length = 1;
          const char32_t cp = base::decode_utf8(body, i - 1, length);
          out += '\\';
          out += cp < 0x100     ? fmt::format("x{:02x}", static_cast<uint32_t>(cp))
                 : cp < 0x10000 ? fmt::format("u{:04x}", static_cast<uint32_t>(cp))
                                : fmt::format("U{:08x}", static_cast<uint32_t>(cp));
          i += length - 1;
        } else {
          out += '\\';
          out += c;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : s_(normalize(source)) {}

  std::vector<Token> run() {
    while (pos_ < s_.size()) root();
    tokens_.push_back({Type::kEnd, "", line_});
    return std::move(tokens_);
  }

 private:
  // Text up to the next tag, then the tag.
  void root() {
    size_t tag = pos_;
    char kind = 0;
    while ((tag = s_.find('{', tag)) != std::string::npos) {
      if (tag + 1 < s_.size() && (s_[tag + 1] == '{' || s_[tag + 1] == '%' || s_[tag + 1] == '#')) {
        kind = s_[tag + 1];
        break;
      }
      ++tag;
    }
    if (kind == 0) {
      text(std::string_view(s_).substr(pos_));
      pos_ = s_.size();
      return;
    }
    std::string_view before = std::string_view(s_).substr(pos_, tag - pos_);
    size_t after = tag + 2;
    const char sign = after < s_.size() && (s_[after] == '-' || s_[after] == '+') ? s_[after] : 0;
    if (sign) ++after;
    if (sign == '-') {
      const std::string_view kept = rstrip(before);
      stripped_lines_ = count_lines(before.substr(kept.size()));
      before = kept;
    } else if (sign != '+' && kind != '{') {
      // lstrip_blocks: the white space between the line's start and a block or comment tag.
      const size_t line_start = before.rfind('\n') + 1;  // npos + 1 == 0
      if ((line_start > 0 || line_starting_) && all_space(before.substr(line_start)))
        before = before.substr(0, line_start);
    }
    text(before);
    line_ += stripped_lines_;
    stripped_lines_ = 0;
    pos_ = after;
    if (kind == '#') {
      comment();
    } else if (kind == '%' && raw_begins()) {
      raw();
    } else {
      tag_body(kind == '{');
    }
  }

  void text(std::string_view t) {
    if (!t.empty()) tokens_.push_back({Type::kText, std::string(t), line_});
    line_ += count_lines(t);
  }

  // After a tag's end: `-` eats the white space that follows, a block's plain end one newline
  // (trim_blocks).
  void after_end(char sign, bool block) {
    if (sign == '-') {
      const size_t n = space_run(s_, pos_);
      line_ += count_lines(std::string_view(s_).substr(pos_, n));
      pos_ += n;
    } else if (sign == 0 && block && pos_ < s_.size() && s_[pos_] == '\n') {
      ++pos_;
      ++line_;
    }
    line_starting_ = pos_ > 0 && s_[pos_ - 1] == '\n' && sign != '+';
  }

  void comment() {
    const size_t end = s_.find("#}", pos_);
    if (end == std::string::npos) fail(line_, "missing end of comment tag");
    size_t body_end = end;
    char sign = 0;
    if (end > pos_ && (s_[end - 1] == '-' || s_[end - 1] == '+')) sign = s_[--body_end];
    line_ += count_lines(std::string_view(s_).substr(pos_, end - pos_));
    pos_ = end + 2;
    after_end(sign, true);
  }

  bool raw_begins() {
    size_t i = pos_ + space_run(s_, pos_);
    if (s_.compare(i, 3, "raw") != 0) return false;
    i += 3;
    i += space_run(s_, i);
    if (s_.compare(i, 3, "-%}") == 0) {
      pos_ = i + 3;
      pos_ += space_run(s_, pos_);
      return true;
    }
    if (s_.compare(i, 2, "%}") == 0) {
      pos_ = i + 2;
      return true;
    }
    return false;
  }

  void raw() {
    for (size_t at = pos_; (at = s_.find("{%", at)) != std::string::npos; at += 2) {
      size_t i = at + 2;
      const char sign = i < s_.size() && (s_[i] == '-' || s_[i] == '+') ? s_[i++] : 0;
      i += space_run(s_, i);
      if (s_.compare(i, 6, "endraw") != 0) continue;
      i += 6;
      i += space_run(s_, i);
      char end_sign = 0;
      if (i < s_.size() && (s_[i] == '-' || s_[i] == '+')) end_sign = s_[i++];
      if (s_.compare(i, 2, "%}") != 0) continue;
      std::string_view body = std::string_view(s_).substr(pos_, at - pos_);
      if (sign == '-') {
        body = rstrip(body);
      } else if (sign != '+') {  // lstrip_blocks before {% endraw %}, as before any block tag
        const size_t line_start = body.rfind('\n') + 1;
        if (line_start > 0 && all_space(body.substr(line_start))) body = body.substr(0, line_start);
      }
      text(body);
      line_ +=
          count_lines(std::string_view(s_).substr(pos_ + body.size(), at - pos_ - body.size()));
      pos_ = i + 2;
      after_end(end_sign, true);
      return;
    }
    fail(line_, "missing end of raw directive");
  }

  // The tokens of {{ ... }} (variable) or {% ... %} up to their end, brackets balanced.
  void tag_body(bool variable) {
    tokens_.push_back({variable ? Type::kVariableBegin : Type::kBlockBegin, "", line_});
    std::vector<char> brackets;
    while (true) {
      const size_t ws = space_run(s_, pos_);
      line_ += count_lines(std::string_view(s_).substr(pos_, ws));
      pos_ += ws;
      if (pos_ >= s_.size())
        fail(line_, variable ? "unexpected end of template, expected '}}'"
                             : "unexpected end of template, expected '%}'");
      if (brackets.empty() && tag_end(variable)) return;
      token(brackets);
    }
  }

  bool tag_end(bool variable) {
    const char* close = variable ? "}}" : "%}";
    char sign = 0;
    size_t i = pos_;
    if (s_[i] == '-' || (!variable && s_[i] == '+')) sign = s_[i++];
    if (s_.compare(i, 2, close) != 0) return false;
    tokens_.push_back({variable ? Type::kVariableEnd : Type::kBlockEnd, "", line_});
    pos_ = i + 2;
    after_end(sign, !variable);
    return true;
  }

  void token(std::vector<char>& brackets) {
    const char c = s_[pos_];
    if (std::isdigit(static_cast<unsigned char>(c))) return number();
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t end = pos_;
      while (end < s_.size() &&
             (std::isalnum(static_cast<unsigned char>(s_[end])) || s_[end] == '_'))
        ++end;
      tokens_.push_back({Type::kName, s_.substr(pos_, end - pos_), line_});
      pos_ = end;
      return;
    }
    if (c == '\'' || c == '"') return string(c);
    static const char* const kOperators[] = {"**", "//", "==", "!=", ">=", "<=", "+", "-", "/",
                                             "*",  "%",  "~",  "[",  "]",  "(",  ")", "{", "}",
                                             ">",  "<",  "=",  ".",  ":",  "|",  ",", ";"};
    for (const char* op : kOperators) {
      const size_t n = std::char_traits<char>::length(op);
      if (s_.compare(pos_, n, op) != 0) continue;
      if (n == 1 && (c == '(' || c == '[' || c == '{')) {
        brackets.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
      } else if (n == 1 && (c == ')' || c == ']' || c == '}')) {
        if (brackets.empty()) fail(line_, fmt::format("unexpected '{}'", c));
        if (brackets.back() != c)
          fail(line_, fmt::format("unexpected '{}', expected '{}'", c, brackets.back()));
        brackets.pop_back();
      }
      tokens_.push_back({Type::kOperator, op, line_});
      pos_ += n;
      return;
    }
    const size_t length = std::max<size_t>(1, base::utf8_sequence_length(s_, pos_));
    fail(line_,
         fmt::format("unexpected char {} at {}", repr_string(s_.substr(pos_, length)), pos_));
  }

  void digits(size_t& i) {
    while (i < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i])) ||
                             (s_[i] == '_' && i + 1 < s_.size() &&
                              std::isdigit(static_cast<unsigned char>(s_[i + 1])))))
      ++i;
  }

  void number() {
    size_t i = pos_;
    digits(i);
    bool is_float = false;
    if (i + 1 < s_.size() && s_[i] == '.' && std::isdigit(static_cast<unsigned char>(s_[i + 1]))) {
      ++i;
      digits(i);
      is_float = true;
    }
    if (i < s_.size() && (s_[i] == 'e' || s_[i] == 'E')) {
      size_t j = i + 1;
      if (j < s_.size() && (s_[j] == '+' || s_[j] == '-')) ++j;
      if (j < s_.size() && std::isdigit(static_cast<unsigned char>(s_[j]))) {
        digits(j);
        i = j;
        is_float = true;
      }
    }
    std::string text;
    for (size_t k = pos_; k < i; ++k)
      if (s_[k] != '_') text += s_[k];
    if (!is_float && pos_ + 1 < s_.size() && s_[pos_] == '0' &&
        (s_[pos_ + 1] == 'x' || s_[pos_ + 1] == 'X' || s_[pos_ + 1] == 'o' || s_[pos_ + 1] == 'O' ||
         s_[pos_ + 1] == 'b' || s_[pos_ + 1] == 'B')) {
      const int radix = std::tolower(s_[pos_ + 1]) == 'x'   ? 16
                        : std::tolower(s_[pos_ + 1]) == 'o' ? 8
                                                            : 2;
      size_t j = pos_ + 2;
      std::string body;
      while (j < s_.size() && (s_[j] == '_' || std::isxdigit(static_cast<unsigned char>(s_[j])))) {
        if (s_[j] != '_') {
          if (hex_value(s_[j]) >= radix) break;
          body += s_[j];
        }
        ++j;
      }
      if (!body.empty()) {
        i = j;
        // Kept in its radix (the parser reads it): its decimal digits may pass CPython's limit.
        text = std::string("0") + static_cast<char>(std::tolower(s_[pos_ + 1])) + body;
        if (body.size() * 4 > static_cast<size_t>(kMaxIntBits))
          fail(line_, fmt::format("integer literal of {} digits is too large", body.size()));
      }
    }
    if (is_float) {
      tokens_.push_back({Type::kFloat, text, line_});
    } else {
      if (text.size() > kMaxIntStrDigits && text[1] != 'x' && text[1] != 'o' && text[1] != 'b') {
        fail(line_, fmt::format("integer literal of {} digits passes CPython's limit of {} digits "
                                "for integer string conversion",
                                text.size(), kMaxIntStrDigits));
      }
      tokens_.push_back({Type::kInteger, text, line_});
    }
    pos_ = i;
  }

  void string(char quote) {
    size_t i = pos_ + 1;
    while (i < s_.size() && s_[i] != quote) i += s_[i] == '\\' ? 2 : 1;
    if (i >= s_.size()) fail(line_, "unexpected end of template inside a string literal");
    const std::string_view body = std::string_view(s_).substr(pos_ + 1, i - pos_ - 1);
    tokens_.push_back({Type::kString, unescape(body, line_), line_});
    line_ += count_lines(body);
    pos_ = i + 1;
  }

  std::string s_;
  size_t pos_ = 0;
  int line_ = 1;
  int stripped_lines_ = 0;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace trainer::tokenizers::jinja
