// The node's cache of prepared SFT data: what is written is read back whole, a damaged or
// foreign file is no cache, and the key changes with the file, the tokenizer, the template and
// the options.
#include "trl/data_cache.h"

#include <fstream>

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace trainer::sft_cache_test {
namespace {

trl::SftData sample() {
  trl::SftData data;
  data.shape = trl::SftShape::kConversational;
  data.examples = 3;
  data.tokens = 9;
  data.dropped = 1;
  data.truncated = 2;
  data.rows.push_back({{1, 2, 3, 4}, {-100, 2, 3, 4}, {2, 2}});
  data.rows.push_back({{5, 6, 7, 8, 9}, {5, -100, 7, 8, 9}, {}});
  return data;
}

TEST(SftCache, WhatIsWrittenIsReadBackWhole) {
  testing::TempDir tmp;
  const std::string path = tmp.file("sft/key.bin");
  trl::write_sft_cache(path, sample());
  const auto got = trl::read_sft_cache(path);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->shape, trl::SftShape::kConversational);
  EXPECT_EQ(got->examples, 3);
  EXPECT_EQ(got->tokens, 9);
  EXPECT_EQ(got->dropped, 1);
  EXPECT_EQ(got->truncated, 2);
  ASSERT_EQ(got->rows.size(), 2u);
  EXPECT_EQ(got->rows[0].labels, (std::vector<int32_t>{-100, 2, 3, 4}));
  EXPECT_EQ(got->rows[0].seq_lengths, (std::vector<int32_t>{2, 2}));
  EXPECT_EQ(got->rows[1].input_ids, (std::vector<int32_t>{5, 6, 7, 8, 9}));
  EXPECT_TRUE(got->rows[1].seq_lengths.empty());
}

TEST(SftCache, ADamagedOrForeignFileIsNoCache) {
  testing::TempDir tmp;
  const std::string path = tmp.file("key.bin");
  EXPECT_FALSE(trl::read_sft_cache(path).has_value());  // absent
  trl::write_sft_cache(path, sample());
  const std::string whole = testing::slurp(path);
  for (size_t cut : {size_t{0}, size_t{7}, size_t{20}, whole.size() - 1}) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << whole.substr(0, cut);
    EXPECT_FALSE(trl::read_sft_cache(path).has_value()) << "cut at " << cut;
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc) << whole << "x";
  EXPECT_FALSE(trl::read_sft_cache(path).has_value());
  std::string foreign = whole;
  foreign[3] = 'X';
  std::ofstream(path, std::ios::binary | std::ios::trunc) << foreign;
  EXPECT_FALSE(trl::read_sft_cache(path).has_value());
}

TEST(SftCache, TheKeyFollowsFileTokenizerTemplateAndOptions) {
  testing::TempDir tmp;
  const std::string file = tmp.file("data.jsonl");
  std::ofstream(file) << "{\"text\": \"a\"}\n";
  const std::string key = trl::data_cache_key(file, "tok", "tpl", "opts");
  EXPECT_EQ(key.size(), 16u);
  EXPECT_EQ(key, trl::data_cache_key(file, "tok", "tpl", "opts"));
  EXPECT_NE(key, trl::data_cache_key(file, "tok2", "tpl", "opts"));
  EXPECT_NE(key, trl::data_cache_key(file, "tok", "tpl2", "opts"));
  EXPECT_NE(key, trl::data_cache_key(file, "tok", "tpl", "opts2"));
  std::ofstream(file, std::ios::app) << "{\"text\": \"b\"}\n";  // another size
  EXPECT_NE(key, trl::data_cache_key(file, "tok", "tpl", "opts"));
}

}  // namespace
}  // namespace trainer::sft_cache_test
