// What a Tokenizer is made of, as the tokenizer.json reader fills it and encode/decode use it:
// the files as read, the components (added tokens, normalizer, pre-tokenizer, BPE or Unigram,
// template, decoder), the vocabulary by id, and the special tokens tokenizer_config.json names.
// Internal to the room.
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/tokenizers/added_vocabulary.h"
#include "lib/tokenizers/bpe.h"
#include "lib/tokenizers/decoders.h"
#include "lib/tokenizers/normalizers.h"
#include "lib/tokenizers/pre_tokenizers.h"
#include "lib/tokenizers/processors.h"
#include "lib/tokenizers/tokenizer.h"
#include "lib/tokenizers/unigram.h"

namespace trainer::tokenizers {

struct Tokenizer::Impl {
  std::string path, config_path;
  std::string json_bytes, config_bytes;
  bool has_config = false;
  mutable std::string fingerprint;  // the SHA-256 of json_bytes + config_bytes, made on first use
  mutable std::once_flag fingerprint_once;

  AddedVocabulary added;
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  Bpe model;
  Unigram unigram;
  bool is_unigram = false;  // the model is `unigram`, else `model`
  TemplateProcessing post_processor;
  Decoder decoder;
  // A Metaspace stage puts its replacement before the text's first piece alone: where the first
  // piece starts after the normalizer must be tracked.
  bool origin_matters = false;

  // Every token by id ("" where none), whether the id has one, whether it is a special added one.
  std::vector<std::string> tokens;
  std::vector<bool> has_token, special, byte_token;  // byte_token: "<0xXX>" of byte_fallback

  std::optional<int32_t> bos, eos, pad, unk;

  const Vocab& vocab() const { return is_unigram ? unigram.vocab : model.vocab; }
  // The model's ids for one word.
  void tokenize_word(std::string_view word, std::vector<int32_t>& out) const;

  // The ids of `text` (valid UTF-8) without the template; with `offsets`, each id's byte span in
  // `text` there.
  void encode_text(std::string_view text, std::vector<int32_t>& out,
                   std::vector<std::pair<size_t, size_t>>* offsets = nullptr) const;
};

// What tokenizer_config.json's tokenizer_class makes of tokenizer.json: used as it is (kNone), or
// its vocabulary, merges and template kept and the rest built as Transformers 5's class builds it.
struct ClassRebuild {
  enum Kind { kNone, kLlama, kGemma, kQwen2 } kind = kNone;
  std::string name;
  PrependScheme prepend =
      PrependScheme::kFirst;        // LlamaTokenizer's, of legacy and add_prefix_space
  bool add_prefix_space = false;    // Qwen2Tokenizer's
  std::string unk_token = "<unk>";  // GemmaTokenizer's
};
// The rebuild tokenizer_config.json's parsed `config` asks for; another class is refused in one
// line that starts with `where`.
ClassRebuild class_rebuild(const nlohmann::ordered_json& config, const std::string& where);

// Fills `t`'s components from tokenizer.json's `bytes` (its vocabulary and merges read straight
// into their tables), rebuilt as `rebuild` says, refusing what is not supported, and what is not
// JSON, in one line that starts with `where` (serialization.cpp).
void read_tokenizer_json(std::string_view bytes, const std::string& where, bool fast_split,
                         const ClassRebuild& rebuild, Tokenizer::Impl& t);
// Reads the special tokens of tokenizer_config.json's parsed `config` into `t`, and the template
// its add_bos_token and add_eos_token make.
void read_tokenizer_config(const nlohmann::ordered_json& config, const std::string& where,
                           Tokenizer::Impl& t);

}  // namespace trainer::tokenizers
