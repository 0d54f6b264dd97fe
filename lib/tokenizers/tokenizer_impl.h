// What a Tokenizer is made of, as the tokenizer.json reader fills it and encode/decode use it:
// the files as read, the components (added tokens, pre-tokenizer, BPE, template, decoder), the
// vocabulary by id, and the special tokens tokenizer_config.json names. Internal to the room.
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
#include "lib/tokenizers/pre_tokenizers.h"
#include "lib/tokenizers/processors.h"
#include "lib/tokenizers/tokenizer.h"

namespace trainer::tokenizers {

struct Tokenizer::Impl {
  std::string path, config_path;
  std::string json_bytes, config_bytes;
  bool has_config = false;
  mutable std::string fingerprint;  // the SHA-256 of json_bytes + config_bytes, made on first use
  mutable std::once_flag fingerprint_once;

  AddedVocabulary added;
  PreTokenizer pre_tokenizer;
  Bpe model;
  TemplateProcessing post_processor;
  Decoder decoder;

  // Every token by id ("" where none), whether the id has one, whether it is a special added one.
  std::vector<std::string> tokens;
  std::vector<bool> has_token, special;

  std::optional<int32_t> bos, eos, pad, unk;

  // The ids of `text` (valid UTF-8) without the template.
  void encode_text(std::string_view text, std::vector<int32_t>& out) const;
  // encode_text with each id's byte span in `text` in `offsets`.
  void encode_text(std::string_view text, std::vector<int32_t>& out,
                   std::vector<std::pair<size_t, size_t>>& offsets) const;
};

// Fills `t`'s components from tokenizer.json's `bytes` (its vocabulary and merges read straight
// into their tables), refusing what is not supported, and what is not JSON, in one line that
// starts with `where` (serialization.cpp).
void read_tokenizer_json(std::string_view bytes, const std::string& where, bool fast_split,
                         Tokenizer::Impl& t);
// Reads the special tokens of tokenizer_config.json's parsed `config` into `t`.
void read_tokenizer_config(const nlohmann::ordered_json& config, const std::string& where,
                           Tokenizer::Impl& t);

}  // namespace trainer::tokenizers
