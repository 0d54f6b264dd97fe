// The grammars of numbers for math_answer.h: latex2sympy's on LaTeX, parse_expr's on plain text.
#include <vector>

#include "trl/math_answer_internal.h"

namespace trainer::trl::math {

namespace {

// latex2sympy on a normalized text: a number of the forms math_answer.h names, a text (what
// sympy would build otherwise, taken to parse), or nothing (what latex2sympy refuses).
class LatexNumberParser {
 public:
  explicit LatexNumberParser(std::string_view text) : s_(text) {}

  Number parse_whole() {
    Number n = additive();
    skip_spaces();
    if (at_ < s_.size()) {
      if (s_[at_] == ')' || s_[at_] == ']' || s_[at_] == '}') throw Malformed{};
      throw NotANumber{};
    }
    return n;
  }

 private:
  std::string_view s_;
  size_t at_ = 0;

  bool starts(std::string_view word) const { return s_.substr(at_, word.size()) == word; }
  // A command `word` (not the start of a longer command name).
  bool command(std::string_view word) const {
    if (!starts(word)) return false;
    const size_t end = at_ + word.size();
    return end >= s_.size() || !is_letter(s_[end]) || !is_letter(word.back());
  }

  void skip_spaces() {
    while (at_ < s_.size()) {
      if (s_[at_] == ' ' || s_[at_] == '\t' || s_[at_] == '\n' || s_[at_] == '\r') {
        ++at_;
      } else if (command("\\,") || command("\\;") || command("\\:")) {
        at_ += 2;
      } else if (command("\\qquad")) {
        at_ += 6;
      } else if (command("\\quad")) {
        at_ += 5;
      } else {
        break;
      }
    }
  }

  bool end() {
    skip_spaces();
    return at_ >= s_.size();
  }

  // mp's operators and additive's, where they stop a list of juxtaposed factors.
  bool at_operator() {
    skip_spaces();
    if (at_ >= s_.size()) return true;
    const char c = s_[at_];
    if (c == '+' || c == '-' || c == '*' || c == '/' || c == ':' || c == ')' || c == ']' ||
        c == '}' || c == '=') {
      return true;
    }
    return command("\\cdot") || command("\\times") || command("\\div");
  }

  Number additive() {
    Number left = multiplicative();
    while (!end()) {
      const char c = s_[at_];
      if (c != '+' && c != '-') break;
      ++at_;
      if (end()) throw Malformed{};
      Number right = multiplicative();
      if (c == '-') {
        // convert_add: a Number is negated, anything else multiplied by -1.
        right = right.form == Number::Form::kAtom ? negate(right)
                                                  : combine(Number::integer(-1), right, '*');
      }
      left = combine(left, right, '+');
    }
    return left;
  }

  Number multiplicative() {
    Number left = unary();
    while (!end()) {
      char op = 0;
      if (s_[at_] == '*') {
        op = '*', at_ += 1;
      } else if (command("\\cdot")) {
        op = '*', at_ += 5;
      } else if (command("\\times")) {
        op = '*', at_ += 6;
      } else if (s_[at_] == '/' || s_[at_] == ':') {
        op = '/', at_ += 1;
      } else if (command("\\div")) {
        op = '/', at_ += 4;
      } else {
        break;
      }
      if (end()) throw Malformed{};
      const Number right = unary();
      if (op == '/' && left.is_atom_integer() && right.is_atom_integer()) {
        if (right.exact.num == 0) throw NotANumber{};  // zoo
        left = Number::rational(left.exact / right.exact);
      } else {
        left = combine(left, right, op);
      }
    }
    return left;
  }

  Number unary() {
    if (end()) throw Malformed{};
    if (s_[at_] == '+') {
      ++at_;
      return unary();
    }
    if (s_[at_] == '-') {
      ++at_;
      return negate(unary());
    }
    std::vector<Number> items;
    while (!at_operator()) items.push_back(exponentiated());
    if (items.empty()) throw Malformed{};
    // convert_postfix_list, from the right: an Integer before a positive Rational is a mixed
    // fraction (2 \frac{1}{2} is 5/2, "2 3" is 5), anything else a product.
    Number right = items.back();
    for (size_t k = items.size() - 1; k-- > 0;) {
      const Number& left = items[k];
      if (left.is_atom_integer() && right.is_atom_rational() && right.exact.num > 0) {
        const Rational l = left.exact, r = right.exact;
        right = Number::rational(left.exact.num < 0 ? l - r : l + r);
      } else {
        right = combine(left, right, '*');
      }
    }
    return right;
  }

  Number exponentiated() {
    Number base = component();
    while (true) {
      skip_spaces();
      if (at_ >= s_.size() || s_[at_] != '^') break;
      ++at_;
      skip_spaces();
      if (command("\\circ")) {
        at_ += 5;
        continue;
      }
      if (starts("{")) {
        const size_t save = at_;
        ++at_;
        skip_spaces();
        if (command("\\circ")) {
          at_ += 5;
          skip_spaces();
          if (starts("}")) {
            ++at_;
            continue;
          }
        }
        at_ = save + 1;
        const Number exponent = additive();
        skip_spaces();
        if (!starts("}")) throw Malformed{};
        ++at_;
        base = power(base, exponent);
        continue;
      }
      if (at_ < s_.size() && is_digit(s_[at_])) {
        base = power(base, Number::integer(s_[at_] - '0'));
        ++at_;
        continue;
      }
      throw NotANumber{};
    }
    skip_spaces();
    if (at_ < s_.size() && s_[at_] == '!') throw NotANumber{};
    return base;
  }

  Number braced() {
    skip_spaces();
    if (!starts("{")) throw NotANumber{};
    ++at_;
    Number n = additive();
    skip_spaces();
    if (!starts("}")) throw Malformed{};
    ++at_;
    return n;
  }

  Number component() {
    skip_spaces();
    if (at_ >= s_.size()) throw Malformed{};
    const char c = s_[at_];
    if (c == '(' || c == '[') {
      ++at_;
      Number n = additive();
      skip_spaces();
      if (at_ >= s_.size()) throw Malformed{};
      if (s_[at_] != (c == '(' ? ')' : ']')) throw NotANumber{};
      ++at_;
      return n;
    }
    if (command("\\frac")) {
      at_ += 5;
      const Number top = braced();
      const Number bottom = braced();
      if (top.is_atom_integer() && bottom.is_atom_integer()) {
        if (bottom.exact.num == 0) throw NotANumber{};
        return Number::rational(top.exact / bottom.exact);
      }
      return combine(top, bottom, '/');
    }
    if (is_digit(c) || c == '.') return number();
    if (c == '%' || starts("\\%")) throw Malformed{};  // a percent sign after no number
    throw NotANumber{};
  }

  // NUMBER, or PERCENT_NUMBER: a number then "\%" or "%".
  Number number() {
    const size_t begin = at_;
    while (at_ < s_.size() && is_digit(s_[at_])) ++at_;
    if (at_ < s_.size() && s_[at_] == '.') {
      ++at_;
      const size_t fraction = at_;
      while (at_ < s_.size() && is_digit(s_[at_])) ++at_;
      if (at_ == fraction) throw Malformed{};  // "5.": latex2sympy refuses it
    }
    if (at_ < s_.size() && (is_letter(s_[at_]) || s_[at_] == ',')) throw NotANumber{};
    std::string digits(s_.substr(begin, at_ - begin));
    if (digits.find('.') == std::string::npos) {
      while (digits.size() > 1 && digits[0] == '0') digits.erase(0, 1);
    }
    const Number n = number_of(digits);
    const size_t save = at_;
    skip_spaces();
    if (starts("\\%")) {
      at_ += 2;
      return percent_of(n);
    }
    if (starts("%")) {
      at_ += 1;
      return percent_of(n);
    }
    at_ = save;
    return n;
  }
};

// sympy's parse_expr(text, evaluate=False) on a plain expression of math_verify's expr pattern
// (digits, . + - * / ^ ( ) and spaces, ^ read as **).
class PlainExpressionParser {
 public:
  explicit PlainExpressionParser(std::string_view text) : s_(text) {}

  Number parse_whole() {
    Number n = sum();
    skip();
    if (at_ < s_.size()) throw Malformed{};
    return n;
  }

 private:
  std::string_view s_;
  size_t at_ = 0;

  void skip() {
    while (at_ < s_.size() && (s_[at_] == ' ' || s_[at_] == '\t' || s_[at_] == '\n' ||
                               s_[at_] == '\r' || s_[at_] == '\f' || s_[at_] == '\v')) {
      ++at_;
    }
  }
  bool take(std::string_view op) {
    skip();
    if (s_.substr(at_, op.size()) != op) return false;
    at_ += op.size();
    return true;
  }

  Number sum() {
    Number left = product();
    while (true) {
      if (take("+")) {
        left = combine(left, product(), '+');
      } else if (take("-")) {
        left = combine(left, negate_expr(product()), '+');
      } else {
        return left;
      }
    }
  }
  static Number negate_expr(const Number& n) {
    return n.form == Number::Form::kAtom ? negate(n) : combine(Number::integer(-1), n, '*');
  }
  Number product() {
    Number left = factor();
    while (true) {
      skip();
      if (s_.substr(at_, 2) == "//") throw NotANumber{};  // floor: not built here
      if (take("*")) {
        left = combine(left, factor(), '*');
      } else if (take("/")) {
        left = combine(left, factor(), '/');
      } else {
        return left;
      }
    }
  }
  Number factor() {
    if (take("+")) return factor();
    if (take("-")) return negate_expr(factor());
    Number base = atom();
    skip();
    if (s_.substr(at_, 2) == "**") {
      at_ += 2;
      return power(base, factor());
    }
    return base;
  }
  Number atom() {
    skip();
    if (take("(")) {
      Number n = sum();
      if (!take(")")) throw Malformed{};
      return n;
    }
    const size_t begin = at_;
    while (at_ < s_.size() && is_digit(s_[at_])) ++at_;
    const size_t whole = at_ - begin;
    bool decimal = false;
    if (at_ < s_.size() && s_[at_] == '.') {
      decimal = true;
      ++at_;
      while (at_ < s_.size() && is_digit(s_[at_])) ++at_;
    }
    if (at_ == begin || (decimal && at_ == begin + 1)) throw Malformed{};
    const std::string_view token = s_.substr(begin, at_ - begin);
    // Python refuses leading zeros in an integer ("007"); a second "." ends in a syntax error.
    if (!decimal && whole > 1 && token[0] == '0') throw Malformed{};
    if (at_ < s_.size() && (s_[at_] == '.' || is_digit(s_[at_]))) throw Malformed{};
    return number_of(token);
  }
};

}  // namespace

Number parse_latex_number(std::string_view text) { return LatexNumberParser(text).parse_whole(); }

Number parse_plain_expression(std::string_view text) {
  return PlainExpressionParser(text).parse_whole();
}

}  // namespace trainer::trl::math
