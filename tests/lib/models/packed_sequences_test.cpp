// Packed rows and TRL's per-token statistics: a row of several sequences with restarting
// position_ids gives each sequence the logits and the loss it has alone (every model family,
// sliding windows included); the statistics (entropy, argmax hits, count) and DFT's loss and
// gradients equal the plain computation, chunked or not.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lib/models/hf_causal_lm.h"
#include "lib/models/hf_config.h"
#include "lib/models/linear_cross_entropy.h"
#include "lib/models/model.h"

namespace trainer::packed_sequences_test {
namespace {

using torch::Tensor;

std::shared_ptr<models::HfCausalLM> tiny(const std::string& type) {
  nlohmann::ordered_json overrides;
  if (type == "gpt2") {
    overrides = {{"n_layer", 2}, {"n_embd", 32}, {"n_head", 4}, {"n_positions", 64}};
  } else {
    overrides = {{"num_hidden_layers", 2},   {"hidden_size", 32},
                 {"intermediate_size", 64},  {"num_attention_heads", 4},
                 {"num_key_value_heads", 2}, {"max_position_embeddings", 64}};
    if (type == "qwen3" || type == "gemma3_text") overrides["head_dim"] = 8;
    if (type == "mistral" || type == "gemma3_text") overrides["sliding_window"] = 4;
    if (type == "gemma3_text") overrides["final_logit_softcapping"] = 2.0;
  }
  torch::manual_seed(0);
  auto model = models::make_hf_causal_lm(models::hf_config_from_defaults(type, overrides, 97));
  model->eval();
  return model;
}

class PackedSequences : public ::testing::TestWithParam<std::string> {};

TEST_P(PackedSequences, EachSequenceComputesWhatItComputesAlone) {
  auto model = tiny(GetParam());
  torch::NoGradGuard no_grad;
  torch::manual_seed(3);
  const std::vector<int64_t> lengths = {7, 3, 9, 1};
  std::vector<Tensor> sequences, positions;
  for (int64_t n : lengths) {
    sequences.push_back(torch::randint(0, 97, {n}, torch::kLong));
    positions.push_back(torch::arange(n, torch::kLong));
  }
  const Tensor ids = torch::cat(sequences).unsqueeze(0);
  const Tensor position_ids = torch::cat(positions).unsqueeze(0);
  const Tensor packed = model->lm_logits(model->hidden_states(ids, {}, nullptr, position_ids));
  int64_t start = 0;
  for (size_t k = 0; k < sequences.size(); ++k) {
    const Tensor alone = model->logits(sequences[k].unsqueeze(0));
    const Tensor part = packed.slice(1, start, start + lengths[k]);
    EXPECT_LT((part - alone).abs().max().item<double>(), 1e-5) << GetParam() << ", sequence " << k;
    start += lengths[k];
  }
  // Without the restarting positions the second sequence would see the first.
  const Tensor crossing = model->logits(ids).slice(1, 7, 10);
  EXPECT_GT((crossing - model->logits(sequences[1].unsqueeze(0))).abs().max().item<double>(), 1e-3);
}

TEST_P(PackedSequences, APackedRowsLossIsTheSumOfItsSequencesLosses) {
  auto model = tiny(GetParam());
  torch::NoGradGuard no_grad;
  torch::manual_seed(4);
  const std::vector<int64_t> lengths = {6, 10, 5};
  std::vector<Tensor> sequences, positions, labels;
  double alone_sum = 0;
  int64_t count = 0;
  for (int64_t n : lengths) {
    Tensor s = torch::randint(0, 97, {n}, torch::kLong);
    sequences.push_back(s);
    positions.push_back(torch::arange(n, torch::kLong));
    Tensor l = s.clone();
    l[0] = -100;  // as TRL's padding-free collator: a sequence's first token has no label
    labels.push_back(l);
    data::Batch alone;
    alone["input_ids"] = s.unsqueeze(0);
    alone["labels"] = s.unsqueeze(0);
    alone.loss_only = true;
    alone_sum += model->forward(alone).loss.item<double>() * static_cast<double>(n - 1);
    count += n - 1;
  }
  for (bool chunked : {true, false}) {
    models::set_chunked_loss(*model, chunked);
    data::Batch row;
    row["input_ids"] = torch::cat(sequences).unsqueeze(0);
    row["labels"] = torch::cat(labels).unsqueeze(0);
    row["position_ids"] = torch::cat(positions).unsqueeze(0);
    row.loss_only = true;
    const double packed = model->forward(row).loss.item<double>();
    EXPECT_NEAR(packed, alone_sum / static_cast<double>(count), 1e-5 * std::abs(packed))
        << GetParam() << (chunked ? ", chunked" : ", plain");
  }
}

INSTANTIATE_TEST_SUITE_P(Families, PackedSequences,
                         ::testing::Values("gpt2", "llama", "qwen3", "mistral", "gemma3_text"));

// The statistics and DFT's loss from whole logits, as TRL's fused head computes them.
struct Plain {
  Tensor loss, stats, grad_hidden, grad_weight;
};
Plain plain(const Tensor& hidden, const Tensor& weight, const Tensor& labels, bool dft) {
  Tensor h = hidden.detach().requires_grad_(true), w = weight.detach().requires_grad_(true);
  Tensor z = torch::nn::functional::linear(h, w);
  Tensor logp = torch::log_softmax(z, 1);
  Tensor valid = labels.ne(-100);
  Tensor target = labels.masked_fill(valid.logical_not(), 0).unsqueeze(1);
  Tensor lp = logp.gather(1, target).squeeze(1) * valid;
  Tensor loss = dft ? -(lp * lp.detach().exp() * valid).sum() : -lp.sum();
  loss.backward();
  Tensor entropy = (-(logp.exp() * logp).sum(1) * valid).sum();
  Tensor hits = (z.argmax(1).eq(labels) * valid).sum().to(torch::kFloat);
  return {loss.detach(), torch::stack({entropy.detach(), hits, valid.sum().to(torch::kFloat)}),
          h.grad(), w.grad()};
}

TEST(TokenStats, StatisticsAndDftEqualThePlainComputation) {
  torch::manual_seed(2);
  const Tensor hidden = torch::randn({29, 16}), weight = torch::randn({40, 16});
  Tensor labels = torch::randint(0, 40, {29}, torch::kLong);
  labels.index_put_({torch::tensor({0, 3, 28})}, -100);
  for (bool dft : {false, true}) {
    const Plain want = plain(hidden, weight, labels, dft);
    for (int64_t rows : {1, 7, 0}) {
      Tensor h = hidden.detach().requires_grad_(true), w = weight.detach().requires_grad_(true);
      Tensor stats;
      Tensor loss = models::linear_cross_entropy(h, w, labels, 0.0, rows, dft, &stats);
      loss.backward();
      EXPECT_NEAR(loss.item<double>(), want.loss.item<double>(), 1e-4) << dft << " " << rows;
      EXPECT_TRUE(torch::allclose(stats, want.stats, 1e-5, 1e-4)) << stats << want.stats;
      EXPECT_TRUE(torch::allclose(h.grad(), want.grad_hidden, 1e-5, 1e-5)) << dft << " " << rows;
      EXPECT_TRUE(torch::allclose(w.grad(), want.grad_weight, 1e-5, 1e-5)) << dft << " " << rows;
    }
  }
  // The accuracy counts 26 labelled rows; at least one argmax hit and one miss in this draw.
  const Plain p = plain(hidden, weight, labels, false);
  EXPECT_EQ(p.stats[2].item<double>(), 26.0);
}

TEST(TokenStats, TheModelReturnsThemChunkedOrNot) {
  auto model = tiny("llama");
  torch::manual_seed(6);
  data::Batch batch;
  batch["input_ids"] = torch::randint(0, 97, {2, 10}, torch::kLong);
  Tensor labels = batch.at("input_ids").clone();
  labels[1].slice(0, 0, 4).fill_(-100);
  batch["labels"] = labels;
  batch.token_stats = true;
  batch.loss_only = true;
  std::vector<Tensor> got;
  for (bool chunked : {true, false}) {
    models::set_chunked_loss(*model, chunked);
    for (bool dft : {false, true}) {
      batch.dft_loss = dft;
      models::ModelOutput out = model->forward(batch);
      ASSERT_TRUE(out.token_stats.defined());
      // 9 predicted labels in row 0 (positions 1..9), 6 in row 1 (labels 4..9).
      EXPECT_EQ(out.token_stats[2].item<double>(), 15.0);
      got.push_back(torch::cat({out.loss.reshape({1}), out.token_stats}));
    }
  }
  EXPECT_TRUE(torch::allclose(got[0], got[2], 1e-5, 1e-5)) << got[0] << got[2];
  EXPECT_TRUE(torch::allclose(got[1], got[3], 1e-5, 1e-5)) << got[1] << got[3];
  EXPECT_LT(got[1][0].item<double>(), got[0][0].item<double>());  // DFT weighs by p < 1
}

}  // namespace
}  // namespace trainer::packed_sequences_test
