// `trainer tokenize` through the real binary: the ids of every line of the fortunes corpus and
// of hostile Unicode equal the `tokenizers` library's (the committed hashes of
// tests/reference/scripts/tokenize_corpus.py), from a FILE and from standard input; --decode gives
// the text back; bad arguments and unsupported tokenizers are one line and exit code 2.
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/base/files.h"
#include "tests/test_util.h"

namespace trainer {
namespace tokenize_test {

using testing::run;
using testing::slurp;
using testing::TempDir;

const std::string& kTrainer = testing::kTrainerBin;

// Every fortunes text file, then lines of hostile Unicode (CRLF, U+0085, U+2028, NBSP, emoji,
// combining marks, digits of other scripts, special tokens: tests/reference/inputs/
// hostile_utf8.txt, which tokenize_corpus.py reads too). Bytes that are not UTF-8 are refused, as
// train_file refuses them (BadInput's rows).
std::string corpus_text() {
  std::string text;
  const std::string dir = "/usr/share/games/fortunes";
  for (const std::string& name : base::list_directory(dir)) {
    if (name.size() > 4 &&
        (name.substr(name.size() - 4) == ".dat" || name.substr(name.size() - 3) == ".u8")) {
      continue;
    }
    if (base::is_regular_file(dir + "/" + name)) text += slurp(dir + "/" + name);
  }
  return text + slurp(std::string(SOURCE_DIR) + "/tests/reference/inputs/hostile_utf8.txt");
}

#undef NEED_FIXTURES  // another test file of the unity batch may define its own
#define NEED_FIXTURES(dir)                            \
  const std::string dir = testing::hf_fixtures_dir(); \
  ASSERT_FALSE(dir.empty())

TEST(TokenizeCli, PrintsTheIdsTokenizersGivesForEveryLine) {
  NEED_FIXTURES(fixtures);
  TempDir dir;
  std::ofstream(dir.file("corpus.txt"), std::ios::binary) << corpus_text();
  for (const std::string name : {"gpt2", "llama3"}) {
    const std::string folder = fixtures + "/tokenizer_" + name;
    const auto result =
        run(kTrainer + " tokenize --tokenizer_name " + folder + " " + dir.file("corpus.txt"));
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const auto lines = testing::lines_of(result.out);
    EXPECT_GT(lines.size(), 60000u);
    const auto differing = testing::differing_id_blocks("cli_" + name, lines);
    EXPECT_TRUE(differing.empty())
        << name << ": the ids differ from tokenizers' in " << differing.size()
        << " blocks, the first lines " << differing.front().first << "-"
        << differing.front().second - 1;
    EXPECT_EQ(result.err, "");
  }
  // Standard input, without the template's BOS.
  const std::string folder = fixtures + "/tokenizer_llama3";
  const auto piped = run("cat " + std::string(SOURCE_DIR) + "/tests/reference/inputs/few.txt | " +
                         kTrainer + " tokenize --no_special_tokens --tokenizer_name=" + folder);
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(testing::lines_of(piped.out).size(), 3u) << piped.out;
  EXPECT_TRUE(testing::differing_id_blocks("few_plain", testing::lines_of(piped.out)).empty())
      << piped.out;
}

TEST(TokenizeCli, DecodeGivesTheTextBack) {
  NEED_FIXTURES(fixtures);
  TempDir dir;
  const std::string text = "Hello, world!\n  caf\u00E9 \U0001F600\n\nlast line\r\n";
  std::ofstream(dir.file("text.txt"), std::ios::binary) << text;
  const std::string tokenize =
      kTrainer + " tokenize --tokenizer_name " + fixtures + "/tokenizer_gpt2";
  const auto result = run(tokenize + " " + dir.file("text.txt") + " | " + tokenize + " --decode");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, text);
  // Special tokens shown, or left out.
  const std::string llama =
      kTrainer + " tokenize --tokenizer_name " + fixtures + "/tokenizer_llama3";
  EXPECT_EQ(run("echo 'hi' | " + llama + " | " + llama + " --decode").out, "<|begin_of_text|>hi\n");
  EXPECT_EQ(run("echo 'hi' | " + llama + " | " + llama + " --decode --no_special_tokens").out,
            "hi\n");
}

TEST(TokenizeCli, BadArgumentsAreOneLineAndExitCode2) {
  NEED_FIXTURES(fixtures);
  TempDir dir;
  const std::string gpt2 = fixtures + "/tokenizer_gpt2";
  nlohmann::json wordpiece = nlohmann::json::parse(slurp(gpt2 + "/tokenizer.json"));
  wordpiece["model"]["type"] = "WordPiece";
  std::ofstream(dir.file("tokenizer.json")) << wordpiece.dump();
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"tokenize", {"needs --tokenizer_name"}},
      {"tokenize --tokenizer_name " + dir.file("none"), {dir.file("none"), "does not exist"}},
      {"tokenize --tokenizer_name " + gpt2 + " " + dir.file("missing.txt"),
       {"trainer tokenize", dir.file("missing.txt")}},
      {"tokenize --tokenizer_name " + gpt2 + " a.txt b.txt", {"unexpected argument", "b.txt"}},
      {"tokenize --tokenizer_name " + gpt2 + " --top_k 3", {"unknown option --top_k"}},
      {"tokenize --tokenizer_name " + dir.path(), {"model type WordPiece", "tokenizer.json"}},
      {"tokenize --tokenizer_name", {"--tokenizer_name needs a value"}},
  };
  for (const auto& [args, parts] : cases) {
    const auto result = run("echo hi | " + kTrainer + " " + args);
    EXPECT_EQ(result.exit_code, 2) << args << "\n" << result.err;
    EXPECT_EQ(testing::lines_of(result.err).size(), 1u) << args << "\n" << result.err;
    for (const auto& part : parts) {
      EXPECT_NE(result.err.find(part), std::string::npos) << args << "\n" << result.err;
    }
  }
  // Text that is not UTF-8 (here on the second line of standard input) is refused with its line,
  // as train_file refuses it; the lines before it were answered.
  const auto latin1 =
      run("printf 'ok\\ncaf\\351\\n' | " + kTrainer + " tokenize --tokenizer_name " + gpt2);
  EXPECT_EQ(latin1.exit_code, 2) << latin1.err;
  EXPECT_EQ(latin1.err,
            "trainer: error: trainer tokenize: standard input line 2 is not UTF-8 text (invalid "
            "UTF-8 or a NUL byte): caf\\xe9; give UTF-8 text\n");
  EXPECT_EQ(testing::lines_of(latin1.out).size(), 1u) << latin1.out;
  for (const std::string line : {"1 2 abc", "1 512", "-1"}) {
    const auto result =
        run("echo '" + line + "' | " + kTrainer + " tokenize --decode --tokenizer_name " + gpt2);
    EXPECT_EQ(result.exit_code, 2) << line;
    EXPECT_NE(result.err.find("line 1:"), std::string::npos) << result.err;
    EXPECT_NE(result.err.find("ids are integers 0..511"), std::string::npos) << result.err;
  }
}

}  // namespace tokenize_test
}  // namespace trainer
