// generation_config.json: Transformers' checks of its values, and what is not built refused.
#include "lib/models/generation_config.h"

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
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
      {"min_p", nullptr, "MinPLogitsWarper"},
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

}  // namespace

GenerationConfig parse_generation_config(const json& j, const std::string& source,
                                         int64_t vocab_size, bool decoding) {
  if (!j.is_object()) {
    throw InputError(fmt::format("{}: not a JSON object (a generation_config.json)", source));
  }
  auto fail = [&](const char* key, const json& value, const std::string& allowed) {
    throw InputError(
        fmt::format("{}: {} {} is not allowed ({})", source, key, base::shown(value), allowed));
  };
  auto given = [&](const char* key) { return j.contains(key) && !j.at(key).is_null(); };
  auto number = [&](const char* key) {
    const json& v = j.at(key);
    if (!v.is_number()) fail(key, v, "a number");
    return v.get<double>();
  };
  auto integer = [&](const char* key) {
    const auto v = base::whole_number(j.at(key));
    if (!v || j.at(key).is_boolean()) fail(key, j.at(key), "an integer");
    return *v;
  };
  auto token_id = [&](const char* key, const json& v) {
    const auto id = base::whole_number(v);
    if (!v.is_number_integer() || !id || *id < 0 || *id >= vocab_size) {
      fail(key, v, fmt::format("a token id of the model's vocabulary, 0..{}", vocab_size - 1));
    }
    return *id;
  };
  GenerationConfig c;
  if (given("do_sample")) {
    if (!j.at("do_sample").is_boolean()) fail("do_sample", j.at("do_sample"), "true or false");
    c.do_sample = j.at("do_sample").get<bool>();
  }
  // Sampling's values are checked whether or not do_sample is on: the CLI's --do_sample may
  // turn it on, and a value Transformers would refuse then is wrong here already.
  if (given("temperature")) {
    c.temperature = number("temperature");
    if (!(*c.temperature > 0)) fail("temperature", j.at("temperature"), "a number > 0");
  }
  if (given("top_k")) {
    c.top_k = integer("top_k");
    if (*c.top_k < 0) fail("top_k", j.at("top_k"), "an integer >= 0");
  }
  if (given("top_p")) {
    c.top_p = number("top_p");
    if (!(*c.top_p >= 0 && *c.top_p <= 1)) fail("top_p", j.at("top_p"), "a number in [0, 1]");
  }
  for (const char* key : {"max_new_tokens", "max_length"}) {
    if (given(key) && integer(key) < 1) fail(key, j.at(key), "an integer >= 1");
  }
  if (given("eos_token_id")) {
    const json& v = j.at("eos_token_id");
    c.has_eos = true;
    if (v.is_array()) {
      for (const json& id : v) c.eos_token_ids.push_back(token_id("eos_token_id", id));
    } else {
      c.eos_token_ids.push_back(token_id("eos_token_id", v));
    }
  }
  if (given("bos_token_id")) c.bos_token_id = token_id("bos_token_id", j.at("bos_token_id"));
  if (given("pad_token_id")) token_id("pad_token_id", j.at("pad_token_id"));
  if (given("repetition_penalty")) {
    c.repetition_penalty = number("repetition_penalty");
    if (!(c.repetition_penalty > 0)) {
      fail("repetition_penalty", j.at("repetition_penalty"), "a number > 0");
    }
  }
  if (given("no_repeat_ngram_size")) {
    c.no_repeat_ngram_size = integer("no_repeat_ngram_size");
    if (c.no_repeat_ngram_size < 0) {
      fail("no_repeat_ngram_size", j.at("no_repeat_ngram_size"), "an integer >= 0");
    }
  }
  if (given("bad_words_ids")) {
    const json& v = j.at("bad_words_ids");
    const std::string allowed =
        fmt::format("a non-empty list of non-empty lists of token ids, 0..{}", vocab_size - 1);
    if (!v.is_array() || v.empty()) fail("bad_words_ids", v, allowed);
    for (const json& word : v) {
      if (!word.is_array() || word.empty()) fail("bad_words_ids", v, allowed);
      std::vector<int64_t> ids;
      for (const json& id : word) {
        const auto n = base::whole_number(id);
        if (!id.is_number_integer() || !n || *n < 0 || *n >= vocab_size) {
          fail("bad_words_ids", v, allowed);
        }
        ids.push_back(*n);
      }
      // Transformers drops a bad word that is the EOS token alone.
      if (ids.size() == 1 && c.has_eos && ids == c.eos_token_ids) continue;
      c.bad_words_ids.push_back(std::move(ids));
    }
  }
  for (const NotBuilt& entry : not_built()) {
    if (!decoding) break;
    if (!given(entry.key) || j.at(entry.key) == entry.neutral) continue;
    const json& v = j.at(entry.key);
    // 1.0 and 1 are the same neutral value.
    if (v.is_number() && entry.neutral.is_number() &&
        v.get<double>() == entry.neutral.get<double>()) {
      continue;
    }
    throw InputError(fmt::format(
        "{}: {} {} asks for {}, which trainer generate does not build (its tokens would not be "
        "Transformers'); remove it{}",
        source, entry.key, base::shown(v), entry.what,
        entry.neutral.is_null() ? std::string()
                                : fmt::format(" or set it to {}", base::shown(entry.neutral))));
  }
  return c;
}

GenerationConfig read_generation_config(const std::string& dir, int64_t vocab_size) {
  const std::string path = base::join_path(dir, "generation_config.json");
  if (!base::exists(path)) return {};
  return parse_generation_config(base::read_json_object(path), path, vocab_size);
}

}  // namespace trainer::models
