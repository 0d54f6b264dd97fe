// SentencePiece-style tokenizers against `tokenizers` and Transformers themselves
// (tests/reference/scripts/sentencepiece_tokenizers.py's committed result): Mistral's own models
// made into tokenizer.json by Transformers' converter and in the older Hub layout, a Unigram
// model, small tokenizers with every normalizer, Metaspace scheme and added-token flag, and the
// folders of Transformers' LlamaTokenizer, GemmaTokenizer and Qwen2Tokenizer: the same ids, byte
// offsets and decodes on the machine's gettext catalogues and hostile lines.
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/base/files.h"
#include "lib/tokenizers/tokenizer.h"
#include "tests/test_util.h"

namespace sentencepiece_test {

using nlohmann::json;
using trainer::testing::TempDir;
using trainer::tokenizers::Tokenizer;

struct Reference {
  std::string dir;
  std::vector<std::string> corpus;
  json cases;
};

const Reference& reference() {
  static const Reference r = [] {
    Reference r;
    r.dir = trainer::testing::reference_dir("sentencepiece_tokenizers");
    if (r.dir.empty()) return r;
    r.corpus = json::parse(trainer::testing::slurp(r.dir + "/corpus.json"))
                   .get<std::vector<std::string>>();
    r.cases = json::parse(trainer::testing::gunzip_file(r.dir + "/cases.json.gz"));
    return r;
  }();
  return r;
}

// The case's folder made whole in `dir`: tokenizer.json out of its gzip, tokenizer_config.json.
void unpack(const std::string& name, const TempDir& dir) {
  const std::string from = reference().dir + "/" + name;
  trainer::base::write_file_atomic(dir.file("tokenizer.json"),
                                   trainer::testing::gunzip_file(from + "/tokenizer.json.gz"));
  if (trainer::base::exists(from + "/tokenizer_config.json")) {
    trainer::base::write_file_atomic(dir.file("tokenizer_config.json"),
                                     trainer::testing::slurp(from + "/tokenizer_config.json"));
  }
}

// Counts the lines where `got` differs from `want`, showing the first few.
template <typename T>
void compare(const std::string& what, size_t line, const std::string& text, const T& got,
             const json& want, int& mismatches) {
  if (json(got) == want) return;
  if (++mismatches <= 3) {
    ADD_FAILURE() << what << " differs on line " << line << " " << json(text).dump()
                  << "\n  ours: " << json(got).dump() << "\n  want: " << want.dump();
  }
}

class SentencePiece : public ::testing::TestWithParam<std::string> {};
class SentencePieceFolder : public ::testing::TestWithParam<std::string> {};

// tokenizers' Tokenizer.from_file on tokenizer.json alone: ids (with the template), byte offsets
// (without it), decodes with and without special tokens.
TEST_P(SentencePiece, FileGivesTokenizersIdsOffsetsAndDecodes) {
  const Reference& r = reference();
  if (r.dir.empty()) GTEST_SKIP() << "no reference";
  const std::string name = GetParam();
  TempDir dir;
  unpack(name, dir);
  const Tokenizer t =
      Tokenizer::from_json(trainer::testing::slurp(dir.file("tokenizer.json")), name);
  const json& c = r.cases[name];
  int ids = 0, offsets = 0, decodes = 0;
  for (size_t k = 0; k < r.corpus.size(); ++k) {
    const std::string& line = r.corpus[k];
    const std::vector<int32_t> got = t.encode(line);
    compare("ids", k, line, got, c["raw"][k], ids);
    std::vector<std::pair<size_t, size_t>> spans;
    t.encode_with_offsets(line, spans);
    // The template's tokens come first where it adds any (offsets 0, 0 there).
    const json& want = c["raw_offsets"][k];
    const size_t skip = want.size() >= spans.size() ? want.size() - spans.size() : 0;
    json rest = json::array();
    for (size_t i = skip; i < want.size(); ++i) rest.push_back(want[i]);
    std::vector<std::vector<size_t>> pairs;
    for (const auto& [a, b] : spans) pairs.push_back({a, b});
    compare("offsets", k, line, pairs, rest, offsets);
    const std::vector<int32_t> want_ids = c["raw"][k].get<std::vector<int32_t>>();
    compare("decode", k, line, t.decode(want_ids, false), c["raw_decode"][k], decodes);
    compare("decode skipping special tokens", k, line, t.decode(want_ids, true),
            c["raw_decode_skip"][k], decodes);
  }
  EXPECT_EQ(ids, 0) << name << ": lines whose ids differ, of " << r.corpus.size();
  EXPECT_EQ(offsets, 0) << name << ": lines whose offsets differ";
  EXPECT_EQ(decodes, 0) << name << ": decodes that differ";
}

// AutoTokenizer on the folder: the class tokenizer_config.json names builds its own components
// around the file's vocabulary (LlamaTokenizer's Metaspace, GemmaTokenizer's, Qwen2Tokenizer's
// NFC), and its template follows add_bos_token.
TEST_P(SentencePieceFolder, GivesTransformersIdsAndDecodes) {
  const Reference& r = reference();
  if (r.dir.empty()) GTEST_SKIP() << "no reference";
  const std::string name = GetParam();
  const json& c = r.cases[name];
  ASSERT_TRUE(c.contains("auto")) << name;
  TempDir dir;
  unpack(name, dir);
  const Tokenizer t = Tokenizer::load(dir.path());
  int ids = 0, decodes = 0;
  for (size_t k = 0; k < r.corpus.size(); ++k) {
    const std::string& line = r.corpus[k];
    compare("ids", k, line, t.encode(line), c["auto"][k], ids);
    const std::vector<int32_t> want_ids = c["auto"][k].get<std::vector<int32_t>>();
    compare("decode", k, line, t.decode(want_ids, false), c["auto_decode"][k], decodes);
    compare("decode skipping special tokens", k, line, t.decode(want_ids, true),
            c["auto_decode_skip"][k], decodes);
  }
  EXPECT_EQ(ids, 0) << name << " (" << c["class"] << "): lines whose ids differ";
  EXPECT_EQ(decodes, 0) << name << ": decodes that differ";
}

INSTANTIATE_TEST_SUITE_P(Layouts, SentencePiece,
                         ::testing::Values("mistral_v1", "mistral_v3", "mistral_v7",
                                           "mistral_v1_hub", "unigram", "normalizers", "accents",
                                           "never", "qwen2", "gemma"));
INSTANTIATE_TEST_SUITE_P(Layouts, SentencePieceFolder,
                         ::testing::Values("mistral_v1", "mistral_v3", "mistral_v7",
                                           "mistral_v1_hub", "unigram", "qwen2", "gemma"));

}  // namespace sentencepiece_test
