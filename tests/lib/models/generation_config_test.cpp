// generation_config.json as `trainer generate` reads it: Transformers' value checks (what its
// GenerationConfig or its logits processors refuse is refused here, in one line), the processors
// honoured, and decoding that is not built refused by name.
#include "lib/models/generation_config.h"

#include <gtest/gtest.h>

#include "lib/base/errors.h"
#include "tests/test_util.h"

namespace trainer::models {
namespace generation_config_test {

using json = nlohmann::ordered_json;
using testing::expect_input_error;

GenerationConfig parse(const std::string& text) {
  return parse_generation_config(json::parse(text), "g.json", 512);
}

TEST(GenerationConfig, ReadsWhatGenerateUses) {
  const GenerationConfig g = parse(
      R"({"do_sample": true, "eos_token_id": [3, 7], "bos_token_id": 1, "temperature": 0.7,
          "top_p": 0.9, "top_k": 20, "repetition_penalty": 1.05, "no_repeat_ngram_size": 3,
          "bad_words_ids": [[5], [9, 10], [3]], "max_length": 4096, "num_beams": 1,
          "transformers_version": "5.24.0", "cache_implementation": "hybrid"})");
  EXPECT_EQ(g.do_sample, true);
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{3, 7}));
  EXPECT_EQ(g.bos_token_id, 1);
  EXPECT_DOUBLE_EQ(g.repetition_penalty, 1.05);
  EXPECT_EQ(g.no_repeat_ngram_size, 3);
  // [3] stays: Transformers drops a bad word only when it is the EOS token alone.
  EXPECT_EQ(g.bad_words_ids, (std::vector<std::vector<int64_t>>{{5}, {9, 10}, {3}}));
  EXPECT_EQ(parse(R"({"eos_token_id": 3, "bad_words_ids": [[3], [4]]})").bad_words_ids,
            (std::vector<std::vector<int64_t>>{{4}}));
  // min_p: built (MinPLogitsWarper, lib/models/sampling.cpp), read like the other warpers.
  EXPECT_EQ(parse(R"({"min_p": 0.05})").min_p, 0.05);
  const GenerationConfig empty = parse("{}");
  EXPECT_FALSE(empty.min_p.has_value());
  EXPECT_FALSE(empty.do_sample.has_value());
  EXPECT_FALSE(empty.has_eos);
}

TEST(GenerationConfig, ValuesTransformersRefusesAreOneLine) {
  const std::vector<std::pair<std::string, std::string>> rows = {
      {R"({"do_sample": "yes"})", "g.json: do_sample \"yes\" is not allowed (true or false)"},
      {R"({"eos_token_id": 99999})",
       "eos_token_id 99999 is not allowed (a token id of the model's vocabulary, 0..511)"},
      {R"({"eos_token_id": -1})", "eos_token_id -1 is not allowed"},
      {R"({"eos_token_id": [2, "x"]})", "eos_token_id \"x\" is not allowed"},
      {R"({"bos_token_id": 512})", "bos_token_id 512 is not allowed"},
      {R"({"temperature": 0})", "temperature 0 is not allowed (a number > 0)"},
      {R"({"temperature": -1.5})", "temperature -1.5 is not allowed (a number > 0)"},
      {R"({"top_k": -5})", "top_k -5 is not allowed (an integer >= 0)"},
      {R"({"top_p": 2})", "top_p 2 is not allowed (a number in [0, 1])"},
      {R"({"top_p": -0.5})", "top_p -0.5 is not allowed (a number in [0, 1])"},
      {R"({"min_p": 1.5})", "min_p 1.5 is not allowed (a number in [0, 1])"},
      {R"({"max_new_tokens": "x"})", "max_new_tokens \"x\" is not allowed (an integer)"},
      {R"({"max_new_tokens": -1})", "max_new_tokens -1 is not allowed (an integer >= 1)"},
      {R"({"repetition_penalty": 0})", "repetition_penalty 0 is not allowed (a number > 0)"},
      {R"({"no_repeat_ngram_size": -2})", "no_repeat_ngram_size -2 is not allowed"},
      {R"({"bad_words_ids": []})", "bad_words_ids [] is not allowed (a non-empty list"},
      {R"({"bad_words_ids": [[600]]})", "bad_words_ids [[600]] is not allowed"},
      {R"([1])", "g.json: not a JSON object"},
  };
  for (const auto& row : rows) {  // not a structured binding: clang 14 cannot capture one
    SCOPED_TRACE(row.first);
    expect_input_error([&] { parse(row.first); }, {row.second});
  }
  // top_p 0 is greedy (Transformers keeps the likeliest token), not an error.
  EXPECT_NO_THROW(parse(R"({"top_p": 0, "temperature": 2})"));
}

TEST(GenerationConfig, DecodingThatIsNotBuiltIsRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> rows = {
      {R"({"num_beams": 2})",
       "g.json: num_beams 2 asks for beam search, which trainer generate does not build (its "
       "tokens would not be Transformers'); remove it or set it to 1"},
      {R"({"penalty_alpha": 0.6})", "penalty_alpha 0.6 asks for contrastive search"},
      {R"({"min_new_tokens": 5})", "min_new_tokens 5 asks for MinNewTokensLengthLogitsProcessor"},
      {R"({"suppress_tokens": [1]})", "suppress_tokens [1] asks for"},
      {R"({"typical_p": 0.5})", "typical_p 0.5 asks for TypicalLogitsWarper"},
      {R"({"num_return_sequences": 2})", "num_return_sequences 2 asks for several sequences"},
  };
  for (const auto& row : rows) {  // not a structured binding: clang 14 cannot capture one
    SCOPED_TRACE(row.first);
    expect_input_error([&] { parse(row.first); }, {row.second});
  }
  // Their neutral values (as Transformers writes them) are fine.
  EXPECT_NO_THROW(parse(R"({"num_beams": 1, "typical_p": 1.0, "min_length": 0,
                           "suppress_tokens": null, "guidance_scale": null})"));
}

}  // namespace generation_config_test
}  // namespace trainer::models
