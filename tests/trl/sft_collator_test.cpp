// TRL's DataCollatorForLanguageModeling, on its own docstring's examples: padding with the
// attention mask, and padding-free rows with restarting position ids (a packed row's from its
// seq_lengths), labels -100 where a sequence starts, pad_to_multiple_of.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "trl/sft_trainer.h"

namespace trainer::sft_collator_test {
namespace {

using torch::Tensor;

Tensor ids(std::vector<int64_t> v) { return torch::tensor(v, torch::kLong); }
Tensor rows(std::vector<std::vector<int64_t>> v) {
  std::vector<Tensor> r;
  for (auto& row : v) r.push_back(ids(row));
  return torch::stack(r);
}

std::vector<data::Example> examples() {
  return {{ids({1, 2, 3}), ids({-100, 2, 3})}, {ids({4, 5}), ids({-100, 5})}};
}

TEST(SftCollator, PadsOnTheRightWithTheAttentionMask) {
  data::Batch b = trl::sft_collator(0, false, std::nullopt)(examples());
  EXPECT_TRUE(torch::equal(b.at("input_ids"), rows({{1, 2, 3}, {4, 5, 0}})));
  EXPECT_TRUE(torch::equal(b.at("attention_mask"), rows({{1, 1, 1}, {1, 1, 0}})));
  EXPECT_TRUE(torch::equal(b.at("labels"), rows({{-100, 2, 3}, {-100, 5, -100}})));
  EXPECT_FALSE(b.contains("position_ids"));
  data::Batch eight = trl::sft_collator(0, false, 4)(examples());
  EXPECT_EQ(eight.at("input_ids").size(1), 4);
}

TEST(SftCollator, PaddingFreeIsOneRowWithRestartingPositions) {
  data::Batch b = trl::sft_collator(0, true, std::nullopt)(examples());
  EXPECT_TRUE(torch::equal(b.at("input_ids"), rows({{1, 2, 3, 4, 5}})));
  EXPECT_TRUE(torch::equal(b.at("position_ids"), rows({{0, 1, 2, 0, 1}})));
  EXPECT_TRUE(torch::equal(b.at("labels"), rows({{-100, 2, 3, -100, 5}})));
  EXPECT_FALSE(b.contains("attention_mask"));
  // A packed row's positions come from its seq_lengths; padding is position 0, label -100.
  trl::SftDataset packed({{{1, 2, 3, 4, 5}, {1, 2, 3, 4, 5}, {2, 3}}});
  data::Batch p = trl::sft_collator(9, true, 8)({packed.get(0)});
  EXPECT_TRUE(torch::equal(p.at("input_ids"), rows({{1, 2, 3, 4, 5, 9, 9, 9}})));
  EXPECT_TRUE(torch::equal(p.at("position_ids"), rows({{0, 1, 0, 1, 2, 0, 0, 0}})));
  EXPECT_TRUE(torch::equal(p.at("labels"), rows({{-100, 2, -100, 4, 5, -100, -100, -100}})));
}

}  // namespace
}  // namespace trainer::sft_collator_test
