// generation_config.json of a Hugging Face folder, as `trainer generate` reads it: the values
// Transformers' GenerationConfig and its logits processors check, checked here alike, and the
// decoding it asks for that is not built (beam search, ...) refused by name rather than ignored.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainer::models {

struct GenerationConfig {
  std::optional<bool> do_sample;  // unset: greedy (Transformers' default)
  // Sampling's warpers (unset: Transformers' defaults, temperature 1.0, top_k 50, top_p 1.0, no
  // min_p).
  std::optional<double> temperature, top_p, min_p;
  std::optional<int64_t> top_k;
  std::vector<int64_t> eos_token_ids;  // empty with !has_eos: the model config's
  bool has_eos = false;
  std::optional<int64_t> bos_token_id;
  // The processors honoured, in Transformers' order before sampling's: RepetitionPenalty
  // (1: off), NoRepeatNGram (0: off), NoBadWords (each a token sequence; [eos] alone dropped).
  double repetition_penalty = 1.0;
  int64_t no_repeat_ngram_size = 0;
  std::vector<std::vector<int64_t>> bad_words_ids;
};

// Reads the JSON object of generation_config.json (`source` names it in messages) for a model of
// `vocab_size` tokens. Throws InputError "<source>: <key> <value> is not allowed (<what is>)"
// for a value Transformers refuses (do_sample "yes", temperature <= 0, top_k < 0, top_p outside
// [0, 1], max_new_tokens < 1, an id outside the vocabulary), and "<source>: <key> <value>: <what>
// is not built here ..." for decoding that would give other tokens than the one built here
// (num_beams > 1, min_new_tokens, suppress_tokens, ...) unless `decoding` is false (a folder
// trained or merged, whose file goes on as it is: only what Transformers would refuse loading it).
GenerationConfig parse_generation_config(const nlohmann::ordered_json& json,
                                         const std::string& source, int64_t vocab_size,
                                         bool decoding = true);

// `dir`/generation_config.json parsed; the defaults when the folder has none.
GenerationConfig read_generation_config(const std::string& dir, int64_t vocab_size);

}  // namespace trainer::models
