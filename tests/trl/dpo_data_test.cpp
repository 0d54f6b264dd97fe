// TRL's DPO data preparation (trl/dpo_data.h): the rows equal to those TRL 1.16's DPOTrainer
// prepares on the fixtures of sft_fixtures.py (tests/reference/scripts/dpo_rows_reference.py:
// plain, conversational, implicit prompts, extract_prompt's edges, max_length); on a tokenizer of
// single characters made here, the counts and the line of each bad input; and the node cache.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/tokenizers/chat_template.h"
#include "lib/tokenizers/tokenizer.h"
#include "tests/char_tokenizer.h"
#include "tests/test_util.h"
#include "trl/data_cache.h"
#include "trl/dpo_data.h"
#include "trl/sft_data.h"

namespace trainer {
namespace dpo_data_test {

using Json = nlohmann::ordered_json;
using testing::input_error_of;
using trl::DpoRow;

// TRL's prepared rows on those fixtures (cases.json), and the data made for them (inputs/).
std::string dpo_rows_dir() { return testing::reference_dir("dpo_rows"); }

std::vector<int32_t> ints(const Json& value) { return value.get<std::vector<int32_t>>(); }

TEST(DpoParity, RowsEqualTrlsDpoTrainer) {
  const std::string dir = dpo_rows_dir();
  ASSERT_FALSE(dir.empty());
  const std::string fixtures = testing::sft_fixtures_dir();
  const Json cases = Json::parse(testing::slurp(dir + "/cases.json"));
  ASSERT_EQ(cases.size(), 10u);
  for (const Json& c : cases) {
    const std::string name = c["name"];
    const std::string model = fixtures + "/" + c["model"].get<std::string>();
    const std::string path = dir + "/" + c["data"].get<std::string>();
    trl::DpoDataOptions options;
    if (c["options"].contains("max_length")) {
      const Json& n = c["options"]["max_length"];
      options.max_length = n.is_null() ? std::nullopt : std::optional<int64_t>(n.get<int64_t>());
    }
    options.truncation_mode = c["options"].value("truncation_mode", "keep_start");
    const auto tokenizer = tokenizers::Tokenizer::load(model);
    const auto chat = tokenizers::ChatTemplate::from_dir(model);
    const trl::DpoData prepared = trl::prepare_dpo_dataset(trl::read_trl_records(path), tokenizer,
                                                           chat ? &*chat : nullptr, options, path);
    EXPECT_EQ(prepared.examples, c["examples"].get<int64_t>()) << name;
    EXPECT_EQ(prepared.implicit_prompt, name.find("implicit") != std::string::npos) << name;
    EXPECT_EQ(prepared.shape, name.find("conversational") == 0 ? trl::DpoShape::kConversational
                                                               : trl::DpoShape::kPlain)
        << name;
    const Json& expected = c["rows"];
    ASSERT_EQ(prepared.rows.size(), expected.size()) << name;
    size_t equal = 0;
    int64_t tokens = 0, identical = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
      const DpoRow& row = prepared.rows[i];
      const auto prompt = ints(expected[i]["prompt_ids"]), chosen = ints(expected[i]["chosen_ids"]),
                 rejected = ints(expected[i]["rejected_ids"]);
      EXPECT_EQ(row.prompt_ids, prompt) << name << " row " << i;
      EXPECT_EQ(row.chosen_ids, chosen) << name << " row " << i;
      EXPECT_EQ(row.rejected_ids, rejected) << name << " row " << i;
      equal += row.prompt_ids == prompt && row.chosen_ids == chosen && row.rejected_ids == rejected;
      tokens += static_cast<int64_t>(2 * prompt.size() + chosen.size() + rejected.size());
      identical += chosen == rejected;
    }
    EXPECT_EQ(prepared.dropped, prepared.examples - static_cast<int64_t>(expected.size())) << name;
    EXPECT_EQ(prepared.identical, identical) << name;
    EXPECT_EQ(prepared.tokens, tokens) << name;
    std::printf(
        "%s (%s%s): %zu of %zu rows equal to TRL's (%lld tokens, %lld dropped, %lld "
        "identical)\n",
        name.c_str(), dpo_shape_name(prepared.shape),
        prepared.implicit_prompt ? ", implicit prompt" : "", equal, expected.size(),
        static_cast<long long>(tokens), static_cast<long long>(prepared.dropped),
        static_cast<long long>(identical));
  }
}

// A folder with a tokenizer of single characters (printable ASCII, ids 1..; <unk> 0), the added
// tokens <|im_start|> <|im_end|> </s> (its eos_token) and <s>, a BOS its post-processor adds.
std::string tiny_tokenizer(const testing::TempDir& dir) {
  std::ofstream(dir.file("tokenizer.json")) << testing::char_tokenizer_json(
      {"<|im_start|>", "<|im_end|>", "</s>", "<s>"}, "<s>", /*newline_first=*/false);
  std::ofstream(dir.file("tokenizer_config.json"))
      << R"({"bos_token": "<s>", "eos_token": "</s>"})";
  return dir.path();
}

// ChatML; a "bad" role refused; the number of tools and a variable shown after the prompt.
const char* kTemplate =
    "{% for m in messages %}{% if m.role == 'bad' %}{{ raise_exception('unknown role: ' ~ m.role) "
    "}}{% endif %}<|im_start|>{{ m.role }}:{{ m.content }}<|im_end|>{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant:{% endif %}"
    "{% if tools %}[{{ tools | length }} tools]{% endif %}{% if flag %}[flag]{% endif %}";

struct Fixture {
  testing::TempDir dir;
  tokenizers::Tokenizer tokenizer = tokenizers::Tokenizer::load(tiny_tokenizer(dir));
  tokenizers::ChatTemplate chat =
      tokenizers::ChatTemplate::from_source(kTemplate, "chatml.jinja", dir.path());

  trl::DpoData prepare(const std::string& records, const trl::DpoDataOptions& options = {}) const {
    std::vector<Json> rows;
    for (const std::string& line : testing::lines_of(records)) rows.push_back(Json::parse(line));
    return trl::prepare_dpo_dataset(rows, tokenizer, &chat, options, "data.jsonl");
  }
  std::string error(const std::string& records, const trl::DpoDataOptions& options = {}) const {
    return input_error_of([&] { prepare(records, options); });
  }
  std::vector<int32_t> ids(const std::string& text, bool special = false) const {
    return tokenizer.encode(text, special);
  }
};

// Plain data: BOS on the prompt, the EOS once on each completion; the counts.
TEST(DpoInput, PlainRowsAndCounts) {
  const Fixture f;
  const trl::DpoData data = f.prepare(R"({"prompt": "ab", "chosen": "c", "rejected": "d</s>"})"
                                      "\n"
                                      R"({"prompt": "abcd", "chosen": "e", "rejected": "f"})"
                                      "\n"
                                      R"({"prompt": "", "chosen": "same", "rejected": "same"})");
  EXPECT_EQ(data.shape, trl::DpoShape::kPlain);
  EXPECT_FALSE(data.implicit_prompt);
  ASSERT_EQ(data.rows.size(), 3u);
  EXPECT_EQ(data.rows[0].prompt_ids, f.ids("<s>ab"));
  EXPECT_EQ(data.rows[0].chosen_ids, f.ids("c</s>"));
  EXPECT_EQ(data.rows[0].rejected_ids, f.ids("d</s>"));
  EXPECT_EQ(data.rows[2].prompt_ids, f.ids("<s>"));
  EXPECT_EQ(data.examples, 3);
  EXPECT_EQ(data.identical, 1);
  EXPECT_EQ(data.dropped, 0);
  EXPECT_EQ(data.tokens, (6 + 2 + 2) + (10 + 2 + 2) + (2 + 5 + 5));

  trl::DpoDataOptions short_prompts;
  short_prompts.max_length = 4;  // "<s>abcd" (5) and "<s>ab" (3) against 4
  const trl::DpoData kept = f.prepare(R"({"prompt": "ab", "chosen": "c", "rejected": "d"})"
                                      "\n"
                                      R"({"prompt": "abc", "chosen": "e", "rejected": "e"})"
                                      "\n"
                                      R"({"prompt": "abcd", "chosen": "e", "rejected": "e"})",
                                      short_prompts);
  EXPECT_EQ(kept.rows.size(), 1u);
  EXPECT_EQ(kept.dropped, 2);
  EXPECT_EQ(kept.identical, 0);                // counted among the rows kept
  short_prompts.truncation_mode = "keep_end";  // the collator keeps the end: nothing dropped
  const trl::DpoData all =
      f.prepare(R"({"prompt": "abcd", "chosen": "e", "rejected": "f"})", short_prompts);
  EXPECT_EQ(all.rows.size(), 1u);
  EXPECT_EQ(all.dropped, 0);
  EXPECT_EQ(all.rows[0].prompt_ids.size(), 5u);  // the collator truncates, not this
  // Every prompt too long: the cause in one line, not an empty data set later.
  short_prompts.truncation_mode = "keep_start";
  try {
    f.prepare(R"({"prompt": "abcd", "chosen": "e", "rejected": "f"})"
              "\n"
              R"({"prompt": "abcde", "chosen": "e", "rejected": "f"})",
              short_prompts);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "data.jsonl: every one of the 2 pairs has a prompt of max_length 4 tokens or more, "
              "and TRL drops such pairs under keep_start (they would keep no completion token): "
              "raise max_length, or give truncation_mode keep_end");
  }
}

// Implicit prompts: texts split at their common start (a space before the difference goes to
// the completions), conversations at their common turns; tools and variables reach the template.
TEST(DpoInput, ImplicitPromptsAndTemplateInputs) {
  const Fixture f;
  const trl::DpoData plain =
      f.prepare(R"({"chosen": "Q: sky? A: blue", "rejected": "Q: sky? A: red"})");
  EXPECT_TRUE(plain.implicit_prompt);
  EXPECT_EQ(plain.rows[0].prompt_ids, f.ids("<s>Q: sky? A:"));
  EXPECT_EQ(plain.rows[0].chosen_ids, f.ids(" blue</s>"));
  const std::string user = R"({"role": "user", "content": "hi"})";
  const std::string chat = "{\"chosen\": [" + user +
                           R"(, {"role": "assistant", "content": "yo"}],)" + " \"rejected\": [" +
                           user +
                           R"(, {"role": "assistant", "content": "no"}], "tools": "[{}, {}]",)" +
                           R"( "chat_template_kwargs": {"flag": true}})";
  const trl::DpoData conversation = f.prepare(chat);
  EXPECT_EQ(conversation.shape, trl::DpoShape::kConversational);
  ASSERT_EQ(conversation.rows.size(), 1u);
  // The prompt alone ends "assistant:[2 tools][flag]", with a completion "assistant:yo...": the
  // completions start where they diverge.
  EXPECT_EQ(conversation.rows[0].prompt_ids,
            f.ids("<|im_start|>user:hi<|im_end|><|im_start|>assistant:"));
  EXPECT_EQ(conversation.rows[0].chosen_ids, f.ids("yo<|im_end|>[2 tools][flag]"));
  EXPECT_EQ(conversation.rows[0].rejected_ids, f.ids("no<|im_end|>[2 tools][flag]"));
}

TEST(DpoInput, EachBadInputIsOneLine) {
  const Fixture f;
  const std::string plain = R"({"prompt": "a", "chosen": "b", "rejected": "c"})";
  EXPECT_EQ(f.error(R"({"text": "a"})"),
            "data.jsonl row 1 is no shape of preference data TRL knows (its columns: 'text'); "
            "TRL's DPOTrainer reads 'chosen' and 'rejected' (two texts, or two lists of {role, "
            "content} messages), with a 'prompt' of the same kind, or without one when row 1 has "
            "none (the prompt is then their common start)");
  EXPECT_EQ(f.error(plain + "\n" + R"({"prompt": "a", "chosen": "b"})"),
            "data.jsonl row 2 has no 'rejected' (its columns: 'prompt', 'chosen'); TRL's "
            "DPOTrainer reads 'chosen' and 'rejected' (two texts, or two lists of {role, content} "
            "messages), with a 'prompt' of the same kind, or without one when row 1 has none (the "
            "prompt is then their common start)");
  EXPECT_EQ(f.error(R"({"prompt": "a", "rejected": "b", "chosen": 3})"),
            "data.jsonl row 1: 'chosen' is an integer (3), not a text or a list of messages");
  EXPECT_EQ(
      f.error(R"({"prompt": [{"role": "user", "content": "a"}], "chosen": "b", "rejected": "c"})"),
      "data.jsonl row 1: 'prompt' is a list of messages and 'chosen' a text; a row's prompt, "
      "chosen and rejected are all texts or all lists of messages (TRL's is_conversational looks "
      "at one of them, which one left to Python's set order)");
  EXPECT_EQ(
      f.error(
          plain + "\n" +
          R"({"prompt": [{"role": "user", "content": "a"}], "chosen": [{"role": "assistant", "content": "b"}], "rejected": [{"role": "assistant", "content": "c"}]})"),
      "data.jsonl row 2 is conversational preference data ('chosen' is a list of messages), and "
      "row 1 is plain ('chosen' is a text); every row holds what row 1 holds");
  EXPECT_EQ(
      f.error(
          R"({"prompt": [{"from": "human", "value": "a"}], "chosen": [{"from": "gpt", "value": "b"}], "rejected": [{"from": "gpt", "value": "c"}]})"),
      "data.jsonl row 1: message 1 of 'prompt' is an object "
      "({\"from\":\"human\",\"value\":\"a\"}), not a message (an object with 'role' and "
      "'content'); TRL's DPOTrainer does not convert ShareGPT's {from, value} messages (it fails "
      "on them): give {role, content}");
  EXPECT_EQ(
      f.error(
          R"({"prompt": [{"role": "bad", "content": "a"}], "chosen": [{"role": "assistant", "content": "b"}], "rejected": [{"role": "assistant", "content": "c"}]})"),
      "data.jsonl row 1: the chat template refuses the conversation: chat template chatml.jinja "
      "line 1: raise_exception: unknown role: bad");
  EXPECT_EQ(
      f.error(
          R"({"prompt": [], "chosen": [{"role": "assistant", "content": "b"}], "rejected": [{"role": "assistant", "content": "c"}]})"),
      "data.jsonl row 1: 'prompt' is an empty list; a conversation holds at least one message");
  EXPECT_EQ(f.error(R"({"chosen": "", "rejected": "c"})"),
            "data.jsonl row 1: 'chosen' is an empty text, and TRL's extract_prompt (row 1 has no "
            "'prompt') fails on it (UnboundLocalError) as it looks for the common start of chosen "
            "and rejected");
  EXPECT_EQ(
      f.error(
          R"({"chosen": [{"role": "user", "content": "b"}], "rejected": [{"role": "user", "content": "c"}]})"),
      "data.jsonl row 1: 'chosen' and 'rejected' share no first message, so the prompt TRL's "
      "extract_prompt finds in them (their common start) is empty, which TRL fails on; give a "
      "'prompt' column, or pairs that start with the same turns");
  EXPECT_EQ(f.error(plain, {std::nullopt, "keep_middle", std::nullopt}),
            "truncation_mode 'keep_middle' is not keep_start or keep_end (TRL: Unsupported "
            "truncation mode)");
  EXPECT_EQ(
      f.error(plain, {0, "keep_start", std::nullopt}),
      "max_length 0 is not a number of tokens; give one of at least 1, or null for no truncation");
  EXPECT_EQ(f.error(""), "data.jsonl holds no records");
}

trl::DpoData sample() {
  trl::DpoData data;
  data.shape = trl::DpoShape::kConversational;
  data.implicit_prompt = true;
  data.examples = 4;
  data.dropped = 1;
  data.identical = 1;
  data.rows.push_back({{1, 2, 3}, {4, 5}, {4, 5}});
  data.rows.push_back({{}, {6}, {7, 8, 9}});
  data.tokens = 6 + 2 + 2 + 0 + 1 + 3;
  return data;
}

TEST(DpoCache, WhatIsWrittenIsReadBackWhole) {
  testing::TempDir tmp;
  const std::string path = tmp.file("dpo/key.bin");
  trl::write_dpo_cache(path, sample());
  const auto got = trl::read_dpo_cache(path);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->shape, trl::DpoShape::kConversational);
  EXPECT_TRUE(got->implicit_prompt);
  EXPECT_EQ(got->examples, 4);
  EXPECT_EQ(got->dropped, 1);
  EXPECT_EQ(got->identical, 1);
  EXPECT_EQ(got->tokens, 14);
  ASSERT_EQ(got->rows.size(), 2u);
  EXPECT_EQ(got->rows[0].prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(got->rows[0].rejected_ids, (std::vector<int32_t>{4, 5}));
  EXPECT_TRUE(got->rows[1].prompt_ids.empty());
  EXPECT_EQ(got->rows[1].rejected_ids, (std::vector<int32_t>{7, 8, 9}));
}

TEST(DpoCache, ADamagedOrForeignFileIsNoCache) {
  testing::TempDir tmp;
  const std::string path = tmp.file("key.bin");
  EXPECT_FALSE(trl::read_dpo_cache(path).has_value());  // absent
  trl::write_dpo_cache(path, sample());
  const std::string whole = testing::slurp(path);
  for (size_t cut = 0; cut < whole.size(); ++cut) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << whole.substr(0, cut);
    EXPECT_FALSE(trl::read_dpo_cache(path).has_value()) << "cut at " << cut;
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc) << whole << "x";
  EXPECT_FALSE(trl::read_dpo_cache(path).has_value());
  std::string lengths = whole;
  lengths[8 + 7 * 8] = 2;  // the first list's length: the rows no longer add up to the tokens
  std::ofstream(path, std::ios::binary | std::ios::trunc) << lengths;
  EXPECT_FALSE(trl::read_dpo_cache(path).has_value());
  trl::SftData sft;  // an SFT cache is no DPO cache
  trl::write_sft_cache(path, sft);
  EXPECT_FALSE(trl::read_dpo_cache(path).has_value());
}

}  // namespace dpo_data_test
}  // namespace trainer
