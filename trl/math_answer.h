// The answer matching of TRL's accuracy rewards (torch-free): math_verify's parse and verify
// (math-verify 0.9.0 over latex2sympy2_extended 1.11.0), as accuracy_reward,
// reasoning_accuracy_reward and get_cosine_scaled_reward call them, for the answers of GSM8K- and
// MATH-style data.
//
// What it covers, as math_verify does it:
// - Extraction: math_verify's regular expressions, priorities and order (the rightmost match of
//   the first priority that matches): a solution with its defaults (LaTeX and plain expressions,
//   any match that parses), a completion with TRL's configuration (LaTeX only, \boxed first, an
//   anchor such as "answer" or "final answer is" needed for $...$, \(...\), \[...\] and
//   \frac{a}{b}, the first match only). So "#### 72", "1,234", "$18", "50%" and plain numbers are
//   read from a solution, and from a completion only inside \boxed{...} or a LaTeX environment
//   after such an anchor (a completion's plain "#### 72" scores 0, as in TRL).
// - Normalization: latex2sympy2_extended's normalize_latex, each step: the last \boxed{...} or
//   \fbox{...} (boxes close together joined by commas), \left( \right), \! and \$ removed,
//   \dfrac and \tfrac, "and"/"or", \text{...} units and unit words at the end dropped (its list),
//   percent words, and for a solution \frac12, \sqrt2, a/b as \frac{a}{b}, .5 and 0.5.
// - Values: integers, decimals (sympy's Float: a double, rounded from the decimal as written),
//   a/b, \frac{a}{b}, \div and : of integers (exact rationals), signs, 1,234 and 1,234.5 (and
//   0,500 as 0.5), latex2sympy's quirks ("2 3" is 5 and "2 \frac{1}{2}" 5/2: juxtaposed numbers
//   as mixed fractions; "10\,000" is 10 * 000), percentages (50\% is 50 * (1/100)), +, -,
//   \cdot, \times, ^ with whole exponents, parentheses and brackets, a set of one element {5}
//   as the element, ^\circ, a chain of equations x = ... = 5 (its last right side against a
//   number; x = 5 as a gold assignment), \text{...} and single letters as sympy's Symbols
//   (\text{(A)} is the symbol a, \text{72} equal to 72 as sympy compares a Symbol by its name);
//   a solution's plain expressions (48/2, 10^6.) as parse_expr evaluates them; sympy's parse
//   failures where they decide the extraction ("5.", "3-", -007).
// - verify: numbers compared as sympy_expr_eq compares them: equal values; a Float rounded to 6
//   decimals against a Float or a Rational, as Float.round rounds and compares (1/3 equals
//   0.333333, not 0.3333; -0.1 not -0.0999999, whose rounding has another precision), an
//   Integer against a Float only exactly (72 equals 72.0, not 72.0000001); 50% equal to 50 and
//   to 0.5; expressions with Floats evaluated a double per step (77/3. is not \frac{77}{3}); and
//   the fallback texts (the first match's normalized text) equal as strings, as verify's string
//   pass.
//
// What it does not cover (sympy's side; such an answer is compared as its normalized text,
// spaces removed and letters lowercased, so identical forms match and equivalent ones do not):
// symbolic equivalence (\sqrt{8} vs 2\sqrt{2}, x+1 vs 1+x, \pi/2 vs \frac{\pi}{2}, \sqrt{4}
// vs 2, (x+1)^2 vs x^2+2x+1), functions and constants (\pi, e, i), matrices, sets, tuples and
// intervals of more than one element (compared as text, not as sets: {2, 1} is not {1, 2}, nor
// a pair of boxes an interval), inequalities and relations other than =, an equation against
// another beyond the same left side and an equal right side, words as products of symbols (yes
// as y*E*s), factorials, non-whole exponents of exact numbers, E-notation, integers beyond 64
// bits, sympy's own Float arithmetic inside a percentage (-212.5\% against -17/8), math_verify's
// timeouts (ICU's time limit stands in), and latex2sympy's parse failures outside the forms
// above (any other text is taken to parse).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace trainer::trl::math {

// One value math_verify extracted, reduced to what verify looks at (math_answer_internal.h).
struct MathValue;

// What math_verify's parse returns: the first extracted value that parsed (none when none did)
// and the fallback text, the normalized text of the first match tried (parse's
// fallback_mode="first_match"). Both empty: nothing matched (parse's []).
struct MathAnswer {
  std::shared_ptr<const MathValue> value;
  std::optional<std::string> fallback;

  bool empty() const { return !value && !fallback; }  // parse's []: TRL's None for a solution
  // The value in words, for logs and tests: "72", "1/2", "0.5 (float)", "50%", "text x+1",
  // "x = 5", or "none".
  std::string describe() const;
};

// math_verify.parse(text) with its defaults: a solution (the gold).
MathAnswer parse_solution(std::string_view text);

// math_verify.parse(text, [LatexExtractionConfig(normalization_config=NormalizationConfig(
// units=True), boxed_match_priority=0, try_extract_without_anchor=False)],
// extraction_mode="first_match"): a completion, as TRL's accuracy rewards parse it.
MathAnswer parse_completion(std::string_view text);

// math_verify.verify(gold, answer): whether any of the gold's (value, fallback) equals any of the
// answer's, a value against a value, a text against a text.
bool verify(const MathAnswer& gold, const MathAnswer& answer);

}  // namespace trainer::trl::math
