// GPT-2 and Llama from Hugging Face folders that Transformers wrote (scripts/reference/
// hf_fixtures.py): our logits equal Transformers' on the same ids, with and without an attention
// mask; bf16 and sharded folders load; bad folders and configs are one line; the KV cache gives
// the uncached logits.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lib/io/safetensors.h"
#include "lib/models/hf_pretrained.h"
#include "tests/test_util.h"

namespace trainer::hf_models_test {
namespace {

using testing::expect_input_error;
using testing::hf_fixtures_dir;

std::map<std::string, torch::Tensor> reference(const std::string& dir) {
  std::map<std::string, torch::Tensor> out;
  for (auto& [name, t] : io::load_safetensors(dir + "/reference.safetensors")) out[name] = t;
  return out;
}

// Largest |a - b| over the positions where mask is 1 (all when mask is undefined).
double max_diff(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& mask = {}) {
  torch::Tensor d = (a.to(torch::kFloat) - b.to(torch::kFloat)).abs().amax(-1);
  if (mask.defined()) d = d * mask.to(torch::kFloat);
  return d.max().item<double>();
}

#define NEED_FIXTURES()                           \
  const std::string fixtures = hf_fixtures_dir(); \
  if (fixtures.empty())                           \
  GTEST_SKIP() << "TRAINER_PYTHON lacks transformers (scripts/setup installs it)"

class HfLogits : public ::testing::TestWithParam<std::string> {};

TEST_P(HfLogits, EqualTransformersWithAndWithoutMask) {
  NEED_FIXTURES();
  auto ref = reference(fixtures);
  const std::string name = GetParam();
  auto model = models::load_hf_model(fixtures + "/" + name);
  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor ids = ref.at("input_ids");
  const torch::Tensor mask = ref.at("attention_mask");
  EXPECT_LE(max_diff(model->logits(ids), ref.at(name + ".logits")), 1e-5);
  EXPECT_LE(max_diff(model->logits(ids, mask), ref.at(name + ".logits_masked"), mask), 1e-5);
  data::Batch batch{{"input_ids", ids}, {"labels", ids}};
  auto out = model->forward(batch);
  EXPECT_NEAR(out.loss.item<double>(), ref.at(name + ".loss").item<double>(), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Models, HfLogits, ::testing::Values("gpt2", "llama", "llama_tied"));

TEST(HfModels, ShardedFoldersLoadTheSameTensors) {
  NEED_FIXTURES();
  for (const std::string name : {"gpt2", "llama"}) {
    auto one = models::load_hf_model(fixtures + "/" + name);
    auto sharded = models::load_hf_model(fixtures + "/" + name + "_sharded");
    auto a = io::state_dict(*one), b = io::state_dict(*sharded);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].first, b[i].first);
      EXPECT_TRUE(torch::equal(a[i].second, b[i].second)) << a[i].first;
    }
  }
}

TEST(HfModels, Bf16FolderLoadsInBf16AsFromPretrainedAutoAndConvertsOnRequest) {
  NEED_FIXTURES();
  auto model = models::load_hf_model(fixtures + "/llama_bf16");
  EXPECT_EQ(model->dtype(), torch::kBFloat16);
  auto as_float = models::load_hf_model(fixtures + "/llama_bf16", "float32");
  EXPECT_EQ(as_float->dtype(), torch::kFloat);
  auto original = models::load_hf_model(fixtures + "/llama");
  // The float32 weights rounded to bf16 and back.
  auto a = io::state_dict(*as_float), b = io::state_dict(*original);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(torch::equal(a[i].second, b[i].second.to(torch::kBFloat16).to(torch::kFloat)))
        << a[i].first;
  }
}

TEST(HfModels, KvCacheGivesTheUncachedLogits) {
  NEED_FIXTURES();
  for (const std::string name : {"gpt2", "llama"}) {
    auto model = models::load_hf_model(fixtures + "/" + name);
    model->eval();
    torch::NoGradGuard no_grad;
    torch::Tensor ids = torch::randint(0, 512, {2, 12}, torch::kLong);
    torch::Tensor full = model->logits(ids);
    models::KVCache cache;
    torch::Tensor first = model->logits(ids.slice(1, 0, 7), {}, &cache);
    std::vector<torch::Tensor> parts{first};
    for (int64_t t = 7; t < 10; ++t)
      parts.push_back(model->logits(ids.slice(1, t, t + 1), {}, &cache));
    parts.push_back(model->logits(ids.slice(1, 10, 12), {}, &cache));
    EXPECT_EQ(cache.length, 12);
    EXPECT_LE(max_diff(torch::cat(parts, 1), full), 1e-5) << name;
  }
}

// A copy of a fixture folder whose config.json has `edit` applied.
std::string edited_copy(const std::string& from, const testing::TempDir& tmp,
                        const std::function<void(nlohmann::ordered_json&)>& edit) {
  const std::string to = tmp.file("model");
  std::filesystem::remove_all(to);
  std::filesystem::copy(from, to);
  auto j = nlohmann::ordered_json::parse(std::ifstream(to + "/config.json"));
  edit(j);
  std::ofstream(to + "/config.json") << j.dump(2);
  return to;
}

TEST(HfModels, UnsupportedConfigsAndFoldersAreOneLineNamingTheField) {
  NEED_FIXTURES();
  testing::TempDir tmp;
  const std::string llama = fixtures + "/llama", gpt2 = fixtures + "/gpt2";
  auto bad = [&](const std::string& from, auto edit, std::vector<std::string> parts) {
    const std::string dir = edited_copy(from, tmp, edit);
    expect_input_error([&] { models::load_hf_model(dir); }, parts);
  };
  bad(llama, [](auto& j) { j["model_type"] = "mistral"; },
      {"model_type", "mistral", "gpt2, llama"});
  bad(llama, [](auto& j) { j["rope_parameters"]["rope_type"] = "yarn"; }, {"rope_type", "yarn"});
  bad(llama,
      [](auto& j) {
        j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
      },
      {"rope_scaling"});
  bad(gpt2, [](auto& j) { j["add_cross_attention"] = true; }, {"add_cross_attention"});
  bad(llama, [](auto& j) { j["hidden_act"] = "swish2"; }, {"hidden_act", "swish2"});
  bad(llama, [](auto& j) { j["num_key_value_heads"] = 3; }, {"num_key_value_heads", "3"});
  // The first tensor that does not fit the config is named: its shape, or missing, or left over.
  bad(llama, [](auto& j) { j["hidden_size"] = 96; },
      {"tensor 'model.embed_tokens.weight' is [512, 64], where config.json's llama of 2 layers "
       "has [512, 96]: the config does not belong to these weights"});
  bad(gpt2, [](auto& j) { j["model_type"] = "llama"; },
      {"the weights lack tensor 'model.embed_tokens.weight' and more that config.json's llama of "
       "32 layers has"});
  bad(gpt2, [](auto& j) { j["n_layer"] = 1000000000; },
      {"lack tensor 'transformer.h.2.ln_1.weight' and more that config.json's gpt2 of "
       "1000000000 layers has"});
  bad(gpt2, [](auto& j) { j["n_layer"] = 1; },
      {"the weights hold tensor 'transformer.h.1.",
       "and 11 more that config.json's gpt2 of 1 "
       "layer has no place for"});
  bad(gpt2, [](auto& j) { j["n_embd"] = INT64_MAX; },
      {"config.json: n_embd 9223372036854775807 is too large (n_inner, 4 n_embd by default"});
  bad(gpt2, [](auto& j) { j["n_inner"] = INT64_MAX / 2; },
      {"config.json: n_inner 4611686018427387903 is too large: the model would hold more than "
       "2^63 parameters"});
  bad(gpt2, [](auto& j) { j["eos_token_id"] = 600; },
      {"eos_token_id", "600", "outside the vocabulary"});
  bad(llama, [](auto& j) { j["tie_word_embeddings"] = true; },
      {"tie_word_embeddings", "lm_head.weight", "differs"});
  bad(fixtures + "/llama_tied", [](auto& j) { j["tie_word_embeddings"] = false; },
      {"lack tensor 'lm_head.weight' that"});
  bad(gpt2, [](auto& j) { j["dtype"] = "float64"; }, {"dtype", "float64"});
  bad(gpt2, [](auto& j) { j["n_layer"] = 3; },
      {"lack tensor 'transformer.h.2.ln_1.weight' and 11 more"});
  bad(gpt2, [](auto& j) { j.erase("vocab_size"); }, {"vocab_size", "missing"});
  // No weights at all; pytorch_model.bin alone.
  const std::string empty = edited_copy(gpt2, tmp, [](auto&) {});
  std::filesystem::remove(empty + "/model.safetensors");
  expect_input_error([&] { models::load_hf_model(empty); }, {"no model.safetensors"});
  std::ofstream(empty + "/pytorch_model.bin") << "x";
  expect_input_error([&] { models::load_hf_model(empty); }, {"pytorch_model.bin is not read"});
  expect_input_error([&] { models::load_hf_model(tmp.file("nowhere")); }, {"config.json"});
}

}  // namespace
}  // namespace trainer::hf_models_test
