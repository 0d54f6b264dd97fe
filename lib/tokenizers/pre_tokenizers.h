// Pre-tokenizers of tokenizer.json: how a text is cut into the words the model tokenizes. Split
// (a regex, under ICU, or a literal string; GPT-2's and Llama-3's patterns as scanners over ICU's
// classes), ByteLevel (GPT-2's pattern, the prefix space) and Metaspace (spaces as "▁", the
// prefix, a word per "▁"), run as tokenizers runs a Sequence of them.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <unicode/uversion.h>

#include "lib/tokenizers/normalizers.h"

U_NAMESPACE_BEGIN
class RegexPattern;
U_NAMESPACE_END

namespace trainer::tokenizers {

// GPT-2's split pattern (tokenizers' ByteLevel pre-tokenizer) and Llama-3's (its Split).
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen2's (Transformers' Qwen2Tokenizer): Llama-3's with one digit a piece.
inline constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

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
  // ...}); `fast`: GPT-2's and Llama-3's patterns as scanners. `where` names the file in errors,
  // `what` the pattern. Throws InputError for a pattern ICU cannot compile or Oniguruma syntax it
  // lacks. Oniguruma's ^ and $ are line anchors, as ICU's are in its multiline mode.
  static Splitter compile(std::string_view pattern, bool is_regex, bool fast,
                          const std::string& where,
                          const std::string& what = "the pre_tokenizer's Split pattern");
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
  std::string pattern_;  // the regex as tokenizer.json gives it, the file and what it is, for
  std::string where_;    // messages
  std::string what_;
};

// What a Split does with its matches (tokenizers' SplitDelimiterBehavior).
enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Metaspace's prepend_scheme: the replacement put before every piece, before the one that starts
// the text, or before none.
enum class PrependScheme { kAlways, kFirst, kNever };

// A stage of the pre-tokenizer; the last may be byte-level.
struct PreTokenizerStage {
  Splitter splitter;
  bool split = true;  // false: the stage does not cut (ByteLevel without use_regex)
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool prefix_space = false;  // ByteLevel's add_prefix_space
  // Metaspace: spaces become `replacement`, which goes in front as `prepend` says; `split`: a
  // word starts at each replacement (MergedWithNext).
  bool metaspace = false;
  std::string replacement;
  PrependScheme prepend = PrependScheme::kAlways;
};

// The stages in order; each piece a stage cuts goes through the next, and each that comes out of
// the last is a word.
class PreTokenizer {
 public:
  std::vector<PreTokenizerStage> stages;
  bool byte_level = false;  // the last stage is ByteLevel

  // Adds the stages of tokenizer.json's "pre_tokenizer" (not null), refusing what is not built in
  // one line; `fast`: GPT-2's and Llama-3's patterns as scanners.
  void read(const nlohmann::ordered_json& j, const JsonReader& reader, bool fast);
  // Metaspace: "▁" for spaces, before the text as `scheme` says, `split` into words at each.
  void add_metaspace(PrependScheme scheme, bool split);
  // Whether a Metaspace stage prepends its replacement to the text's first piece alone.
  bool origin_matters() const;

  // A word and, when the piece's alignment was given, its bytes' (else nullptr).
  using WordFn = std::function<void(std::string_view word, const Align* align)>;
  // Calls `word` for each word of `piece`, in order (empty words are dropped). `align`: the
  // piece's bytes' alignment, or nullptr; `at_origin`: the piece starts the text (Metaspace's
  // "first" puts its replacement before it alone).
  void split(std::string_view piece, const Align* align, bool at_origin, const WordFn& word) const;

 private:
  void split_from(std::string_view piece, const Align* align, bool at_origin, size_t stage,
                  std::vector<std::vector<Span>>& spans, const WordFn& word) const;
};

}  // namespace trainer::tokenizers
