// The byte-level text data set: reading a folder (order, binary files, links), the blocks and
// their seeded train/validation split, the unigram entropy, bad options, and the padding collator.
#include "lib/data/text.h"

#include <cstdio>
#include <fstream>
#include <set>

#include <unistd.h>

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "tests/test_util.h"

namespace trainer::data {
namespace text_test {

using testing::expect_input_error;

using testing::TempDir;

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// `n` bytes of a pattern in which every position's byte is known: 'a' + i % 26.
std::string alphabet(int64_t n) {
  std::string s(static_cast<size_t>(n), ' ');
  for (int64_t i = 0; i < n; ++i) s[static_cast<size_t>(i)] = static_cast<char>('a' + i % 26);
  return s;
}

std::vector<int64_t> starts_of(const TextDataset& d) {
  torch::Tensor s = d.starts().cpu();
  return std::vector<int64_t>(s.data_ptr<int64_t>(), s.data_ptr<int64_t>() + s.numel());
}

TEST(TextCorpus, Utf8TextIsValidUtf8WithoutNul) {
  EXPECT_TRUE(is_utf8_text("plain ASCII\n"));
  EXPECT_TRUE(is_utf8_text("h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80"));  // é € 😀
  EXPECT_TRUE(is_utf8_text(""));
  EXPECT_FALSE(is_utf8_text(std::string("a\0b", 3)));  // NUL: binary
  EXPECT_FALSE(is_utf8_text("\xC3"));                  // truncated
  EXPECT_FALSE(is_utf8_text("\xC0\x80"));              // overlong NUL
  EXPECT_FALSE(is_utf8_text("\xE0\x80\xAF"));          // overlong '/'
  EXPECT_FALSE(is_utf8_text("\xED\xA0\x80"));          // a surrogate
  EXPECT_FALSE(is_utf8_text("\xF4\x90\x80\x80"));      // past U+10FFFF
  EXPECT_FALSE(is_utf8_text("\x80"));                  // a lone continuation byte
  EXPECT_FALSE(is_utf8_text("\xE2\x82"));              // truncated at the end
}

TEST(TextCorpus, FolderIsReadInPathOrderSkippingBinaryFilesAndSecondLinks) {
  TempDir dir;
  write(dir.file("b.txt"), "bee\n");
  write(dir.file("a.txt"), "ay\n");
  ASSERT_EQ(::mkdir(dir.file("c").c_str(), 0755), 0);
  write(dir.file("c/d.txt"), "dee\n");
  write(dir.file("a.dat"), std::string("\0\0\0\x02\x80", 5));  // like fortune's index files
  ASSERT_EQ(::symlink("a.txt", dir.file("a.u8").c_str()), 0);  // like fortune's *.u8 links
  ASSERT_EQ(::symlink(".", dir.file("c/loop").c_str()), 0);    // a folder reached twice
  TextCorpus corpus = read_text_corpus(dir.path());
  EXPECT_EQ(corpus.text, "ay\nbee\ndee\n");
  ASSERT_EQ(corpus.files.size(), 3u);
  EXPECT_EQ(corpus.files[0], dir.file("a.txt"));
  EXPECT_EQ(corpus.files[1], dir.file("b.txt"));
  EXPECT_EQ(corpus.files[2], dir.file("c/d.txt"));
  EXPECT_EQ(corpus.offsets, (std::vector<int64_t>{0, 3, 7}));
  EXPECT_EQ(corpus.binary_files, std::vector<std::string>{dir.file("a.dat")});
  EXPECT_EQ(corpus.duplicates, 1);  // a.u8
}

TEST(TextCorpus, DebianFortunesHoldTheTextFilesOnly) {
  const std::string dir = "/usr/share/games/fortunes";
  if (base::list_directory(dir).empty()) GTEST_SKIP() << "Debian's fortunes package is missing";
  TextCorpus corpus = read_text_corpus(dir);
  int64_t dat = 0, u8 = 0;
  for (const auto& name : base::list_directory(dir)) {
    dat += name.size() > 4 && name.compare(name.size() - 4, 4, ".dat") == 0;
    u8 += name.size() > 3 && name.compare(name.size() - 3, 3, ".u8") == 0;
  }
  ASSERT_GT(dat, 0);
  EXPECT_EQ(static_cast<int64_t>(corpus.binary_files.size()), dat);  // every index, nothing else
  EXPECT_EQ(corpus.duplicates, u8);
  for (const auto& f : corpus.files) {
    EXPECT_EQ(f.find(".dat"), std::string::npos) << f;
    EXPECT_EQ(f.find(".u8"), std::string::npos) << f;
  }
  EXPECT_GT(corpus.text.size(), 1000000u);
  EXPECT_TRUE(is_utf8_text(corpus.text));
  // configs/gpt_fortunes.json's split: the loss of a model that knows only byte frequencies.
  TextOptions options;
  TextSplits splits = split_text(corpus.text, options);
  EXPECT_EQ(splits.units, static_cast<int64_t>(corpus.text.size()) / 128);
  const double entropy = unigram_entropy(*splits.train);
  std::printf(
      "fortunes: %zu bytes, %lld train and %lld validation blocks; unigram byte entropy of "
      "the train split %.4f nats\n",
      corpus.text.size(), static_cast<long long>(splits.train->size()),
      static_cast<long long>(splits.validation->size()), entropy);
  EXPECT_GT(entropy, 3.0);
  EXPECT_LT(entropy, 3.6);
}

TEST(TextDataset, BlocksAreTheCorpusBytesAndTheSplitIsDisjointAndCoversEveryUnit) {
  const std::string corpus = alphabet(403);  // 50 units of 8, 3 bytes left out
  TextOptions options;
  options.path = "test";
  options.context_length = 8;
  options.validation_fraction = 0.2;
  options.seed = 7;
  TextSplits s = split_text(corpus, options);
  EXPECT_EQ(s.units, 50);
  EXPECT_EQ(s.validation_units, 10);
  ASSERT_EQ(s.train->size(), 40);
  ASSERT_EQ(s.validation->size(), 10);
  std::set<int64_t> all;
  for (auto* d : {s.train.get(), s.validation.get()}) {
    for (int64_t start : starts_of(*d)) {
      EXPECT_EQ(start % 8, 0);
      EXPECT_TRUE(all.insert(start).second) << "block " << start << " in both splits";
    }
    for (int64_t i = 0; i < d->size(); ++i) {
      Example e = d->get(i);
      const int64_t start = d->starts()[i].item<int64_t>();
      ASSERT_EQ(e.input.sizes(), torch::IntArrayRef({8}));
      EXPECT_EQ(e.input.scalar_type(), torch::kLong);
      for (int64_t t = 0; t < 8; ++t) {
        EXPECT_EQ(e.input[t].item<int64_t>(), 'a' + (start + t) % 26);
      }
      EXPECT_TRUE(torch::equal(e.input, e.target));
    }
  }
  EXPECT_EQ(all.size(), 50u);
  EXPECT_EQ(*all.rbegin(), 392);  // the last whole unit
  // The fast path: one gather equal to the examples one by one.
  torch::Tensor idx = torch::tensor({3, 0, 7}, torch::kLong);
  Batch b = *s.train->get_batch(idx);
  ASSERT_EQ(b.at("input_ids").sizes(), torch::IntArrayRef({3, 8}));
  EXPECT_FALSE(b.contains("attention_mask"));
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(torch::equal(b.at("input_ids")[i], s.train->get(idx[i].item<int64_t>()).input));
  }
  EXPECT_TRUE(torch::equal(b.at("labels"), b.at("input_ids")));
}

TEST(TextDataset, TheSplitDependsOnTheSeedOnly) {
  const std::string corpus = alphabet(4000);
  TextOptions options;
  options.path = "test";
  options.context_length = 10;
  options.seed = 1;
  auto a = split_text(corpus, options), b = split_text(corpus, options);
  EXPECT_EQ(a.validation_units, 40);
  EXPECT_EQ(starts_of(*a.validation), starts_of(*b.validation));
  EXPECT_EQ(starts_of(*a.train), starts_of(*b.train));
  options.seed = 2;
  auto c = split_text(corpus, options);
  EXPECT_EQ(c.validation->size(), 40);
  EXPECT_NE(starts_of(*a.validation), starts_of(*c.validation));
}

TEST(TextDataset, AStrideShorterThanTheContextOverlapsBlocksWithinASplitOnly) {
  const std::string corpus = alphabet(800);  // 100 units of 8
  TextOptions options;
  options.path = "test";
  options.context_length = 8;
  options.stride = 2;
  options.validation_fraction = 0.3;
  TextSplits s = split_text(corpus, options);
  TextOptions whole = options;
  whole.stride = 0;
  TextSplits units = split_text(corpus, whole);
  std::set<int64_t> validation_units;
  for (int64_t start : starts_of(*units.validation)) validation_units.insert(start / 8);
  ASSERT_EQ(validation_units.size(), 30u);
  // Every start that is a multiple of 2 and whose 8 bytes lie in units of one split is a block of
  // that split, and no other.
  int64_t expected_train = 0, expected_validation = 0;
  for (int64_t start = 0; start + 8 <= 800; start += 2) {
    bool first = validation_units.count(start / 8), last = validation_units.count((start + 7) / 8);
    if (first == last) ++(first ? expected_validation : expected_train);
  }
  EXPECT_EQ(s.train->size(), expected_train);
  EXPECT_EQ(s.validation->size(), expected_validation);
  for (int64_t start : starts_of(*s.train)) {
    EXPECT_FALSE(validation_units.count(start / 8) || validation_units.count((start + 7) / 8));
  }
  for (int64_t start : starts_of(*s.validation)) {
    EXPECT_TRUE(validation_units.count(start / 8) && validation_units.count((start + 7) / 8));
  }
  EXPECT_GT(s.train->size(), 3 * units.train->size() - 70);  // overlapping: ~4 blocks a unit
}

TEST(TextDataset, UnigramEntropyIsThatOfTheSplitsBytes) {
  TextOptions options;
  options.path = "test";
  options.context_length = 4;
  options.validation_fraction = 0;
  TextSplits s = split_text(std::string(400, 'a') + std::string(400, 'b'), options);
  EXPECT_EQ(s.validation->size(), 0);
  EXPECT_NEAR(unigram_entropy(*s.train), std::log(2.0), 1e-12);
  options.stride = 1;  // overlapping blocks count each byte once
  EXPECT_NEAR(
      unigram_entropy(*split_text(std::string(400, 'a') + std::string(400, 'b'), options).train),
      std::log(2.0), 1e-12);
  s = split_text(alphabet(26 * 40), options);
  EXPECT_NEAR(unigram_entropy(*s.train), std::log(26.0), 1e-12);
}

TEST(TextDataset, BadOptionsAndCorporaAreOneLineNamingTheValue) {
  TextOptions o;
  o.path = "test";
  o.context_length = 1;
  expect_input_error([&] { check_text_options(o); }, {"dataset_config: context_length 1", ">= 2"});
  o.context_length = 8;
  o.stride = 9;
  expect_input_error([&] { check_text_options(o); }, {"stride 9", "1..8"});
  o.stride = -1;
  expect_input_error([&] { check_text_options(o); }, {"stride -1"});
  o.stride = 0;
  o.validation_fraction = 1.0;
  expect_input_error([&] { check_text_options(o); }, {"validation_fraction 1", "[0, 1)"});
  o.validation_fraction = 0.1;
  expect_input_error([&] { split_text(alphabet(15), o); }, {"15 bytes", "context_length 8"});
  o.context_length = 10;
  o.stride = 3;  // starts 0, 3, 6, 9: only 0 lies in one unit, so one split has no block
  expect_input_error([&] { split_text(alphabet(20), o); }, {"stride 3", "without a block"});
  TempDir dir;
  o.path = dir.file("missing");
  expect_input_error([&] { load_text(o); }, {"dataset_config: path", "missing", "does not exist"});
  o.path = dir.path();
  expect_input_error([&] { load_text(o); }, {"holds no text"});
  write(dir.file("x.bin"), std::string("\xff\xfe", 2));
  expect_input_error([&] { load_text(o); }, {"holds no text", "1 binary"});
  o.path = dir.file("x.bin");
  expect_input_error([&] { load_text(o); }, {"x.bin", "is not UTF-8 text"});
}

TEST(TextSource, DatasetNameTextIsCausalLmOverBytesWithItsOptions) {
  TempDir dir;
  write(dir.file("a.txt"), alphabet(800));  // 100 units of 8
  nlohmann::ordered_json config = {{"path", dir.path()}, {"context_length", 8}};
  auto source = make_data_source("text", "", config);
  DataInfo info = source->info();
  EXPECT_EQ(info.task, TaskKind::kCausalLM);
  EXPECT_EQ(info.input_shape, std::vector<int64_t>{8});
  EXPECT_EQ(info.num_labels, 256);
  EXPECT_EQ(source->split("train", std::nullopt)->size(), 90);
  EXPECT_EQ(source->split("eval", std::nullopt)->size(), 10);
  auto first = source->split("eval", 4);
  ASSERT_EQ(first->size(), 4);
  EXPECT_TRUE(torch::equal(first->get(3).input, source->split("eval", std::nullopt)->get(3).input));
  EXPECT_FALSE(static_cast<bool>(source->collator()));  // blocks come in one gather
  EXPECT_EQ(source->split_name("eval"), "validation");
  EXPECT_EQ(source->location(), dir.path());
  // dataset_dir names the corpus as well; dataset_config's stride and seed change the blocks.
  auto by_dir =
      make_data_source("text", dir.path(), {{"context_length", 8}, {"stride", 4}, {"seed", 3}});
  EXPECT_EQ(by_dir->location(), dir.path());
  EXPECT_GT(by_dir->split("train", std::nullopt)->size(), 90);
  auto message = [&](const std::string& dataset_dir, const nlohmann::ordered_json& c) {
    return testing::input_error_of([&] { make_data_source("text", dataset_dir, c); });
  };
  EXPECT_NE(message("", {{"strid", 4}})
                .find("unknown option 'strid' for text (did you mean "
                      "'stride'?"),
            std::string::npos);
  EXPECT_NE(message(dir.path(), {{"path", "/elsewhere"}}).find("both name the corpus"),
            std::string::npos);
  EXPECT_EQ(message("", {{"context_length", 1}}),
            "dataset_config: option context_length of text is 1; must be in 2..1048576");
  EXPECT_EQ(message("", {{"context_length", 8}, {"stride", 9}}),
            "dataset_config: option stride of text is 9; must be in 1..8");
  EXPECT_NE(message("", {{"validation_fraction", 1}}).find("validation_fraction"),
            std::string::npos);
}

TEST(LanguageModelingCollator, PadsOnTheRightWithMaskAndIgnoredLabels) {
  std::vector<Example> examples = {
      {torch::tensor({5, 6, 7}, torch::kLong), {}},
      {torch::tensor({8}, torch::kLong), {}},
      {torch::tensor({9, 10}, torch::kLong), torch::tensor({11, 12}, torch::kLong)},
  };
  Batch b = LanguageModelingCollator{}(examples);
  EXPECT_TRUE(torch::equal(b.at("input_ids"),
                           torch::tensor({5, 6, 7, 8, 0, 0, 9, 10, 0}, torch::kLong).view({3, 3})));
  EXPECT_TRUE(torch::equal(b.at("attention_mask"),
                           torch::tensor({1, 1, 1, 1, 0, 0, 1, 1, 0}, torch::kLong).view({3, 3})));
  EXPECT_TRUE(torch::equal(
      b.at("labels"),
      torch::tensor({5, 6, 7, 8, -100, -100, 11, 12, -100}, torch::kLong).view({3, 3})));
  Batch padded = LanguageModelingCollator{3}(
      {{torch::tensor({1}, torch::kLong), {}}, {torch::tensor({1, 2}, torch::kLong), {}}});
  EXPECT_EQ(padded.at("input_ids")[0][1].item<int64_t>(), 3);
  EXPECT_THROW(LanguageModelingCollator{}({}), std::invalid_argument);
}

}  // namespace text_test
}  // namespace trainer::data
