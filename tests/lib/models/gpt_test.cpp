// The gpt model: PyTorch's parameter names and count, GPT-2's initialisation, shapes, causality,
// padding masks, the tied embedding (one parameter, two names in the state dict), the
// safetensors round trip, PyTorch's logits for our weights, and seeded sampling.
#include "lib/models/gpt.h"

#include <cmath>
#include <fstream>
#include <set>

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "lib/io/safetensors.h"
#include "lib/models/models.h"
#include "tests/test_util.h"

namespace trainer::models {
namespace gpt_test {

using testing::TempDir;

GptConfig tiny(int64_t n_layer = 2) {
  GptConfig c;
  c.block_size = 16;
  c.n_layer = n_layer;
  c.n_head = 2;
  c.n_embd = 32;
  return c;
}

std::shared_ptr<Gpt> make(const GptConfig& config, uint64_t seed = 0) {
  torch::manual_seed(seed);
  auto model = std::make_shared<Gpt>(config);
  model->eval();
  return model;
}

double max_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

TEST(Gpt, ParameterNamesAreNanoGptsAndTheTiedWeightCountsOnce) {
  auto model = make(tiny(1));
  std::vector<std::string> names;
  for (const auto& item : io::state_dict(*model)) names.push_back(item.first);
  const std::vector<std::string> expected = {
      "transformer.wte.weight",
      "transformer.wpe.weight",
      "transformer.h.0.ln_1.weight",
      "transformer.h.0.ln_1.bias",
      "transformer.h.0.attn.c_attn.weight",
      "transformer.h.0.attn.c_attn.bias",
      "transformer.h.0.attn.c_proj.weight",
      "transformer.h.0.attn.c_proj.bias",
      "transformer.h.0.ln_2.weight",
      "transformer.h.0.ln_2.bias",
      "transformer.h.0.mlp.c_fc.weight",
      "transformer.h.0.mlp.c_fc.bias",
      "transformer.h.0.mlp.c_proj.weight",
      "transformer.h.0.mlp.c_proj.bias",
      "transformer.ln_f.weight",
      "transformer.ln_f.bias",
      "lm_head.weight",
  };
  EXPECT_EQ(names, expected);
  // Parameters: every name but lm_head.weight, each tensor once.
  auto params = model->parameters();
  EXPECT_EQ(params.size(), expected.size() - 1);
  std::set<const void*> storages;
  for (const auto& p : params) storages.insert(p.data_ptr());
  EXPECT_EQ(storages.size(), params.size());
  // GPT-2's count for V=256, T=16, C=32, one layer: wte 8192 + wpe 512 + block 12,704 + ln_f 64.
  EXPECT_EQ(num_trainable_parameters(*model),
            8192 + 512 + (64 + 3168 + 1056 + 64 + 4224 + 4128) + 64);
  EXPECT_EQ(model->lm_head->named_buffers()["weight"].data_ptr(),
            model->transformer->wte->weight.data_ptr());

  GptConfig no_bias = tiny(1);
  no_bias.bias = false;
  auto plain = make(no_bias);
  int64_t biases = 0;
  for (const auto& item : plain->named_parameters()) {
    biases += item.key().find("bias") != std::string::npos;
  }
  EXPECT_EQ(biases, 0);
  EXPECT_EQ(num_trainable_parameters(*plain),
            8192 + 512 + (32 + 3072 + 1024 + 32 + 4096 + 4096) + 32);
}

TEST(Gpt, InitialisationIsGpt2s) {
  GptConfig c = tiny(8);
  c.n_embd = 128;
  auto model = make(c);
  auto& block = *model->transformer->h[3]->as<GptBlock>();
  const double residual = 0.02 / std::sqrt(16.0);
  EXPECT_NEAR(block.attn->c_attn->weight.std().item<double>(), 0.02, 0.001);
  EXPECT_NEAR(block.mlp->c_fc->weight.std().item<double>(), 0.02, 0.001);
  EXPECT_NEAR(block.attn->c_proj->weight.std().item<double>(), residual, residual * 0.05);
  EXPECT_NEAR(block.mlp->c_proj->weight.std().item<double>(), residual, residual * 0.05);
  EXPECT_NEAR(model->transformer->wte->weight.std().item<double>(), 0.02, 0.001);
  EXPECT_NEAR(model->transformer->wpe->weight.std().item<double>(), 0.02, 0.002);
  EXPECT_EQ(block.attn->c_attn->bias.abs().sum().item<double>(), 0.0);
  EXPECT_TRUE(torch::equal(block.ln_1->weight, torch::ones({128})));
  EXPECT_EQ(block.ln_2->bias.abs().sum().item<double>(), 0.0);
}

TEST(Gpt, LogitsAreCausalAndShaped) {
  auto model = make(tiny());
  torch::manual_seed(1);
  torch::Tensor ids = torch::randint(0, 256, {3, 12}, torch::kLong);
  torch::Tensor logits = model->logits(ids);
  ASSERT_EQ(logits.sizes(), torch::IntArrayRef({3, 12, 256}));
  torch::Tensor changed = ids.clone();
  changed.select(1, 7).fill_(0);
  changed.select(1, 7).add_(ids.select(1, 7).add(1).remainder(256));
  torch::Tensor other = model->logits(changed);
  // Positions before 7 see nothing of it; 7 and after do.
  EXPECT_LT(max_diff(logits.slice(1, 0, 7), other.slice(1, 0, 7)), 1e-6);
  EXPECT_GT(max_diff(logits.slice(1, 7), other.slice(1, 7)), 1e-3);
  EXPECT_GT(max_diff(logits.slice(1, 11), other.slice(1, 11)), 1e-4);
  // The whole context fits; one more position does not.
  EXPECT_EQ(model->logits(torch::zeros({1, 16}, torch::kLong)).size(1), 16);
  EXPECT_THROW(model->logits(torch::zeros({1, 17}, torch::kLong)), c10::Error);
}

TEST(Gpt, PaddingNeverChangesARealTokensLogits) {
  auto model = make(tiny());
  torch::Tensor ids = torch::tensor({{5, 9, 80, 100, 0, 0}, {3, 4, 5, 6, 7, 8}}, torch::kLong);
  torch::Tensor mask = torch::tensor({{1, 1, 1, 1, 0, 0}, {1, 1, 1, 1, 1, 1}}, torch::kLong);
  torch::Tensor padded = model->logits(ids, mask);
  // Right padding: the real tokens' logits are those of the unpadded sequence, and a full row's
  // those of plain causal attention.
  torch::Tensor alone = model->logits(ids.slice(0, 0, 1).slice(1, 0, 4));
  EXPECT_LT(max_diff(padded[0].slice(0, 0, 4), alone[0]), 1e-5);
  EXPECT_LT(max_diff(padded[1], model->logits(ids.slice(0, 1, 2))[0]), 1e-5);
  // Left padding: whatever the padding holds, the real tokens' logits stay.
  torch::Tensor left = torch::tensor({{0, 0, 5, 9, 80, 100}}, torch::kLong);
  torch::Tensor left_mask = torch::tensor({{0, 0, 1, 1, 1, 1}}, torch::kLong);
  torch::Tensor other = left.clone();
  other[0][0] = 200;
  other[0][1] = 17;
  torch::Tensor a = model->logits(left, left_mask), b = model->logits(other, left_mask);
  EXPECT_LT(max_diff(a.slice(1, 2), b.slice(1, 2)), 1e-6);
  EXPECT_FALSE(torch::isnan(a).any().item<bool>());
}

TEST(Gpt, TheTiedWeightStaysOneThroughTrainingAndLoading) {
  auto model = make(tiny());
  model->train();
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(1e-2));
  torch::Tensor ids = torch::randint(0, 256, {2, 8}, torch::kLong);
  for (int step = 0; step < 3; ++step) {
    optimizer.zero_grad();
    torch::Tensor logits = model->logits(ids);
    torch::nn::functional::cross_entropy(logits.slice(1, 0, 7).reshape({-1, 256}),
                                         ids.slice(1, 1).reshape({-1}))
        .backward();
    optimizer.step();
  }
  // The optimizer holds one state per parameter: the tied weight once.
  EXPECT_EQ(optimizer.state().size(), model->parameters().size());
  auto state = io::state_dict(*model);
  torch::Tensor wte = state.front().second, head = state.back().second;
  EXPECT_EQ(state.back().first, "lm_head.weight");
  EXPECT_TRUE(torch::equal(wte, head));
  EXPECT_EQ(wte.data_ptr(), head.data_ptr());

  TempDir dir;
  io::save_safetensors(dir.file("model.safetensors"), state);
  auto loaded_file = io::load_safetensors(dir.file("model.safetensors"));
  ASSERT_EQ(loaded_file.size(), state.size());  // both names, as two equal tensors
  EXPECT_NE(loaded_file.front().second.data_ptr(), loaded_file.back().second.data_ptr());
  auto fresh = make(tiny(), 99);
  torch::Tensor x = torch::randint(0, 256, {2, 16}, torch::kLong);
  model->eval();
  EXPECT_GT(max_diff(fresh->logits(x), model->logits(x)), 1e-3);
  io::load_state_dict(*fresh, loaded_file, "model.safetensors");
  EXPECT_EQ(max_diff(fresh->logits(x), model->logits(x)), 0.0);
  EXPECT_EQ(fresh->lm_head->named_buffers()["weight"].data_ptr(),
            fresh->transformer->wte->weight.data_ptr());
}

TEST(Gpt, BadConfigIsOneLineNamingTheValue) {
  GptConfig c = tiny();
  c.n_embd = 33;
  try {
    Gpt model(c);
    ADD_FAILURE() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "model_config: n_embd 33 is not allowed (a positive multiple of n_head = 2)");
  }
  c = tiny();
  c.n_layer = 0;
  EXPECT_THROW(Gpt{c}, InputError);
  c = tiny();
  c.dropout = 1.0;
  EXPECT_THROW(Gpt{c}, InputError);
}

TEST(Gpt, TheRegistryShapesItForTheDataAndItScoresTheLabelsShifted) {
  data::DataInfo info{data::TaskKind::kCausalLM, {12}, 256};
  torch::manual_seed(2);
  auto model = make_model(
      "gpt", nlohmann::ordered_json{{"n_layer", 1}, {"n_head", 2}, {"n_embd", 16}}, info);
  auto* gpt = dynamic_cast<Gpt*>(model.get());
  ASSERT_NE(gpt, nullptr);
  EXPECT_EQ(gpt->config().block_size, 12);  // the data's context
  EXPECT_EQ(gpt->config().vocab_size, 256);
  EXPECT_EQ(gpt->config().n_embd, 16);
  EXPECT_EQ(model->task().kind, data::TaskKind::kCausalLM);
  model->eval();
  torch::Tensor ids = torch::randint(0, 256, {2, 12}, torch::kLong);
  torch::Tensor labels = ids.clone();
  labels[1].slice(0, 9).fill_(-100);  // padding: 3 of the 22 predicted tokens ignored
  data::Batch batch{{"input_ids", ids}, {"labels", labels}};
  ModelOutput out = model->forward(batch);
  ASSERT_EQ(out.logits.sizes(), torch::IntArrayRef({2, 12, 256}));
  // Each position predicts the next label: 22 targets, 19 of them counted.
  torch::Tensor per_token = torch::nn::functional::cross_entropy(
      out.logits.slice(1, 0, 11).reshape({-1, 256}), labels.slice(1, 1).reshape({-1}),
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone).ignore_index(-100));
  const double sum = per_token.sum().item<double>();
  EXPECT_NEAR(out.loss.item<double>(), sum / 19, 1e-5);
  // With the window's token count set (Transformers' num_items_in_batch): the sum over it.
  batch.num_items_in_batch = torch::tensor(50, torch::kLong);
  EXPECT_NEAR(model->forward(batch).loss.item<double>(), sum / 50, 1e-5);
  EXPECT_FALSE(model->forward(data::Batch{{"input_ids", ids}}).loss.defined());
  auto message = [&](const nlohmann::ordered_json& config, const data::DataInfo& data) {
    return testing::input_error_of([&] { make_model("gpt", config, data); });
  };
  EXPECT_NE(message({{"n_layers", 2}}, info)
                .find("unknown option 'n_layers' for gpt (did you "
                      "mean 'n_layer'?"),
            std::string::npos)
      << message({{"n_layers", 2}}, info);
  EXPECT_EQ(message({{"block_size", 8}}, info),
            "model_config: block_size 8 is shorter than the data's context of 12 tokens (give "
            "block_size >= 12, or leave it out to take the data's)");
  EXPECT_NE(message({}, {data::TaskKind::kClassification, {1, 28, 28}, 10}).find("does not fit"),
            std::string::npos);
  EXPECT_NE(message({{"dropout", 1.5}}, info).find("dropout"), std::string::npos);
}

TEST(Gpt, PyTorchLoadsOurSafetensorsAndComputesTheSameLogits) {
  std::string python = TRAINER_PYTHON;
  if (python.empty()) GTEST_SKIP() << "no Python with torch and safetensors configured";
  TempDir dir;
  std::string command = python + " " + SOURCE_DIR + "/tests/reference/scripts/gpt.py";
  std::vector<int64_t> counts;
  for (bool bias : {true, false}) {
    GptConfig c = tiny(3);
    c.bias = bias;
    auto model = make(c, 5);
    counts.push_back(num_trainable_parameters(*model));
    torch::manual_seed(6);
    torch::Tensor ids = torch::randint(0, 256, {3, 16}, torch::kLong);
    torch::Tensor mask = torch::ones({3, 16}, torch::kLong);
    mask[1].slice(0, 10).zero_();    // right padding
    mask[2].slice(0, 0, 3).zero_();  // left padding
    const std::string name = bias ? "bias" : "plain";
    io::save_safetensors(dir.file(name + ".safetensors"), io::state_dict(*model));
    nlohmann::json config = {{"vocab_size", c.vocab_size},
                             {"block_size", c.block_size},
                             {"n_layer", c.n_layer},
                             {"n_head", c.n_head},
                             {"n_embd", c.n_embd},
                             {"dropout", c.dropout},
                             {"bias", c.bias}};
    std::ofstream(dir.file(name + ".json")) << config.dump();
    torch::NoGradGuard no_grad;
    io::save_safetensors(dir.file(name + "-inputs.safetensors"),
                         {{"input_ids", ids},
                          {"logits", model->logits(ids)},
                          {"attention_mask", mask},
                          {"logits_masked", model->logits(ids, mask)}});
    command += " " + dir.file(name + ".json") + " " + dir.file(name + ".safetensors") + " " +
               dir.file(name + "-inputs.safetensors");
  }
  auto result = testing::run(command);
  if (result.exit_code != 0 && result.err.find("ModuleNotFoundError") != std::string::npos) {
    GTEST_SKIP() << "TRAINER_PYTHON lacks torch or safetensors: " << result.err;
  }
  ASSERT_EQ(result.exit_code, 0) << result.err;
  auto lines = testing::lines_of(result.out);
  ASSERT_EQ(lines.size(), 2u) << result.out;
  for (size_t i = 0; i < 2; ++i) {
    auto got = nlohmann::json::parse(lines[i]);
    EXPECT_LT(got["max_abs_diff"].get<double>(), 1e-5) << lines[i];
    EXPECT_GT(got["max_abs_logit"].get<double>(), 0.1) << lines[i];  // not all zeros
    EXPECT_TRUE(got["tied"].get<bool>());
    EXPECT_EQ(got["num_parameters"].get<int64_t>(), counts[i]);  // PyTorch counts wte once too
  }
}

TEST(Gpt, SamplingIsSeededAndTopOneIsGreedy) {
  auto model = make(tiny(), 3);
  torch::Tensor prompt = torch::tensor({72, 101, 108}, torch::kLong);
  SamplingOptions o;
  o.max_new_tokens = 20;
  auto sample = [&](uint64_t seed) {
    return generate(*model, prompt, o, at::make_generator<at::CPUGeneratorImpl>(seed));
  };
  torch::Tensor a = sample(1), b = sample(1), c = sample(2);
  ASSERT_EQ(a.sizes(), torch::IntArrayRef({23}));
  EXPECT_TRUE(torch::equal(a.slice(0, 0, 3), prompt));
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_FALSE(torch::equal(a, c));
  // top_k 1: each token is the argmax of the logits of what came before.
  o.top_k = 1;
  o.max_new_tokens = 5;
  torch::Tensor greedy = sample(4);
  for (int64_t t = 3; t < 8; ++t) {
    torch::NoGradGuard no_grad;
    torch::Tensor logits = model->logits(greedy.slice(0, 0, t).unsqueeze(0));
    EXPECT_EQ(logits[0][t - 1].argmax().item<int64_t>(), greedy[t].item<int64_t>());
  }
  // A prompt longer than the context: each step sees its last block_size - 1 tokens (a block's
  // last position is never trained: no label follows it), or `context` tokens.
  o.max_new_tokens = 1;
  torch::Tensor long_prompt = torch::arange(40, torch::kLong);
  auto next_after = [&](int64_t window) {
    torch::NoGradGuard no_grad;
    return model->logits(long_prompt.slice(0, 40 - window).unsqueeze(0))[0][window - 1]
        .argmax()
        .item<int64_t>();
  };
  EXPECT_EQ(generate(*model, long_prompt, o, at::make_generator<at::CPUGeneratorImpl>(1))[40]
                .item<int64_t>(),
            next_after(15));
  o.context = 7;
  EXPECT_EQ(generate(*model, long_prompt, o, at::make_generator<at::CPUGeneratorImpl>(1))[40]
                .item<int64_t>(),
            next_after(7));
  o.context = 0;
  o.top_k = 0;
  o.max_new_tokens = 4;
  EXPECT_EQ(generate(*model, long_prompt, o, at::make_generator<at::CPUGeneratorImpl>(1)).size(0),
            44);
  o.temperature = 0;
  EXPECT_THROW(sample(1), std::invalid_argument);
  o.temperature = 1;
  o.top_k = 257;
  EXPECT_THROW(sample(1), std::invalid_argument);
}

}  // namespace gpt_test
}  // namespace trainer::models
