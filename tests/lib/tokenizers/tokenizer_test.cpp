// The tokenizer.json reader against the `tokenizers` library itself: the same ids on every line of
// the fortunes corpus and of a file of hostile Unicode
// (tests/reference/scripts/tokenize_corpus.py's committed hashes), for the GPT-2 and Llama-3
// layouts, by the scanners and by ICU's regex, and on a few lines under other layouts
// (tokenize_reference.py, run here on layouts made here); the decoder's round trip; and one line
// for each tokenizer.json it refuses.
#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/base/files.h"
#include "lib/base/text.h"
#include "lib/base/utf8.h"
#include "lib/tokenizers/tokenizer.h"
#include "tests/test_util.h"

namespace tokenizer_test {

using trainer::testing::expect_input_error;
using trainer::testing::TempDir;
using trainer::tokenizers::Tokenizer;

const char* const kFortunes = "/usr/share/games/fortunes";

// A file's lines as tokenize_reference.py cuts them: at '\n', no empty last line.
std::vector<std::string> file_lines(const std::string& path) {
  const std::string data = trainer::testing::slurp(path);
  std::vector<std::string> lines;
  size_t from = 0;
  while (from < data.size()) {
    size_t end = data.find('\n', from);
    if (end == std::string::npos) end = data.size();
    lines.push_back(data.substr(from, end - from));
    from = end + 1;
  }
  return lines;
}

// Every text file of the fortunes corpus (no .dat indexes, no .u8 links), in path order.
std::vector<std::string> fortune_files() {
  std::vector<std::string> files;
  for (const std::string& name : trainer::base::list_directory(kFortunes)) {
    const std::string path = std::string(kFortunes) + "/" + name;
    if (trainer::base::ends_with(name, ".dat") || trainer::base::ends_with(name, ".u8")) continue;
    if (trainer::base::is_regular_file(path)) files.push_back(path);
  }
  return files;
}

// Lines to break a tokenizer on: combining marks, emoji, CRLF, Unicode's other spaces and line
// breaks, digits of other scripts, contractions in odd cases, special tokens in the text, and
// bytes that are not UTF-8 (tokenize_corpus.py reads the same file).
const std::string kHostile = std::string(SOURCE_DIR) + "/tests/reference/inputs/hostile.txt";

struct Corpus {
  std::vector<std::string> files;
  std::vector<std::string> lines;
  size_t bytes = 0;
};

// The fortunes corpus and the hostile file.
const Corpus& corpus() {
  static const Corpus c = [] {
    Corpus c;
    c.files = fortune_files();
    c.files.push_back(kHostile);
    for (const auto& file : c.files) {
      for (auto& line : file_lines(file)) {
        c.bytes += line.size();
        c.lines.push_back(std::move(line));
      }
    }
    return c;
  }();
  return c;
}

std::vector<int32_t> parse_ids(const std::string& line) {
  std::vector<int32_t> ids;
  std::istringstream in(line);
  int32_t id;
  while (in >> id) ids.push_back(id);
  return ids;
}

std::string fixture(const std::string& name) {
  const std::string dir = trainer::testing::hf_fixtures_dir();
  return dir.empty() ? "" : dir + "/" + name;
}

#undef NEED_FIXTURES  // another test file of the unity batch may define its own
#define NEED_FIXTURES(folder) ASSERT_FALSE((folder).empty())

// Encodes every line of corpus() and compares with `tokenizers` (the committed hashes of
// tokenize_corpus.py's case `reference`, a block of lines each), reporting the first blocks that
// differ (at most 3, each line with our ids) and the speed.
void expect_same_ids(const std::string& name, const std::string& reference, bool special,
                     bool fast_split) {
  const std::string folder = fixture(name);
  NEED_FIXTURES(folder);
  const Corpus& c = corpus();
  const Tokenizer tokenizer = Tokenizer::load(folder, Tokenizer::Options{fast_split});
  std::vector<std::string> ids(c.lines.size());
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < c.lines.size(); ++i) {
    ids[i] = fmt::format("{}", fmt::join(tokenizer.encode(c.lines[i], special), " "));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto differing = trainer::testing::differing_id_blocks(reference, ids);
  for (size_t b = 0; b < std::min<size_t>(differing.size(), 3); ++b) {
    std::string lines;
    for (size_t i = differing[b].first; i < differing[b].second; ++i) {
      lines += fmt::format("\n  line {} {}\n    ours: {}", i,
                           trainer::base::shown_text(c.lines[i], 200), ids[i]);
    }
    ADD_FAILURE() << name << ": the ids of lines " << differing[b].first << "-"
                  << differing[b].second - 1
                  << " differ from tokenizers' (tokenize_reference.py gives theirs):" << lines;
  }
  EXPECT_EQ(differing.size(), 0u) << "blocks that differ, of lines " << c.lines.size();
  std::printf("%s (%s, %s): %zu lines, %zu bytes, the same ids; %.2f MB/s\n", name.c_str(),
              fast_split ? "scanner" : "ICU regex", special ? "special tokens" : "no special",
              c.lines.size(), c.bytes, c.bytes / seconds / 1e6);
}

TEST(Tokenizer, Gpt2MatchesTokenizersOnFortunesAndHostileText) {
  expect_same_ids("tokenizer_gpt2", "gpt2", true, true);
}

TEST(Tokenizer, Llama3MatchesTokenizersOnFortunesAndHostileText) {
  expect_same_ids("tokenizer_llama3", "llama3", true, true);
  expect_same_ids("tokenizer_llama3", "llama3_plain", false, true);
}

TEST(Tokenizer, IcuRegexMatchesTokenizersToo) {
  expect_same_ids("tokenizer_gpt2", "gpt2", true, false);
  expect_same_ids("tokenizer_llama3", "llama3", true, false);
}

TEST(Tokenizer, DecodeRoundTrips) {
  const std::string folder = fixture("tokenizer_llama3");
  NEED_FIXTURES(folder);
  for (const std::string name : {"tokenizer_gpt2", "tokenizer_llama3"}) {
    const Tokenizer tokenizer = Tokenizer::load(fixture(name));
    int failures = 0;
    for (const std::string& line : corpus().lines) {
      const std::string valid = trainer::base::replace_invalid_utf8(line);
      const std::string back = tokenizer.decode(tokenizer.encode(line, false));
      if (back != valid && ++failures <= 3) {
        ADD_FAILURE() << name << ": " << trainer::base::shown_text(valid, 100) << " came back as "
                      << trainer::base::shown_text(back, 100);
      }
    }
  }
  const Tokenizer llama = Tokenizer::load(fixture("tokenizer_llama3"));
  const auto ids = llama.encode("Hello<|end_of_text|>");
  EXPECT_EQ(ids.front(), 0);  // BOS from the template
  EXPECT_EQ(llama.decode(ids), "<|begin_of_text|>Hello<|end_of_text|>");
  EXPECT_EQ(llama.decode(ids, true), "Hello");
  // Ids without a token are left out, as tokenizers does; half a character is U+FFFD.
  EXPECT_EQ(llama.decode({99999, -1}), "");
  const auto euro = llama.encode("\xE2\x82\xAC", false);
  EXPECT_EQ(llama.decode(euro), "\xE2\x82\xAC");
}

TEST(Tokenizer, VocabularyAndSpecialTokens) {
  const std::string folder = fixture("tokenizer_llama3");
  NEED_FIXTURES(folder);
  const Tokenizer llama = Tokenizer::load(folder);
  EXPECT_EQ(llama.vocab_size(), 512);
  EXPECT_EQ(llama.bos_token_id(), 0);
  EXPECT_EQ(llama.eos_token_id(), 1);
  EXPECT_EQ(llama.pad_token_id(), std::nullopt);
  EXPECT_EQ(llama.token_to_id("<|end_of_text|>"), 1);
  EXPECT_EQ(llama.token_to_id("no such token"), std::nullopt);
  EXPECT_EQ(llama.id_to_token(1), "<|end_of_text|>");
  const Tokenizer gpt2 = Tokenizer::load(fixture("tokenizer_gpt2") + "/tokenizer.json");
  EXPECT_EQ(gpt2.bos_token_id(), 0);
  EXPECT_EQ(gpt2.eos_token_id(), 0);
  EXPECT_EQ(gpt2.unk_token_id(), 0);
  EXPECT_EQ(gpt2.encode("a"), gpt2.encode("a", false));  // no template: nothing added
  EXPECT_EQ(llama.fingerprint().size(), 64u);
  EXPECT_NE(llama.fingerprint(), gpt2.fingerprint());
  EXPECT_EQ(llama.fingerprint(), Tokenizer::load(folder).fingerprint());
}

TEST(Tokenizer, SaveWritesTheFilesAsRead) {
  const std::string folder = fixture("tokenizer_llama3");
  NEED_FIXTURES(folder);
  TempDir dir;
  Tokenizer::load(folder).save(dir.file("out/tok"));
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
    EXPECT_EQ(trainer::testing::slurp(dir.file(std::string("out/tok/") + name)),
              trainer::testing::slurp(folder + "/" + name));
  }
  EXPECT_EQ(Tokenizer::load(dir.file("out/tok")).fingerprint(),
            Tokenizer::load(folder).fingerprint());
}

// A tokenizer.json built from the GPT-2 fixture with `change` applied, in a folder of its own.
std::string changed_tokenizer(const TempDir& dir,
                              const std::function<void(nlohmann::json&)>& change) {
  nlohmann::json j =
      nlohmann::json::parse(trainer::testing::slurp(fixture("tokenizer_gpt2") + "/tokenizer.json"));
  change(j);
  std::ofstream(dir.file("tokenizer.json")) << j.dump();
  return dir.path();
}

TEST(Tokenizer, RefusesWhatItDoesNotSupportInOneLine) {
  const std::string folder = fixture("tokenizer_gpt2");
  NEED_FIXTURES(folder);
  auto refused = [&](const std::function<void(nlohmann::json&)>& change,
                     const std::vector<std::string>& parts) {
    TempDir dir;
    const std::string path = changed_tokenizer(dir, change);
    const std::string message = trainer::testing::input_error_of([&] { Tokenizer::load(path); });
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    std::vector<std::string> all = parts;
    all.push_back(dir.file("tokenizer.json"));
    expect_input_error([&] { Tokenizer::load(path); }, all);
  };
  refused([](auto& j) { j["model"]["type"] = "WordPiece"; },
          {"model type WordPiece", "(BPE, Unigram)"});
  refused(
      [](auto& j) {
        j["pre_tokenizer"] = {{"type", "Whitespace"}};
      },
      {"pre_tokenizer Whitespace is not supported"});
  refused(
      [](auto& j) {
        j["normalizer"] = {{"type", "BertNormalizer"}};
      },
      {"normalizer BertNormalizer is not supported", "StripAccents"});
  refused(
      [](auto& j) {
        j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAAAA=="}};
      },
      {"Precompiled with a non-empty precompiled_charsmap is not supported"});
  refused(
      [](auto& j) {
        j["normalizer"] = {{"type", "Strip"}, {"strip_left", true}};
      },
      {"normalizer Strip's \"strip_right\" is missing"});
  refused(
      [](auto& j) {
        j["normalizer"] = {{"type", "Replace"}, {"pattern", " "}, {"content", "x"}};
      },
      {"normalizer Replace's pattern is not {\"Regex\": ...} or {\"String\": ...}"});
  refused(
      [](auto& j) {
        j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "ab"}};
      },
      {"Metaspace's replacement ab is not one character"});
  // tokenizers 0.23 refuses an older add_prefix_space false beside the default scheme "always".
  refused(
      [](auto& j) {
        j["pre_tokenizer"] = {
            {"type", "Metaspace"}, {"replacement", "\u2581"}, {"add_prefix_space", false}};
      },
      {"add_prefix_space false does not match its prepend_scheme always"});
  refused(
      [](auto& j) {
        j["decoder"] = {{"type", "Strip"}, {"content", " "}, {"start", -1}, {"stop", 0}};
      },
      {"decoder Strip's \"start\" is not an integer >= 0"});
  refused(
      [](auto& j) {
        j["model"] = {{"type", "Unigram"},
                      {"unk_id", 5},
                      {"vocab", nlohmann::json::array({nlohmann::json::array({"a", -1.0})})}};
      },
      {"unk_id 5 is not the id of one of its 1 pieces"});
  refused([](auto& j) { j["decoder"] = {{"type", "WordPiece"}}; }, {"decoder WordPiece"});
  refused(
      [](auto& j) {
        j["post_processor"] = {{"type", "BertProcessing"}};
      },
      {"post_processor BertProcessing"});
  refused([](auto& j) { j["model"]["dropout"] = 0.1; }, {"dropout 0.1"});
  refused([](auto& j) { j["truncation"] = {{"max_length", 8}}; }, {"truncation"});
  refused([](auto& j) { j["model"]["merges"][0] = "Ġ"; }, {"merge", "two tokens"});
  refused([](auto& j) { j["model"]["merges"][0] = "Ġ zzz"; }, {"zzz", "not in the vocab"});
  refused(
      [](auto& j) {
        j["pre_tokenizer"] = {{"type", "Split"},
                              {"pattern", {{"Regex", "(unclosed"}}},
                              {"behavior", "Isolated"},
                              {"invert", false}};
      },
      {"pattern", "does not compile"});
  refused(
      [](auto& j) {
        j["pre_tokenizer"] = {{"type", "Split"},
                              {"pattern", {{"String", " "}}},
                              {"behavior", "Merged"},
                              {"invert", false}};
      },
      {"behavior Merged is not supported", "MergedWithNext"});
  // tokenizers reads format 1.0 only ("Unknown tokenizer version '2.0'").
  refused([](auto& j) { j["version"] = "2.0"; }, {"version \"2.0\" is not supported", "1.0"});
  // A component that is not understood is quoted cut short, not dumped whole (the vocabulary).
  refused([](auto& j) { j["model"]["type"] = j["model"]["vocab"]; },
          {"model type {\"", "...", "is not supported (BPE, Unigram)"});
  {
    TempDir dir;
    const std::string path =
        changed_tokenizer(dir, [](auto& j) { j["model"]["type"] = j["model"]["vocab"]; });
    EXPECT_LT(trainer::testing::input_error_of([&] { Tokenizer::load(path); }).size(), 300u);
  }
  // A template's special token past the vocabulary: named at load, not "index out of range".
  refused(
      [](auto& j) {
        j["post_processor"] = {
            {"type", "TemplateProcessing"},
            {"single",
             {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
            {"pair", nlohmann::json::array()},
            {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {600}}, {"tokens", {"<s>"}}}}}}};
      },
      {"special token <s> has id 600, outside the vocabulary (0..511)"});
  // A value of another type where one is read: one line naming the file, not nlohmann's tag.
  refused([](auto& j) { j["model"]["vocab"]["hello"] = "x"; }, {"hello"});

  // A Split pattern that backtracks without end (nested repetition) is given up on, naming the
  // pattern, as `tokenizers` gives up (Oniguruma's retry limit): not a hang.
  for (const std::string pattern : {"(a+)+$", "(a|aa)+b"}) {
    TempDir dir;
    const std::string path = changed_tokenizer(dir, [&](auto& j) {
      j["pre_tokenizer"] = {{"type", "Split"},
                            {"pattern", {{"Regex", pattern}}},
                            {"behavior", "Isolated"},
                            {"invert", false}};
    });
    const Tokenizer t = Tokenizer::load(path);
    expect_input_error(
        [&] { t.encode(std::string(40, 'a') + "!"); },
        {path, "Split pattern " + pattern, "backtracks without end", "U_REGEX_TIME_OUT"});
    EXPECT_FALSE(t.encode("ab").empty());  // text without the trap still encodes
  }

  TempDir dir;
  std::ofstream(dir.file("tokenizer.json")) << "{\"model\": {";
  expect_input_error([&] { Tokenizer::load(dir.path()); }, {dir.file("tokenizer.json"), "JSON"});
  expect_input_error([&] { Tokenizer::load(dir.file("missing")); },
                     {dir.file("missing"), "does not exist"});
  TempDir empty;
  expect_input_error([&] { Tokenizer::load(empty.path()); }, {empty.path(), "no tokenizer.json"});
  // A tokenizer_config.json naming a token the tokenizer lacks.
  TempDir config;
  std::ofstream(config.file("tokenizer.json"))
      << trainer::testing::slurp(folder + "/tokenizer.json");
  std::ofstream(config.file("tokenizer_config.json")) << R"({"bos_token": "<s>"})";
  expect_input_error([&] { Tokenizer::load(config.path()); },
                     {"tokenizer_config.json", "bos_token", "<s>"});
}

// What `tokenizers` gives for `lines` under the tokenizer.json in `folder`.
std::vector<std::vector<int32_t>> reference_of(const std::string& folder,
                                               const std::vector<std::string>& lines) {
  TempDir dir;
  std::string text;
  for (const auto& line : lines) text += line + "\n";
  std::ofstream(dir.file("lines.txt"), std::ios::binary) << text;
  const auto result =
      trainer::testing::run(std::string(TRAINER_PYTHON) + " " + SOURCE_DIR +
                            "/tests/reference/scripts/tokenize_reference.py " + folder + " " +
                            dir.file("ids") + " " + dir.file("lines.txt"));
  EXPECT_EQ(result.exit_code, 0) << result.err;
  std::vector<std::vector<int32_t>> ids;
  for (const auto& line : trainer::testing::lines_of(trainer::testing::slurp(dir.file("ids")))) {
    ids.push_back(parse_ids(line));
  }
  return ids;
}

// Other layouts of the same vocabulary, each against `tokenizers` on a few hostile lines.
TEST(Tokenizer, OtherLayoutsMatchTokenizers) {
  const std::string folder = fixture("tokenizer_gpt2");
  NEED_FIXTURES(folder);
  const std::vector<std::string> lines = {"the cat  sat",
                                          "x",
                                          "  two  spaces <|endoftext|>after<|endoftext|> b",
                                          "it's 123 \u00e9t\u00e9",
                                          "\u4E2D\u6587 tab\tend ",
                                          "<|endoftext|>",
                                          "snow\u2603man\U0001F600",
                                          "line\r"};
  // A Split of `pattern` ({"Regex": ...} or {"String": ...}) with `behavior`, then ByteLevel.
  auto split_then_bytes = [](nlohmann::json pattern, const std::string& behavior,
                             bool byte_level_regex) {
    return [=](nlohmann::json& j) {
      j["pre_tokenizer"] = {
          {"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"}, {"pattern", pattern}, {"behavior", behavior}, {"invert", false}},
            {{"type", "ByteLevel"},
             {"add_prefix_space", false},
             {"trim_offsets", true},
             {"use_regex", byte_level_regex}}}}};
    };
  };
  const std::vector<std::pair<std::string, std::function<void(nlohmann::json&)>>> layouts = {
      {"Split on a literal space (Removed), ByteLevel without its regex",
       split_then_bytes({{"String", " "}}, "Removed", false)},
      {"ByteLevel with add_prefix_space, a normalized added token",
       [](nlohmann::json& j) {
         j["pre_tokenizer"]["add_prefix_space"] = true;
         j["added_tokens"][0]["normalized"] = true;
       }},
      {"a Split regex of digits (ICU), then GPT-2's ByteLevel",
       split_then_bytes({{"Regex", "\\p{N}|\\s+"}}, "Isolated", true)},
      {"no pre_tokenizer: characters, not bytes (those not in the vocab dropped)",
       [](nlohmann::json& j) { j["pre_tokenizer"] = nullptr; }},
      {"ignore_merges with GPT-2's pattern",
       [](nlohmann::json& j) { j["model"]["ignore_merges"] = true; }},
      // An empty match cuts the text where it is (Oniguruma's find_iter, then empty pieces
      // dropped): "" splits between every two characters, "t*" around each run of t.
      {"an empty Split regex (Isolated): one piece per character",
       split_then_bytes({{"Regex", ""}}, "Isolated", false)},
      {"an empty Split string (Removed): one piece per character",
       split_then_bytes({{"String", ""}}, "Removed", false)},
      {"a Split regex that matches empty too (t*)",
       split_then_bytes({{"Regex", "t*"}}, "Isolated", false)},
  };
  for (const auto& [what, change] : layouts) {
    TempDir dir;
    const std::string path = changed_tokenizer(dir, change);
    const Tokenizer t = Tokenizer::load(path);
    const auto expected = reference_of(path, lines);
    ASSERT_EQ(expected.size(), lines.size()) << what;
    for (size_t i = 0; i < lines.size(); ++i) {
      EXPECT_EQ(t.encode(lines[i]), expected[i]) << what << ": " << lines[i];
    }
  }
}

}  // namespace tokenizer_test
