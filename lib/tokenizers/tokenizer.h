// Hugging Face tokenizers from their tokenizer.json, torch-free: byte-level BPE as GPT-2, Llama-3
// and Qwen save it, SentencePiece's BPE and Unigram as Llama 2, Mistral and Gemma save them, with
// the ids the `tokenizers` library (Rust) gives, on ICU's Unicode classes.
//
// Supported (anything else is an InputError naming the file and the component):
//   normalizer      null, Sequence, Prepend, Replace (String or Regex), NFC, NFD, NFKC, NFKD
//                   (Unicode 9.0's characters, as the tokenizers wheel), Lowercase, Strip,
//                   StripAccents, Precompiled with an empty charsmap; run on each piece between
//                   the added tokens that are not normalized
//   pre_tokenizer   null, ByteLevel (add_prefix_space, use_regex: GPT-2's split pattern),
//                   Split (a Regex or String pattern, every behavior, invert false), Metaspace
//                   (replacement, prepend_scheme always/first/never, split), Sequence of those
//                   (ByteLevel last)
//   model           BPE (merges as "a b" strings or ["a", "b"] pairs, ignore_merges, unk_token,
//                   fuse_unk, byte_fallback); no dropout, continuing_subword_prefix or
//                   end_of_word_suffix. Unigram (unk_id, byte_fallback)
//   added_tokens    normalized ones matched (and decoded) in their normalized form, single_word,
//                   lstrip, rstrip; ids by content as tokenizers gives them
//   post_processor  null, ByteLevel (no effect on ids), TemplateProcessing (its `single`, and
//                   `pair` for a pair of texts), Sequence of those
//   decoder         null, ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence
//   truncation, padding: null
// tokenizer_config.json's tokenizer_class: PreTrainedTokenizerFast, TokenizersBackend and
// GPT2Tokenizer read tokenizer.json as it is; LlamaTokenizer, GemmaTokenizer and Qwen2Tokenizer
// (Fast or not) keep its vocabulary, merges and template and build the rest as Transformers 5.24
// builds them; add_bos_token / add_eos_token make the template, as update_post_processor does.
// Patterns are Oniguruma's (what `tokenizers` compiles); they run under ICU's regular expressions
// with `\s` and `\S` rewritten as \p{White_Space} and \P{White_Space} (Oniguruma's `\s` is exactly
// the White_Space property, U+0085 and U+000B included, which ICU's `\s` lacks). GPT-2's and
// Llama-3's patterns run as hand-written scanners over the same ICU classes (the same splits,
// several times faster); `Options::fast_split = false` runs them under ICU's regex instead.
// ICU 72 has Unicode 15.0, the `tokenizers` wheel's Oniguruma Unicode 16.0: only code points first
// assigned in Unicode 16 (4924 letters, 80 digits) are classed differently.
//
// Text that is not valid UTF-8 is read as Python's bytes.decode("utf-8", errors="replace") reads
// it (what open(path, errors="replace") hands `tokenizers`): each maximal subpart of an ill-formed
// sequence (Unicode's recommended practice) becomes one U+FFFD (base::replace_invalid_utf8).
//
// The room follows `tokenizers`' own seams: added_vocabulary (the added tokens), normalizers,
// pre_tokenizers (Split, ByteLevel, Metaspace), bpe and unigram (the models), processors
// (TemplateProcessing), decoders, serialization (tokenizer.json and tokenizer_config.json read
// into those), and this file: the Tokenizer that runs them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trainer::tokenizers {

class Tokenizer {
 public:
  struct Options {
    bool fast_split = true;  // GPT-2's and Llama-3's patterns as scanners (false: ICU regex)
  };

  // Reads DIR/tokenizer.json (or a path to a tokenizer.json file) and, when present beside it,
  // tokenizer_config.json (bos_token, eos_token, pad_token, unk_token as strings or
  // {"content": ...}). Throws InputError with one line naming the file and the field/component
  // for anything unsupported or corrupt.
  static Tokenizer load(const std::string& path);
  static Tokenizer load(const std::string& path, const Options& options);

  // A tokenizer from tokenizer.json's bytes alone (no tokenizer_config.json); `where` names it in
  // errors. Throws InputError as load does.
  static Tokenizer from_json(std::string json_bytes, const std::string& where);
  static Tokenizer from_json(std::string json_bytes, const std::string& where,
                             const Options& options);

  // The ids `tokenizers` gives for `text` (tokenizer(text)["input_ids"] in Transformers: with the
  // post-processor's special tokens when add_special_tokens). Thread-safe.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // tokenizer(text, pair, truncation=True, max_length=max_length)["input_ids"] of a fast
  // tokenizer, with the special tokens: the text's ids (and the pair's, when `pair` is given) cut
  // by `tokenizers`' LongestFirst truncation (right side, no stride) to max_length less the
  // tokens the template adds, then the template (`single`, or `pair`) around them; without a
  // template a pair's ids follow the text's. Throws std::invalid_argument when max_length is
  // shorter than the tokens the template adds (special_tokens_added). Thread-safe.
  std::vector<int32_t> encode_truncated(std::string_view text, const std::string_view* pair,
                                        size_t max_length) const;
  // How many special tokens encoding adds to a text (pair false) or a pair of texts
  // (num_special_tokens_to_add).
  size_t special_tokens_added(bool pair) const;
  // encode(text, false) with each id's byte span in `text` (tokenizers' offsets, in bytes: a
  // byte-level token's bytes are its characters; an added token its match), as the assistant
  // mask of a chat template reads them. Text that is not UTF-8 is fixed first (spans then refer
  // to the fixed text).
  std::vector<int32_t> encode_with_offsets(std::string_view text,
                                           std::vector<std::pair<size_t, size_t>>& offsets) const;
  // The text of `ids` as `tokenizers` decodes it (ids without a token are left out, as there;
  // skip_special_tokens leaves out the added tokens marked special).
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;

  int64_t vocab_size() const;  // len(tokenizer): the highest id + 1, added tokens included
  std::optional<int32_t> token_to_id(const std::string& token) const;
  std::optional<std::string> id_to_token(int32_t id) const;
  std::optional<int32_t> bos_token_id() const;
  std::optional<int32_t> eos_token_id() const;
  std::optional<int32_t> pad_token_id() const;
  std::optional<int32_t> unk_token_id() const;
  // The SHA-256 of tokenizer.json's bytes followed by tokenizer_config.json's (when read), in hex:
  // a cache key.
  const std::string& fingerprint() const;
  // The tokenizer.json read (its path as given or found).
  const std::string& path() const;

  // Writes tokenizer.json and tokenizer_config.json (as read, byte for byte; the config only when
  // one was read) into `dir`, created when missing, as save_pretrained would hand them back.
  void save(const std::string& dir) const;
  // What save writes: file name -> contents.
  std::map<std::string, std::string> files() const;

  struct Impl;

 private:
  std::shared_ptr<const Impl> impl_;
};

}  // namespace trainer::tokenizers
