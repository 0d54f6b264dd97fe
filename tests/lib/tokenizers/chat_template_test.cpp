// Every real chat template TRL 1.16 ships, on conversations of every shape they take (system or
// not, multi-turn, tool calls with a tools list, reasoning, non-ASCII and text that looks like
// Jinja, content as a list of parts), with and without the generation prompt: our rendering
// equals Transformers' apply_chat_template(tokenize=False) byte for byte, the {% generation %}
// spans equal return_assistant_tokens_mask's, and a conversation Transformers refuses is refused
// (tests/reference/scripts/chat_templates.py renders the reference).
#include <cstdio>
#include <fstream>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "lib/base/files.h"
#include "lib/tokenizers/chat_template.h"
#include "lib/tokenizers/tokenizer.h"
#include "tests/test_util.h"

namespace trainer::tokenizers {
namespace {

TEST(ChatTemplate, TrlTemplatesRenderAsTransformers) {
  const std::string ref = testing::reference_dir("chat_templates");
  ASSERT_FALSE(ref.empty());
  const auto conversations =
      nlohmann::ordered_json::parse(base::read_file(ref + "/conversations.json"));
  std::ifstream cases(ref + "/cases.jsonl");
  std::map<std::string, ChatTemplate> templates, masked;
  const Tokenizer tokenizer = Tokenizer::load(testing::hf_fixtures_dir() + "/tokenizer_llama3");
  std::string line;
  int equal = 0, refused = 0, spans = 0, masks = 0, total = 0;
  std::set<std::string> names;
  while (std::getline(cases, line)) {
    const auto c = nlohmann::ordered_json::parse(line);
    const std::string name = c["template"];
    names.insert(name);
    auto it = templates.find(name);
    if (it == templates.end()) {
      it = templates
               .emplace(name, ChatTemplate::from_source(base::read_file(ref + "/templates/" + name),
                                                        name, ref + "/tokenizer"))
               .first;
      it->second.set_clock([] { return std::time_t{1700000000}; });
    }
    const auto& conversation = conversations[c["conversation"].get<size_t>()];
    ChatRequest request;
    request.messages = conversation["messages"];
    if (conversation.contains("tools")) request.tools = conversation["tools"];
    request.add_generation_prompt = c["add_generation_prompt"];
    ++total;
    const std::string where = line.substr(0, 120);
    if (c.contains("error")) {
      EXPECT_THROW(it->second.apply(request), jinja::TemplateError) << where;
      ++refused;
      continue;
    }
    jinja::Rendered r;
    try {
      r = it->second.apply(request);
    } catch (const std::exception& e) {
      ADD_FAILURE() << where << ": " << e.what();
      continue;
    }
    EXPECT_EQ(r.text, c["text"].get<std::string>()) << where;
    equal += r.text == c["text"].get<std::string>();
    if (c.contains("generation_indices")) {
      std::vector<std::pair<size_t, size_t>> expected;
      for (const auto& s : c["generation_indices"]) expected.emplace_back(s[0], s[1]);
      EXPECT_EQ(r.generation_chars, expected) << where;
      spans += r.generation_chars == expected;
    }
    if (c.contains("assistant_masks")) {
      // The same template under the fixture's Llama-3-style tokenizer and its special tokens:
      // ids and return_assistant_tokens_mask's mask.
      auto m = masked.find(name);
      if (m == masked.end()) {
        m = masked
                .emplace(name, ChatTemplate::from_source(
                                   it->second.source(), name,
                                   testing::hf_fixtures_dir() + "/tokenizer_llama3"))
                .first;
        m->second.set_clock([] { return std::time_t{1700000000}; });
      }
      const jinja::Rendered rm = m->second.apply(request);
      std::vector<std::pair<size_t, size_t>> offsets;
      const std::vector<int32_t> ids = tokenizer.encode_with_offsets(rm.text, offsets);
      const std::vector<int8_t> mask = assistant_tokens_mask(offsets, rm.generation_bytes);
      EXPECT_EQ(std::vector<int64_t>(ids.begin(), ids.end()),
                c["input_ids"].get<std::vector<int64_t>>())
          << where;
      EXPECT_EQ(std::vector<int64_t>(mask.begin(), mask.end()),
                c["assistant_masks"].get<std::vector<int64_t>>())
          << where;
      masks += std::vector<int64_t>(mask.begin(), mask.end()) ==
               c["assistant_masks"].get<std::vector<int64_t>>();
    }
  }
  std::printf(
      "chat templates: %zu templates x %zu conversations x 2 prompt settings = %d cases: "
      "%d rendered equal (%d with generation spans equal, %d with assistant masks equal), %d "
      "refused as Transformers refuses them\n",
      names.size(), conversations.size(), total, equal, spans, masks, refused);
  EXPECT_EQ(names.size(), 72u);
  EXPECT_EQ(equal + refused, total);
}

TEST(ChatTemplate, FolderTemplateAndSpecialTokens) {
  testing::TempDir tmp;
  const std::string dir = tmp.path();
  base::write_file_atomic(
      dir + "/tokenizer_config.json",
      R"({"bos_token": {"content": "<s>"}, "eos_token": "</s>",)"
      R"( "chat_template": "{{ bos_token }}{% for m in messages %}{{ m.role }}:)"
      R"({{ m.content }}{{ eos_token }}{% endfor %}"})");
  auto chat = ChatTemplate::from_dir(dir);
  ASSERT_TRUE(chat);
  ChatRequest request;
  request.messages =
      nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi", "x": null}])");
  EXPECT_EQ(chat->apply(request).text, "<s>user:hi</s>");
  // chat_template.jinja beside it wins, as Transformers 5 reads it.
  base::write_file_atomic(dir + "/chat_template.jinja", "{{ messages[0].content | upper }}\n");
  EXPECT_EQ(ChatTemplate::from_dir(dir)->apply(request).text, "HI");
  base::write_file_atomic(dir + "/chat_template.jinja",
                          "{{ raise_exception('no ' ~ messages[0].role) }}");
  try {
    ChatTemplate::from_dir(dir)->apply(request);
    ADD_FAILURE() << "no error";
  } catch (const jinja::TemplateError& e) {
    EXPECT_EQ(e.kind, jinja::TemplateError::Kind::kRaised);
    EXPECT_EQ(e.detail, "no user");
  }
}

}  // namespace
}  // namespace trainer::tokenizers
