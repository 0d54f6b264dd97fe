// GPT-2 and the Llama family (Llama, Qwen2, Qwen3, Mistral, Gemma 3) from Hugging Face folders
// that Transformers wrote (tests/reference/scripts/hf_fixtures.py): our logits equal Transformers'
// on the same ids, with and without an attention mask; bf16 and sharded folders load; bad folders
// and configs are one line; the KV cache gives the uncached logits; the config alone gives the
// folder's tensors and Transformers' defaults.
#include <cmath>
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

#undef NEED_FIXTURES  // another test file of the unity batch may define its own
#define NEED_FIXTURES()                           \
  const std::string fixtures = hf_fixtures_dir(); \
  ASSERT_FALSE(fixtures.empty())

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

INSTANTIATE_TEST_SUITE_P(Models, HfLogits,
                         ::testing::Values("gpt2", "llama", "llama_tied", "qwen2", "qwen2_tied",
                                           "qwen3", "mistral", "gemma3_text"));

// The sliding windows (8 keys of the 20) change the logits: without them the same weights give
// others, so the test above checks the windows.
TEST(HfModels, SlidingWindowsMatter) {
  NEED_FIXTURES();
  auto ref = reference(fixtures);
  testing::TempDir tmp;
  torch::NoGradGuard no_grad;
  for (const std::string name : {"mistral", "gemma3_text", "qwen2_tied"}) {
    const std::string dir = tmp.file(name);
    std::filesystem::copy(fixtures + "/" + name, dir);
    auto j = nlohmann::ordered_json::parse(std::ifstream(dir + "/config.json"));
    j["sliding_window"] = 128;
    std::ofstream(dir + "/config.json") << j.dump(2);
    auto model = models::load_hf_model(dir);
    model->eval();
    EXPECT_GT(max_diff(model->logits(ref.at("input_ids")), ref.at(name + ".logits")), 1e-3) << name;
  }
}

// A bf16 Gemma 3 (the embedding's scale rounded to bf16, the norms in float32) computes in bf16
// as Transformers does, within bf16's rounding: 0.0117 here, as far as Transformers' own eager
// and sdpa attention are apart on these weights (its float32 logits are 0.0176 away).
TEST(HfModels, Bf16Gemma3GivesTransformersBf16Logits) {
  NEED_FIXTURES();
  auto ref = reference(fixtures);
  auto model = models::load_hf_model(fixtures + "/gemma3_text_bf16");
  ASSERT_EQ(model->dtype(), torch::kBFloat16);
  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor ids = ref.at("input_ids"), mask = ref.at("attention_mask");
  EXPECT_LE(max_diff(model->logits(ids), ref.at("gemma3_text_bf16.logits")), 2e-2);
  EXPECT_LE(max_diff(model->logits(ids, mask), ref.at("gemma3_text_bf16.logits_masked"), mask),
            2e-2);
}

// hf_parameter_shapes and hf_num_parameters from config.json alone: exactly the folder's tensors.
TEST(HfModels, ParameterShapesFromTheConfigAreTheFoldersTensors) {
  NEED_FIXTURES();
  for (const std::string name :
       {"gpt2", "llama", "llama_tied", "qwen2", "qwen2_tied", "qwen3", "mistral", "gemma3_text"}) {
    const auto config = models::read_hf_config(fixtures + "/" + name);
    std::map<std::string, std::vector<int64_t>> expected, in_file;
    int64_t count = 0;
    for (const auto& [key, shape] : models::hf_parameter_shapes(config)) expected[key] = shape;
    for (const auto& [key, tensor] :
         io::load_safetensors(fixtures + "/" + name + "/model.safetensors")) {
      in_file[key] = tensor.sizes().vec();
      count += tensor.numel();
    }
    EXPECT_EQ(expected, in_file) << name;
    EXPECT_EQ(models::hf_num_parameters(config), count) << name;
  }
}

// A fresh model of each type (model_type, no model_config) is Transformers' default one: its
// config class's values and its parameter count (as Transformers counts a model of them).
}  // namespace

// A fresh model of each type in `defaults` (model_type, no model_config) is Transformers' default
// one: its config class's values and its parameter count (as Transformers counts a model of
// them). `defaults`: a defaults.json of hf_fixtures.py or hf_families.py.
void expect_transformers_defaults(const nlohmann::json& defaults) {
  for (const auto& [type, theirs] : defaults.items()) {
    const models::HfConfig c = models::hf_config_from_defaults(type, nullptr, 0);
    EXPECT_EQ(models::hf_num_parameters(c), theirs["num_parameters"].get<int64_t>()) << type;
    const auto& t = theirs["config"];
    EXPECT_EQ(c.vocab_size, t["vocab_size"].get<int64_t>()) << type;
    const int64_t derived = c.hidden_size / c.num_attention_heads;
    EXPECT_EQ(c.head_dim, t.contains("head_dim") && !t["head_dim"].is_null()
                              ? t["head_dim"].get<int64_t>()
                              : derived)
        << type;
    EXPECT_EQ(c.tie_word_embeddings, t["tie_word_embeddings"].get<bool>()) << type;
    // Each layer's kind, as the config class computes layer_types (mistral and phi3 have none:
    // every layer slides when sliding_window is set).
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      const bool sliding = theirs["layer_types"].is_null()
                               ? c.sliding_window > 0
                               : theirs["layer_types"][i] == "sliding_attention";
      EXPECT_EQ(c.is_sliding_layer(i), sliding) << type << " layer " << i;
    }
    // What the fresh config.json holds is what Transformers' class holds (the special tokens
    // are the tokenizer's, and dtype the one trained in).
    for (const auto& [key, value] : c.json.items()) {
      if (key == "bos_token_id" || key == "eos_token_id" || key == "dtype" ||
          key == "architectures")
        continue;
      ASSERT_TRUE(t.contains(key)) << type << ": " << key;
      EXPECT_EQ(nlohmann::json(value), t[key]) << type << ": " << key;
    }
  }
}

// Transformers' greedy generation from `prompt` (its tokens `ids` and the first columns of each
// step's logits, `logits` [steps, columns]) followed step by step with the KV cache, as `trainer
// generate` runs (the cache dropped where the model's cache_goes_stale): each step fed
// Transformers' token, so that a near tie (two logits within float noise) cannot send the two
// sequences apart. Each step's logits are within 1e-4 of Transformers', and its token is ours
// too (or within 1e-4 of our best), end-of-sequence tokens aside (the reference asked for
// min_new_tokens).
void expect_transformers_generation(models::HfCausalLM& model, const std::vector<int64_t>& prompt,
                                    const std::vector<int64_t>& ids, const torch::Tensor& logits,
                                    const std::string& name) {
  models::KVCache cache;
  std::vector<int64_t> sequence = prompt;
  torch::Tensor step = torch::tensor(prompt, torch::kLong).unsqueeze(0);
  for (size_t t = 0; t < ids.size(); ++t) {
    if (model.cache_goes_stale(cache.length, static_cast<int64_t>(sequence.size()))) {
      cache = models::KVCache();
      step = torch::tensor(sequence, torch::kLong).unsqueeze(0);
    }
    const torch::Tensor last = model.logits(step, {}, &cache).select(1, -1)[0];
    const torch::Tensor theirs = logits[static_cast<int64_t>(t)];
    EXPECT_LE((last.slice(0, 0, theirs.size(0)) - theirs).abs().max().item<double>(), 1e-4)
        << name << " step " << t;
    // model.generate(min_new_tokens) never picks an end-of-sequence token: the best of the rest.
    torch::Tensor allowed = last.clone();
    for (int64_t eos : model.config().eos_token_ids) allowed[eos] = -INFINITY;
    EXPECT_GE(last[ids[t]].item<double>(), allowed.max().item<double>() - 1e-4)
        << name << " step " << t << ": Transformers' token " << ids[t] << ", ours "
        << allowed.argmax().item<int64_t>();
    sequence.push_back(ids[t]);
    step = torch::tensor({ids[t]}, torch::kLong).unsqueeze(0);
  }
}

namespace {

TEST(HfModels, FreshConfigsHaveTransformersDefaults) {
  NEED_FIXTURES();
  auto defaults = nlohmann::json::parse(std::ifstream(fixtures + "/defaults.json"));
  ASSERT_EQ(defaults.size(), 4u);
  expect_transformers_defaults(defaults);
}

TEST(HfModels, ShardedFoldersLoadTheSameTensors) {
  NEED_FIXTURES();
  for (const std::string name : {"gpt2", "llama", "qwen3"}) {
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

TEST(HfModels, LoadingDrawsNothingAndRefusesNonFiniteWeights) {
  NEED_FIXTURES();
  // As from_pretrained under no_init_weights: the generator is where the load found it.
  torch::manual_seed(7);
  const torch::Tensor expected = torch::rand({4});
  torch::manual_seed(7);
  models::load_hf_model(fixtures + "/llama");
  EXPECT_TRUE(torch::equal(torch::rand({4}), expected));
  // A NaN or an infinity in a float32 or a bf16 file (its exponent bits read in place) is one
  // InputError naming the tensor.
  const float bad_values[] = {std::nanf(""), INFINITY, -INFINITY};
  for (const std::string name : {"llama", "llama_bf16"}) {
    for (float bad : bad_values) {
      testing::TempDir dir;
      for (const auto& entry : std::filesystem::directory_iterator(fixtures + "/" + name)) {
        std::filesystem::copy(entry.path(), dir.file(entry.path().filename().string()));
      }
      io::NamedTensors weights = io::load_safetensors(dir.file("model.safetensors"));
      for (auto& [key, tensor] : weights) {
        if (key == "model.layers.1.mlp.down_proj.weight") tensor.view({-1})[5] = bad;
      }
      io::save_safetensors(dir.file("model.safetensors"), weights);
      expect_input_error([&] { models::load_hf_model(dir.path()); },
                         {"tensor 'model.layers.1.mlp.down_proj.weight' holds NaN or infinite "
                          "values"});
    }
  }
}

TEST(HfModels, KvCacheGivesTheUncachedLogits) {
  NEED_FIXTURES();
  // 12 tokens: past the sliding windows (8) of qwen2_tied, mistral and gemma3_text.
  for (const std::string name :
       {"gpt2", "llama", "qwen2_tied", "qwen3", "mistral", "gemma3_text"}) {
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

// Every rope type of Transformers (tests/reference/scripts/hf_rope.py), each on a fixture's weights
// with its config.json edited as the Hub spells it or as Transformers 5 does: the logits of 40
// tokens with and without a padding mask (dynamic: past max_position_embeddings), 30 greedy steps
// with the KV cache (their ids and each step's logits: past original_max_position_embeddings,
// where longrope switches factors and dynamic grows its base step by step), and the
// rope_parameters written back as Transformers 5 writes them.
TEST(HfModels, EveryRopeTypeGivesTransformersLogitsGenerationAndConfig) {
  NEED_FIXTURES();
  const std::string dir = testing::reference_dir("hf_rope");
  ASSERT_FALSE(dir.empty());
  const auto expected = nlohmann::json::parse(std::ifstream(dir + "/cases.json"));
  std::map<std::string, torch::Tensor> ref;
  for (auto& [name, t] : io::load_safetensors(dir + "/logits.safetensors")) ref[name] = t;
  const torch::Tensor ids = ref.at("input_ids"), mask = ref.at("attention_mask");
  testing::TempDir tmp;
  torch::NoGradGuard no_grad;
  ASSERT_EQ(expected["cases"].size(), 10u);
  for (const auto& [name, c] : expected["cases"].items()) {
    const std::string folder = tmp.file(name);
    std::filesystem::copy(fixtures + "/" + c["fixture"].get<std::string>(), folder);
    auto j = nlohmann::ordered_json::parse(std::ifstream(folder + "/config.json"));
    for (const auto& [key, value] : c["edits"].items()) {
      if (value.is_null()) {
        j.erase(key);
      } else {
        j[key] = value;
      }
    }
    std::ofstream(folder + "/config.json") << j.dump(2);
    auto model = models::load_hf_model(folder);
    model->eval();
    EXPECT_LE(max_diff(model->logits(ids).slice(2, 0, 64), ref.at(name + ".logits")), 1e-5) << name;
    EXPECT_LE(
        max_diff(model->logits(ids, mask).slice(2, 0, 64), ref.at(name + ".logits_masked"), mask),
        1e-5)
        << name;
    // A fresh model for generation, as the reference's (dynamic follows what it has seen).
    model = models::load_hf_model(folder);
    model->eval();
    hf_models_test::expect_transformers_generation(
        *model, expected["prompt"].get<std::vector<int64_t>>(),
        c["generated"].get<std::vector<int64_t>>(), ref.at(name + ".generate_logits"), name);
    // What save_pretrained writes: rope_parameters alone, as Transformers 5 writes it.
    const nlohmann::json written = model->config().json;
    EXPECT_EQ(written["rope_parameters"], c["rope_parameters"]) << name;
    for (const char* old : {"rope_scaling", "rope_theta", "rope_local_base_freq"}) {
      EXPECT_FALSE(written.contains(old)) << name << " " << old;
    }
  }
}

// The rotary embedding matters: the same weights with the default one give other logits, so the
// test above checks each type's frequencies.
TEST(HfModels, RopeTypesChangeTheLogits) {
  NEED_FIXTURES();
  const std::string dir = testing::reference_dir("hf_rope");
  std::map<std::string, torch::Tensor> ref;
  for (auto& [name, t] : io::load_safetensors(dir + "/logits.safetensors")) ref[name] = t;
  auto model = models::load_hf_model(fixtures + "/llama");
  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor plain = model->logits(ref.at("input_ids")).slice(2, 0, 64);
  for (const char* name : {"llama3", "linear", "dynamic", "yarn", "yarn_mscale",
                           "yarn_attention_factor", "longrope", "proportional"}) {
    // 1e-4: ten times the tolerance above (proportional, whose rotated half is the default's
    // lowest frequencies, is 3.7e-4 away over 40 positions; the others more than 1e-3).
    EXPECT_GT(max_diff(plain, ref.at(std::string(name) + ".logits")), 1e-4) << name;
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
  const std::string qwen2 = fixtures + "/qwen2", qwen3 = fixtures + "/qwen3",
                    mistral = fixtures + "/mistral", gemma3 = fixtures + "/gemma3_text";
  bad(llama, [](auto& j) { j["model_type"] = "qwen2_moe"; },
      {"model_type", "qwen2_moe",
       "gpt2, llama, qwen2, qwen3, mistral, gemma3_text, phi3, gemma2, olmo2, smollm3, granite, "
       "mixtral, qwen3_moe"});
  bad(qwen3, [](auto& j) { j["model_type"] = "deepseek_v3"; }, {"model_type", "deepseek_v3"});
  // Rotary embeddings: a type not built, a key its type needs, factors of the wrong length.
  bad(qwen2, [](auto& j) { j["rope_parameters"]["rope_type"] = "yarn"; },
      {"config.json: rope_parameters: factor is missing (rope_type \"yarn\" needs factor, "
       "original_max_position_embeddings)"});
  bad(qwen3,
      [](auto& j) {
        j["rope_scaling"] = {{"type", "ntk_magic"}, {"factor", 2.0}};
      },
      {"config.json: rope_scaling: rope_type \"ntk_magic\" is not supported (default, linear, "
       "dynamic, yarn, longrope, llama3, proportional)"});
  bad(mistral,
      [](auto& j) {
        j["rope_parameters"] = {{"rope_type", "longrope"},
                                {"short_factor", {1.0, 2.0}},
                                {"long_factor", std::vector<double>(8, 1.0)}};
      },
      {"rope_parameters: short_factor lists 2 factors where the rotary embedding has 8 "
       "frequencies (head_dim / 2)"});
  bad(llama,
      [](auto& j) {
        j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
        j["partial_rotary_factor"] = 0.5;
      },
      {"rope_scaling: partial_rotary_factor 0.5 is not supported by llama"});
  bad(qwen2,
      [](auto& j) {
        j["layer_types"] = {"full_attention", "sliding_attention"};
      },
      {"layer_types", "no sliding window", "use_sliding_window false"});
  bad(qwen2, [](auto& j) { j["layer_types"] = {"full_attention"}; },
      {"layer_types", "lists 1 layers where num_hidden_layers is 2"});
  bad(gemma3, [](auto& j) { j["layer_types"][0] = "chunked_attention"; },
      {"layer_types", "chunked_attention"});
  bad(gemma3, [](auto& j) { j["use_bidirectional_attention"] = true; },
      {"use_bidirectional_attention"});
  bad(gemma3,
      [](auto& j) {
        j["rope_parameters"]["full_attention"] = {{"rope_type", "linear"}, {"factor", 0}};
      },
      {"rope_parameters.full_attention: factor 0 is not > 0"});
  bad(gemma3, [](auto& j) { j["rope_parameters"]["chunked_attention"] = nlohmann::json::object(); },
      {"rope_parameters", "chunked_attention", "full_attention and sliding_attention"});
  bad(gemma3, [](auto& j) { j["sliding_window"] = nullptr; },
      {"layer_types", "sliding_window is null"});
  bad(gemma3, [](auto& j) { j["pad_token_id"] = 512; },
      {"pad_token_id", "512 is outside the vocabulary (0..511)"});
  bad(gemma3, [](auto& j) { j["hidden_size"] = 66; },
      {"hidden_size", "66 is not a multiple of num_attention_heads 4"});
  bad(gemma3, [](auto& j) { j["hidden_activation"] = "swish2"; }, {"hidden_activation", "swish2"});
  bad(qwen3, [](auto& j) { j.erase("head_dim"); },
      {"tensor 'model.layers.0.self_attn.q_proj.weight' is [128, 64], where config.json's qwen3 "
       "of 2 layers has [512, 64]"});
  bad(llama,
      [](auto& j) {
        j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"high_freq_factor", 4.0}};
      },
      {"rope_scaling: low_freq_factor is missing (rope_type \"llama3\" needs factor, "
       "original_max_position_embeddings, low_freq_factor, high_freq_factor)"});
  bad(llama, [](auto& j) { j["rope_scaling"] = "linear"; },
      {"config.json: rope_scaling \"linear\" is not an object"});
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
