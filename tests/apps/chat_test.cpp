// `trainer chat` and `trainer generate --chat` through the real binary on a tiny Qwen3 folder with
// a chat template: each greedy answer of a three-turn conversation (from a pipe, a message a
// line) equals Transformers' generate on apply_chat_template of the conversation so far, token for
// token (tests/reference/scripts/chat_reference.py); /clear starts over; `trainer chat-template`
// prints each line as a JSON string; a folder without a template and a template that refuses the
// conversation are one line and exit code 2.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/base/files.h"
#include "tests/test_util.h"

namespace trainer {
namespace chat_test {

using testing::run;
using testing::slurp;
using testing::TempDir;

const std::string& kTrainer = testing::kTrainerBin;

#define NEED_REFERENCE(dir)                                         \
  const std::string dir = testing::reference_dir("chat_reference"); \
  ASSERT_FALSE(dir.empty())

TEST(ChatCli, GreedyAnswersEqualTransformersGenerateTurnByTurn) {
  NEED_REFERENCE(ref);
  const auto expected = nlohmann::json::parse(slurp(ref + "/reference.json"));
  TempDir tmp;
  std::string input, answers;
  for (const auto& turn : expected["turns"]) input += turn.get<std::string>() + "\n";
  for (const auto& a : expected["answers"]) answers += a.get<std::string>() + "\n";
  base::write_file_atomic(tmp.file("in"), input + "/exit\nnot read\n");
  const auto n = std::to_string(expected["max_new_tokens"].get<int>());
  const auto result =
      run(kTrainer + " chat " + ref + "/model --system '" + expected["system"].get<std::string>() +
          "' --max_new_tokens " + n + " < " + tmp.file("in"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, answers);
  EXPECT_EQ(result.err, "");
  // /clear forgets the conversation: the first turn asked again gets the first answer again.
  const std::string first = expected["turns"][0].get<std::string>() + "\n";
  base::write_file_atomic(tmp.file("clear"), first + "/clear\n" + first);
  const auto cleared =
      run(kTrainer + " chat " + ref + "/model --system '" + expected["system"].get<std::string>() +
          "' --max_new_tokens " + n + " < " + tmp.file("clear"));
  ASSERT_EQ(cleared.exit_code, 0) << cleared.err;
  const std::string one = expected["answers"][0].get<std::string>() + "\n";
  EXPECT_EQ(cleared.out, one + one);
  const auto generated = run(kTrainer + " generate " + ref + "/model --chat --prompt '" +
                             expected["turns"][0].get<std::string>() + "' --max_new_tokens " + n);
  ASSERT_EQ(generated.exit_code, 0) << generated.err;
  EXPECT_EQ(generated.out, expected["generate_chat"].get<std::string>() + "\n");
}

TEST(ChatCli, ChatTemplatePrintsEachConversationAsAJsonString) {
  NEED_REFERENCE(ref);
  TempDir tmp;
  base::write_file_atomic(tmp.file("c.jsonl"),
                          "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi \\u00e9\"}]}\n\n"
                          "{\"messages\": [{\"role\": \"system\", \"content\": \"S\"}]}\n");
  const auto result = run(kTrainer + " chat-template --tokenizer_name " + ref +
                          "/model --add_generation_prompt " + tmp.file("c.jsonl"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(
      result.out,
      "\"<|begin_of_text|>user\\nHi \xc3\xa9<|end_of_text|>\\n<|begin_of_text|>assistant\\n\"\n"
      "\"<|begin_of_text|>system\\nS<|end_of_text|>\\n<|begin_of_text|>assistant\\n\"\n");
}

TEST(ChatCli, BadInputIsOneLine) {
  NEED_REFERENCE(ref);
  TempDir tmp;
  const std::string fixtures = testing::hf_fixtures_dir();
  base::write_file_atomic(tmp.file("refuse.jinja"),
                          "{% if messages[0].role != 'user' %}{{ raise_exception('Conversations "
                          "start with the user') }}{% endif %}ok");
  base::write_file_atomic(tmp.file("c.jsonl"),
                          "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}]}\n"
                          "{\"messages\": [{\"role\": \"system\", \"content\": \"b\"}]}\n");
  base::write_file_atomic(tmp.file("bad.jsonl"), "{\"message\": []}\n");
  const std::vector<std::pair<std::string, std::string>> rows = {
      {kTrainer + " chat " + fixtures + "/qwen3 < /dev/null",
       "has no chat template (no chat_template.jinja, no chat_template in tokenizer_config.json)"},
      {kTrainer + " chat-template --chat_template " + tmp.file("refuse.jinja") + " " +
           tmp.file("c.jsonl"),
       "line 2: the template refuses the conversation: chat template " + tmp.file("refuse.jinja") +
           " line 1: raise_exception: Conversations start with the user"},
      {kTrainer + " chat-template --chat_template " + tmp.file("refuse.jinja") + " " +
           tmp.file("bad.jsonl"),
       "a line is a JSON object with \"messages\""},
      {kTrainer + " chat-template --chat_template " + tmp.file("missing.jinja") + " " +
           tmp.file("c.jsonl"),
       "missing.jinja"},
      {kTrainer + " chat " + tmp.path(), "is not a Hugging Face model folder"},
      {kTrainer + " generate " + ref + "/model --system x --prompt y",
       "--system and --chat_template go with --chat"},
  };
  for (const auto& [command, part] : rows) {
    const auto result = run(command);
    EXPECT_EQ(result.exit_code, 2) << command << "\n" << result.err;
    EXPECT_NE(result.err.find(part), std::string::npos) << command << "\n" << result.err;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  }
  // The first conversation was rendered before the second was refused.
  const auto partial = run(kTrainer + " chat-template --chat_template " + tmp.file("refuse.jinja") +
                           " " + tmp.file("c.jsonl"));
  EXPECT_EQ(partial.out, "\"ok\"\n");
}

}  // namespace chat_test
}  // namespace trainer
