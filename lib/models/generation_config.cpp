// generation_config.json: Transformers' checks of its values, and what is not built refused.
#include "lib/models/generation_config.h"

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/hf_files.h"
#include "lib/base/json_fields.h"
#include "lib/base/json_text.h"

namespace trainer::models {

namespace {

using json = nlohmann::ordered_json;

// Keys whose value, unless it is this neutral one (or null), changes which tokens
// Transformers' generate picks in a way not built here.
struct NotBuilt {
  const char* key;
  json neutral;
  const char* what;
};

const std::vector<NotBuilt>& not_built() {
  static const std::vector<NotBuilt> keys = {
      {"num_beams", 1, "beam search"},
      {"num_beam_groups", 1, "group beam search"},
      {"penalty_alpha", nullptr, "contrastive search"},
      {"diversity_penalty", 0.0, "group beam search"},
      {"num_return_sequences", 1, "several sequences"},
      {"min_length", 0, "MinLengthLogitsProcessor"},
      {"min_new_tokens", 0, "MinNewTokensLengthLogitsProcessor"},
      {"suppress_tokens", json::array(), "SuppressTokensLogitsProcessor"},
      {"begin_suppress_tokens", json::array(), "SuppressTokensAtBeginLogitsProcessor"},
      {"forced_bos_token_id", nullptr, "ForcedBOSTokenLogitsProcessor"},
      {"forced_eos_token_id", nullptr, "ForcedEOSTokenLogitsProcessor"},
      {"sequence_bias", nullptr, "SequenceBiasLogitsProcessor"},
      {"exponential_decay_length_penalty", nullptr, "ExponentialDecayLengthPenalty"},
      {"encoder_repetition_penalty", 1.0, "EncoderRepetitionPenaltyLogitsProcessor"},
      {"encoder_no_repeat_ngram_size", 0, "EncoderNoRepeatNGramLogitsProcessor"},
      {"typical_p", 1.0, "TypicalLogitsWarper"},
      {"epsilon_cutoff", 0.0, "EpsilonLogitsWarper"},
      {"eta_cutoff", 0.0, "EtaLogitsWarper"},
      {"guidance_scale", 1.0, "classifier-free guidance"},
      {"renormalize_logits", false, "LogitNormalization"},
      {"force_words_ids", nullptr, "constrained beam search"},
      {"constraints", nullptr, "constrained beam search"},
      {"dola_layers", nullptr, "DoLa decoding"},
      {"prompt_lookup_num_tokens", nullptr, "prompt lookup decoding"},
      {"watermarking_config", nullptr, "watermarking"},
  };
  return keys;
}

// A token id of the model's vocabulary: `value` of `key` (or an item of its list).
int64_t token_id(const base::JsonFields& f, const char* key, const json& value,
                 int64_t vocab_size) {
  const auto id = base::whole_number(value);
  if (!value.is_number_integer() || !id || *id < 0 || *id >= vocab_size) {
    f.not_allowed(key, value,
                  fmt::format("a token id of the model's vocabulary, 0..{}", vocab_size - 1));
  }
  return *id;
}

// do_sample and sampling's warpers. Their values are checked whether or not do_sample is on: the
// CLI's --do_sample may turn it on, and a value Transformers would refuse then is wrong here
// already.
void read_sampling(base::JsonFields& f, GenerationConfig& c) {
  if (f.has("do_sample")) c.do_sample = f.boolean("do_sample");
  if (f.has("temperature")) {
    c.temperature = f.number("temperature");
    f.check(*c.temperature > 0, "temperature", "a number > 0");
  }
  if (f.has("top_k")) c.top_k = f.integer("top_k", 0, 0);
  if (f.has("top_p")) {
    c.top_p = f.number("top_p");
    f.check(*c.top_p >= 0 && *c.top_p <= 1, "top_p", "a number in [0, 1]");
  }
  if (f.has("min_p")) {
    c.min_p = f.number("min_p");
    f.check(*c.min_p >= 0 && *c.min_p <= 1, "min_p", "a number in [0, 1]");
  }
  for (const char* key : {"max_new_tokens", "max_length"}) f.integer(key, 1, 1);
}

// eos_token_id (one or a list), bos_token_id and pad_token_id: ids of the model's vocabulary.
void read_token_ids(base::JsonFields& f, GenerationConfig& c, int64_t vocab_size) {
  if (f.has("eos_token_id")) {
    const json& v = f.at("eos_token_id");
    c.has_eos = true;
    for (const json& id : v.is_array() ? v : json::array({v})) {
      c.eos_token_ids.push_back(token_id(f, "eos_token_id", id, vocab_size));
    }
  }
  if (f.has("bos_token_id")) {
    c.bos_token_id = token_id(f, "bos_token_id", f.at("bos_token_id"), vocab_size);
  }
  if (f.has("pad_token_id")) token_id(f, "pad_token_id", f.at("pad_token_id"), vocab_size);
}

// bad_words_ids: a non-empty list of non-empty lists of token ids. Transformers drops a bad word
// that is the EOS token alone (read_token_ids first).
void read_bad_words(const base::JsonFields& f, GenerationConfig& c, int64_t vocab_size) {
  const json& v = f.at("bad_words_ids");
  const std::string allowed =
      fmt::format("a non-empty list of non-empty lists of token ids, 0..{}", vocab_size - 1);
  if (!v.is_array() || v.empty()) f.not_allowed("bad_words_ids", v, allowed);
  for (const json& word : v) {
    if (!word.is_array() || word.empty()) f.not_allowed("bad_words_ids", v, allowed);
    std::vector<int64_t> ids;
    for (const json& id : word) {
      const auto n = base::whole_number(id);
      if (!id.is_number_integer() || !n || *n < 0 || *n >= vocab_size) {
        f.not_allowed("bad_words_ids", v, allowed);
      }
      ids.push_back(*n);
    }
    if (ids.size() == 1 && c.has_eos && ids == c.eos_token_ids) continue;
    c.bad_words_ids.push_back(std::move(ids));
  }
}

// The processors honoured: RepetitionPenalty, NoRepeatNGram, NoBadWords.
void read_processors(base::JsonFields& f, GenerationConfig& c, int64_t vocab_size) {
  if (f.has("repetition_penalty")) {
    c.repetition_penalty = f.number("repetition_penalty");
    f.check(c.repetition_penalty > 0, "repetition_penalty", "a number > 0");
  }
  c.no_repeat_ngram_size = f.integer("no_repeat_ngram_size", 0, 0);
  if (f.has("bad_words_ids")) read_bad_words(f, c, vocab_size);
}

// Throws for the first key of not_built() whose value is not its neutral one.
void refuse_not_built(const base::JsonFields& f) {
  for (const NotBuilt& entry : not_built()) {
    if (!f.has(entry.key) || f.at(entry.key) == entry.neutral) continue;
    const json& v = f.at(entry.key);
    // 1.0 and 1 are the same neutral value.
    if (v.is_number() && entry.neutral.is_number() &&
        v.get<double>() == entry.neutral.get<double>()) {
      continue;
    }
    f.fail(entry.key,
           fmt::format("{} asks for {}, which trainer generate does not build (its tokens would "
                       "not be Transformers'); remove it{}",
                       base::shown(v), entry.what,
                       entry.neutral.is_null()
                           ? std::string()
                           : fmt::format(" or set it to {}", base::shown(entry.neutral))));
  }
}

}  // namespace

GenerationConfig parse_generation_config(const json& j, const std::string& source,
                                         int64_t vocab_size, bool decoding) {
  if (!j.is_object()) {
    throw InputError(fmt::format("{}: not a JSON object (a generation_config.json)", source));
  }
  base::JsonFields f(j, source, base::JsonFields::Style::kNotAllowed);
  GenerationConfig c;
  read_sampling(f, c);
  read_token_ids(f, c, vocab_size);
  read_processors(f, c, vocab_size);
  if (decoding) refuse_not_built(f);
  return c;
}

GenerationConfig read_generation_config(const std::string& dir, int64_t vocab_size) {
  const std::string path = base::join_path(dir, base::hf::kGenerationConfig);
  if (!base::exists(path)) return {};
  return parse_generation_config(base::read_json_object(path), path, vocab_size);
}

}  // namespace trainer::models
