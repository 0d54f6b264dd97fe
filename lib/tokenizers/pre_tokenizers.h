// Pre-tokenizers of tokenizer.json: how a text is cut into the words BPE merges. Split (a regex,
// under ICU, or a literal string; GPT-2's and Llama-3's patterns as scanners over ICU's classes)
// and ByteLevel (GPT-2's pattern, the prefix space), run as tokenizers runs a Sequence of them.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <unicode/uversion.h>

U_NAMESPACE_BEGIN
class RegexPattern;
U_NAMESPACE_END

namespace trainer::tokenizers {

// GPT-2's split pattern (tokenizers' ByteLevel pre-tokenizer) and Llama-3's (its Split).
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// GPT-2's bytes_to_unicode(): the printable character that stands for each byte (ByteLevel's
// alphabet, which its decoder maps back).
std::array<char32_t, 256> bytes_to_unicode();

// A match of a pattern in a piece, in bytes.
struct Span {
  size_t begin, end;
};

// One way of cutting a piece: a scanner, an ICU regex, or a literal string.
class Splitter {
 public:
  // A Split pattern as tokenizer.json gives it (`is_regex`: {"Regex": ...}, else {"String":
  // ...}); `fast`: GPT-2's and Llama-3's patterns as scanners. `where` names the file in errors.
  // Throws InputError for a pattern ICU cannot compile or Oniguruma syntax it lacks.
  static Splitter compile(std::string_view pattern, bool is_regex, bool fast,
                          const std::string& where);
  Splitter();
  Splitter(Splitter&&) noexcept;
  Splitter& operator=(Splitter&&) noexcept;
  ~Splitter();

  // Appends the matches in `s`, in order. Throws InputError when the regex backtracks past ICU's
  // time limit.
  void matches(std::string_view s, std::vector<Span>& out) const;

 private:
  enum class Scanner { kNone, kGpt2, kLlama3 };
  Scanner scanner_ = Scanner::kNone;
  std::unique_ptr<icu::RegexPattern> regex_;
  std::string literal_;  // when neither
  std::string pattern_;  // the regex as tokenizer.json gives it, and the file, for messages
  std::string where_;
};

// A stage of the pre-tokenizer; the last may be byte-level.
struct PreTokenizerStage {
  Splitter splitter;
  bool split = true;          // false: the stage does not cut (ByteLevel without use_regex)
  bool removed = false;       // Removed: the matches are dropped, not kept as pieces
  bool prefix_space = false;  // ByteLevel's add_prefix_space
};

// The stages in order; each piece a stage cuts goes through the next, and each that comes out of
// the last is a word.
class PreTokenizer {
 public:
  std::vector<PreTokenizerStage> stages;
  bool byte_level = false;  // the last stage is ByteLevel

  // Calls `word` for each word of `piece`, in order (empty words are dropped).
  void split(std::string_view piece, const std::function<void(std::string_view)>& word) const;

 private:
  void split_from(std::string_view piece, size_t stage, std::vector<std::vector<Span>>& spans,
                  const std::function<void(std::string_view)>& word) const;
};

}  // namespace trainer::tokenizers
