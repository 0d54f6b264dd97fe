// LoRA against PEFT itself (tests/reference/scripts/peft_reference.py): adapter folders PEFT wrote
// load here and give PEFT's logits (r 4 and 8, rslora, all-linear, modules_to_save, trained biases,
// on GPT-2's Conv1D and Llama's Linear), the merged model equals PEFT's merge_and_unload, what we
// save PEFT loads to our logits, the trainable counts are print_trainable_parameters', and bad
// configs and foreign adapters are one line.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "lib/base/files.h"
#include "lib/base/hf_files.h"
#include "lib/io/safetensors.h"
#include "lib/models/hf_pretrained.h"
#include "lib/models/lora.h"
#include "lib/models/lora_config.h"
#include "lib/models/registry.h"
#include "tests/test_util.h"

namespace trainer::lora_test {
namespace {

using testing::expect_input_error;

std::map<std::string, torch::Tensor> tensors_of(const std::string& path) {
  std::map<std::string, torch::Tensor> out;
  for (auto& [name, t] : io::load_safetensors(path)) out[name] = t;
  return out;
}

double max_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat) - b.to(torch::kFloat)).abs().max().item<double>();
}

torch::Tensor logits_of(models::Model& model, const torch::Tensor& ids) {
  torch::NoGradGuard no_grad;
  model.eval();
  return models::as_hf_causal_lm(model)->logits(ids);
}

#define NEED_PEFT()                                      \
  const std::string peft = testing::peft_fixtures_dir(); \
  ASSERT_FALSE(peft.empty())

class LoraAgainstPeft : public ::testing::TestWithParam<std::string> {};

TEST_P(LoraAgainstPeft, LogitsMergeAndSavedTensorsEqualPeft) {
  NEED_PEFT();
  const std::string name = GetParam();
  auto ref = tensors_of(peft + "/reference.safetensors");
  const torch::Tensor ids = ref.at("input_ids").to(torch::kLong);
  auto model = models::load_peft_model(peft + "/" + name);
  EXPECT_LE(max_diff(logits_of(*model, ids), ref.at(name)), 1e-5);

  // What we would save is what PEFT saved: the same names, the same values.
  auto file = tensors_of(peft + "/" + name + "/" + base::hf::kAdapterWeights);
  auto ours = model->adapter_state_dict();
  EXPECT_EQ(ours.size(), file.size());
  for (const auto& [key, value] : ours) {
    ASSERT_TRUE(file.count(key)) << key;
    EXPECT_TRUE(torch::equal(value, file.at(key))) << key;
  }

  // merge_and_unload: PEFT's merged logits and tensors.
  auto merged = model->merge_and_unload();
  EXPECT_LE(max_diff(logits_of(*merged, ids), ref.at(name + "_merged")), 1e-5);
  auto peft_merged = tensors_of(peft + "/" + name + "_merged/model.safetensors");
  auto state = io::state_dict(*merged);
  EXPECT_EQ(state.size(), peft_merged.size());
  for (const auto& [key, value] : state) {
    ASSERT_TRUE(peft_merged.count(key)) << key;
    EXPECT_LE(max_diff(value, peft_merged.at(key)), 1e-6) << key;
  }
  for (const auto& p : merged->parameters()) EXPECT_TRUE(p.requires_grad());
}

INSTANTIATE_TEST_SUITE_P(Cases, LoraAgainstPeft,
                         ::testing::Values("llama_r4", "llama_r8", "llama_r8_rslora",
                                           "llama_all_linear", "llama_modules_to_save", "gpt2_r4",
                                           "gpt2_r8_rslora", "gpt2_lora_only", "gpt2_bias_all",
                                           "qwen2_default", "qwen3_default", "mistral_default",
                                           "gemma3_text_default"));

// PEFT's default target modules for each model type (the adapters PEFT made without
// target_modules list the ones it chose) are the ones a run without target_modules adapts.
TEST(Lora, DefaultTargetModulesArePeftsForEachModelType) {
  NEED_PEFT();
  for (const std::string type : {"qwen2", "qwen3", "mistral", "gemma3_text"}) {
    const models::LoraConfig config = models::read_adapter_config(peft + "/" + type + "_default");
    std::vector<std::string> theirs = config.target_modules;
    std::vector<std::string> ours = models::peft_default_target_modules(type);
    std::sort(theirs.begin(), theirs.end());
    std::sort(ours.begin(), ours.end());
    EXPECT_EQ(ours, theirs) << type;
  }
  EXPECT_EQ(models::peft_default_target_modules("gpt2"), std::vector<std::string>{"c_attn"});
}

// The same config on the same base: only the adapters (and what the config trains) require
// gradients, and the counts are print_trainable_parameters()'s to the digit.
TEST(Lora, TrainableCountsArePeftsAndTheBaseIsFrozen) {
  NEED_PEFT();
  std::ifstream in(peft + "/trainable.json");
  const auto lines = nlohmann::json::parse(in);
  for (const auto& [name, line] : lines.items()) {
    models::LoraConfig config = models::read_adapter_config(peft + "/" + name);
    config.init_lora_weights = "true";
    models::PeftModel model(models::load_hf_model(config.base_model_name_or_path), config);
    EXPECT_EQ(model.trainable_parameters_text(), line.get<std::string>()) << name;
    for (const auto& item : model.named_parameters()) {
      const std::string& key = item.key();
      const bool lora =
          key.find(".lora_A.") != std::string::npos || key.find(".lora_B.") != std::string::npos;
      if (lora) {
        EXPECT_TRUE(item.value().requires_grad()) << name << " " << key;
      }
      if (key.find("q_proj.weight") != std::string::npos) {
        EXPECT_FALSE(item.value().requires_grad()) << name << " " << key;
      }
    }
  }
}

// Our adapter folder goes to PEFT: PeftModel.from_pretrained on the same base gives our logits
// (trained biases and a module_to_save included).
TEST(Lora, SavedAdapterLoadsInPeftToOurLogits) {
  NEED_PEFT();
  testing::TempDir tmp;
  auto ref = tensors_of(peft + "/reference.safetensors");
  const torch::Tensor ids = ref.at("input_ids").to(torch::kLong);
  for (const std::string name : {"gpt2_lora_only", "llama_modules_to_save"}) {
    models::LoraConfig config = models::read_adapter_config(peft + "/" + name);
    torch::manual_seed(7);
    auto model = std::make_shared<models::PeftModel>(
        models::load_hf_model(config.base_model_name_or_path), config);
    {
      // Every trained tensor moved away from PEFT's file, so the check sees ours.
      torch::NoGradGuard no_grad;
      for (auto& p : model->parameters()) {
        if (p.requires_grad()) p.add_(torch::randn_like(p) * 0.01);
      }
    }
    const std::string dir = tmp.file(name);
    std::filesystem::create_directories(dir);
    model->save_weights(dir, 0);
    base::write_file_atomic(dir + "/" + base::hf::kAdapterConfig,
                            models::adapter_config_json(model->config()));
    const auto r =
        testing::run(std::string(TRAINER_PYTHON) + " " + SOURCE_DIR +
                     "/tests/reference/scripts/peft_reference.py logits " + dir + " " + peft +
                     "/reference.safetensors " + tmp.file(name + ".safetensors") + " 2>&1");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    auto theirs = tensors_of(tmp.file(name + ".safetensors"));
    EXPECT_LE(max_diff(logits_of(*model, ids), theirs.at("logits")), 1e-5) << name;
    // And it comes back here as it went.
    auto back = models::load_peft_model(dir);
    EXPECT_LE(max_diff(logits_of(*back, ids), theirs.at("logits")), 1e-5) << name;
  }
}

TEST(Lora, BadConfigsAndForeignAdaptersAreOneLine) {
  NEED_PEFT();
  const std::string llama = testing::hf_fixtures_dir() + "/llama";
  auto make = [&](models::LoraConfig config) {
    models::PeftModel model(models::load_hf_model(llama), config);
  };
  models::LoraConfig c;
  c.target_modules = {"q_proj"};
  c.r = 0;
  expect_input_error([&] { make(c); }, {"lora_r", "0", "positive"});
  c.r = 4;
  c.lora_alpha = -1;
  expect_input_error([&] { make(c); }, {"lora_alpha", "-1", "positive"});
  c.lora_alpha = 8;
  c.target_modules = {"query"};
  expect_input_error([&] { make(c); },
                     {"target_modules query match no linear layer", "q_proj, k_proj, v_proj"});
  c.target_modules = {};
  expect_input_error([&] { make(c); }, {"target_modules is empty", "gate_proj"});
  c.target_modules = {"q_proj"};
  c.modules_to_save = {"classifier"};
  expect_input_error([&] { make(c); }, {"modules_to_save: classifier matches no module"});
  // A layer inside modules_to_save trains in full and gets no adapter (PEFT's exclusion).
  c.modules_to_save = {"self_attn"};
  expect_input_error([&] { make(c); }, {"match only layers of modules_to_save"});
  c.target_modules = {"q_proj", "gate_proj"};
  c.modules_to_save = {"layers.0.self_attn"};
  {
    models::PeftModel model(models::load_hf_model(llama), c);
    EXPECT_EQ(model.adapted_layers(), (std::vector<std::string>{"model.layers.0.mlp.gate_proj",
                                                                "model.layers.1.self_attn.q_proj",
                                                                "model.layers.1.mlp.gate_proj"}));
  }
  c.target_modules = {"q_proj"};
  c.modules_to_save = {};
  c.r = 100000;
  expect_input_error([&] { make(c); }, {"lora_r 100000 is larger than layer", "at most 64"});
  c.r = 4;
  c.init_lora_weights = "pissa";
  expect_input_error([&] { make(c); }, {"init_lora_weights", "pissa"});

  // A Llama adapter on GPT-2: its tensors are no tensors of the model.
  testing::TempDir tmp;
  const std::string moved = tmp.file("moved");
  std::filesystem::copy(peft + "/llama_r4", moved);
  auto config = base::read_json_object(moved + "/" + base::hf::kAdapterConfig);
  config["base_model_name_or_path"] = testing::hf_fixtures_dir() + "/gpt2";
  config["target_modules"] = {"c_attn"};
  base::write_file_atomic(moved + "/" + base::hf::kAdapterConfig, config.dump());
  expect_input_error([&] { models::load_peft_model(moved); },
                     {base::hf::kAdapterWeights, "model.layers.0.self_attn",
                      "not a tensor of this model's adapters"});
  // The same base with another rank: the shapes say so.
  config["base_model_name_or_path"] = llama;
  config["target_modules"] = {"q_proj", "v_proj"};
  config["r"] = 8;
  base::write_file_atomic(moved + "/" + base::hf::kAdapterConfig, config.dump());
  expect_input_error([&] { models::load_peft_model(moved); },
                     {"lora_A.weight has shape [4, 64], the model's is [8, 64]"});
  // DoRA and per-layer ranks change the arithmetic: refused by name.
  config["r"] = 4;
  config["use_dora"] = true;
  base::write_file_atomic(moved + "/" + base::hf::kAdapterConfig, config.dump());
  expect_input_error([&] { models::load_peft_model(moved); }, {"use_dora", "not supported"});
  config["use_dora"] = false;
  config["rank_pattern"] = {{"q_proj", 2}};
  base::write_file_atomic(moved + "/" + base::hf::kAdapterConfig, config.dump());
  expect_input_error([&] { models::load_peft_model(moved); }, {"rank_pattern", "not supported"});
  config["rank_pattern"] = nlohmann::ordered_json::object();
  config["base_model_name_or_path"] = peft + "/llama_r4";
  base::write_file_atomic(moved + "/" + base::hf::kAdapterConfig, config.dump());
  expect_input_error([&] { models::load_peft_model(moved); },
                     {"is an adapter folder itself", "trainer merge"});
  config["base_model_name_or_path"] = tmp.file("nowhere");
  base::write_file_atomic(moved + "/" + base::hf::kAdapterConfig, config.dump());
  expect_input_error([&] { models::load_peft_model(moved); },
                     {"base_model_name_or_path", "nowhere", "not a Hugging Face model folder"});
}

// target_modules as one string is a regular expression that must match a whole module name, in
// the syntax of Python's re (PEFT's re.fullmatch), possessive quantifiers included; one that
// backtracks without end is one line naming it (a fuzzer's finding: std::regex ran for ever).
TEST(Lora, TargetModulesRegexMatchesAsPeftsAndOneThatBacktracksWithoutEndIsOneLine) {
  auto config_with = [](const std::string& regex) {
    nlohmann::ordered_json j = {{"r", 4}, {"lora_alpha", 8}, {"target_modules", regex}};
    return models::parse_adapter_config(j, "adapter_config.json");
  };
  const std::string q = "model.layers.0.self_attn.q_proj", k = "model.layers.0.self_attn.k_proj";
  models::LoraConfig c = config_with(R"(.*\.(q_proj|v_proj))");
  EXPECT_TRUE(models::lora_target_matches(c, q));
  EXPECT_FALSE(models::lora_target_matches(c, k));
  EXPECT_FALSE(models::lora_target_matches(config_with("q_proj"), q));  // the whole name
  EXPECT_TRUE(models::lora_target_matches(config_with(R"(model\.layers\.0.*+)"), q));
  EXPECT_FALSE(models::lora_target_matches(config_with(R"(model\.layers\.0.*+j)"), q));
  expect_input_error([&] { config_with("(q_proj"); },
                     {"target_modules", "(q_proj", "is not a regular expression"});

  c = config_with("(a+)+b");
  const double start = testing::now_seconds();
  expect_input_error([&] { models::lora_target_matches(c, std::string(40, 'a') + "c"); },
                     {"argument target_modules: the regular expression (a+)+b could not be "
                      "matched against the module name aaaa",
                      "U_REGEX_TIME_OUT", "simplify it"});
  EXPECT_LT(testing::now_seconds() - start, 10.0);
}

// A registry model takes adapters too: "all-linear" leaves its output layer out, and the adapter
// starts as a no-op (B zeros) so the outputs are the base's.
TEST(Lora, RegistryModelsTakeAdaptersAndStartAsTheBase) {
  data::DataInfo info;
  info.input_shape = {1, 28, 28};
  info.num_labels = 10;
  torch::manual_seed(0);
  auto base = models::make_model("basic_net", nlohmann::ordered_json::object(), info);
  base->eval();
  torch::Tensor x = torch::randn({3, 1, 28, 28});
  torch::Tensor before = base->forward(x).detach();
  models::LoraConfig config;
  config.target_modules = {"all-linear"};
  config.modules_to_save = {"fc2"};
  models::PeftModel model(base, config);
  EXPECT_EQ(model.adapted_layers(), std::vector<std::string>{"fc1"});
  model.eval();
  EXPECT_TRUE(torch::equal(model.forward(x), before));
  EXPECT_EQ(models::num_trainable_parameters(model), 8 * (9216 + 128) + 128 * 10 + 10);
  auto names = model.adapter_state_dict();
  std::vector<std::string> keys;
  for (const auto& [key, value] : names) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{
                      "base_model.model.fc1.lora_A.weight", "base_model.model.fc1.lora_B.weight",
                      "base_model.model.fc2.weight", "base_model.model.fc2.bias"}));
}

}  // namespace
}  // namespace trainer::lora_test
