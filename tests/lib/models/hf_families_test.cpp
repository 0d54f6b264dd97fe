// The families the one decoder takes beyond Llama (phi3, gemma2, olmo2, smollm3, granite), from
// folders Transformers made, their config.json spelt as the Hub spells it
// (tests/reference/scripts/hf_families.py): our logits equal Transformers' with and without a
// padding mask, the loss too, 30 greedy steps with the KV cache give its ids and logits (past
// phi3's original_max_position_embeddings and every sliding window), the config written back is
// Transformers' own, and a fresh model of each type has Transformers' defaults.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lib/io/safetensors.h"
#include "lib/models/hf_pretrained.h"
#include "lib/models/lora.h"
#include "tests/test_util.h"

namespace trainer::hf_models_test {
// hf_models_test.cpp's checks of a fresh config and of a greedy generation.
void expect_transformers_defaults(const nlohmann::json& defaults);
void expect_transformers_generation(models::HfCausalLM& model, const std::vector<int64_t>& prompt,
                                    const std::vector<int64_t>& ids, const torch::Tensor& logits,
                                    const std::string& name);
}  // namespace trainer::hf_models_test

namespace trainer::hf_families_test {
namespace {

struct Reference {
  std::string dir;
  nlohmann::json cases;
  std::map<std::string, torch::Tensor> tensors;
};

const Reference& reference() {
  static const Reference ref = [] {
    Reference r;
    r.dir = testing::reference_dir("hf_families");
    r.cases = nlohmann::json::parse(std::ifstream(r.dir + "/cases.json"));
    for (auto& [name, t] : io::load_safetensors(r.dir + "/reference.safetensors")) {
      r.tensors[name] = t;
    }
    return r;
  }();
  return ref;
}

// Largest |a - b| over the rows where mask is 1 (all when undefined).
double max_diff(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& mask = {}) {
  torch::Tensor d = (a.to(torch::kFloat) - b.to(torch::kFloat)).abs().amax(-1);
  if (mask.defined()) d = d * mask.to(torch::kFloat);
  return d.max().item<double>();
}

class HfFamily : public ::testing::TestWithParam<std::string> {};

TEST_P(HfFamily, GivesTransformersLogitsLossGenerationAndConfig) {
  const Reference& ref = reference();
  const std::string name = GetParam();
  const std::string folder = ref.dir + "/" + name;
  auto model = models::load_hf_model(folder);
  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor ids = ref.tensors.at("input_ids"), mask = ref.tensors.at("attention_mask");
  EXPECT_LE(max_diff(model->logits(ids).slice(2, 0, 64), ref.tensors.at(name + ".logits")), 1e-5);
  EXPECT_LE(max_diff(model->logits(ids, mask).slice(2, 0, 64),
                     ref.tensors.at(name + ".logits_masked"), mask),
            1e-5);
  data::Batch batch{{"input_ids", ids}, {"labels", ids}};
  EXPECT_NEAR(model->forward(batch).loss.item<double>(),
              ref.tensors.at(name + ".loss").item<double>(), 1e-5);

  // Greedy steps with the cache, on a fresh model as the reference's.
  model = models::load_hf_model(folder);
  model->eval();
  const auto& c = ref.cases["cases"][name];
  hf_models_test::expect_transformers_generation(
      *model, ref.cases["prompt"].get<std::vector<int64_t>>(),
      c["generated"].get<std::vector<int64_t>>(), ref.tensors.at(name + ".generate_logits"), name);

  // What save_pretrained writes: Transformers' config.json after it read the Hub's spelling
  // (rope_parameters, partial_rotary_factor, layer_types, no_rope_layers, ...), key for key but
  // the dtype and the version.
  const nlohmann::json ours = model->config().json;
  for (const auto& [key, value] : c["config"].items()) {
    if (key == "dtype" || key == "layer_types" || key == "no_rope_layers") continue;
    ASSERT_TRUE(ours.contains(key)) << name << ": " << key;
    EXPECT_EQ(ours[key], value) << name << ": " << key;
  }
  for (const char* old : {"rope_scaling", "rope_theta"}) EXPECT_FALSE(ours.contains(old)) << old;
  // Every layer's kind as Transformers computed it.
  if (c["config"].contains("layer_types")) {
    const auto config = models::read_hf_config(folder);
    for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
      EXPECT_EQ(config.is_sliding_layer(i), c["config"]["layer_types"][i] == "sliding_attention")
          << name << " layer " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, HfFamily,
                         ::testing::Values("phi3", "gemma2", "olmo2", "smollm3", "granite",
                                           "mixtral", "qwen3_moe"));

// The mixtures' routers' load-balancing loss equals Transformers' (with and without the padding
// mask), and with the config's output_router_logits it joins the loss times
// router_aux_loss_coef; Batch::router_aux_loss returns it alone, leaving the loss as it was.
TEST(HfFamilies, RouterLoadBalancingLossEqualsTransformers) {
  const Reference& ref = reference();
  torch::NoGradGuard no_grad;
  const torch::Tensor ids = ref.tensors.at("input_ids"), mask = ref.tensors.at("attention_mask");
  for (const std::string name : {"mixtral", "qwen3_moe"}) {
    auto model = models::load_hf_model(ref.dir + "/" + name);
    model->eval();
    for (const std::string suffix : {"", "_masked"}) {
      data::Batch batch{{"input_ids", ids}, {"labels", ids}};
      if (!suffix.empty()) batch["attention_mask"] = mask;
      batch.router_aux_loss = true;
      const models::ModelOutput alone = model->forward(batch);
      ASSERT_TRUE(alone.aux_loss.defined()) << name;
      EXPECT_NEAR(alone.aux_loss.item<double>(),
                  ref.tensors.at(name + ".aux_loss" + suffix).item<double>(), 1e-6)
          << name << suffix;
      // The loss with it, as Transformers' output_router_logits adds it (with the mask, only the
      // sum: a padding query's logits, which Transformers' loss scores too, are left to chance).
      model->set_router_aux_loss(true, model->config().router_aux_loss_coef);
      batch.router_aux_loss = false;
      const models::ModelOutput added = model->forward(batch);
      if (suffix.empty()) {
        EXPECT_NEAR(added.loss.item<double>(),
                    ref.tensors.at(name + ".loss_with_aux").item<double>(), 1e-5)
            << name;
      }
      EXPECT_NEAR(added.loss.item<double>() - alone.loss.item<double>(),
                  model->config().router_aux_loss_coef * alone.aux_loss.item<double>(), 1e-6);
    }
  }
  // A dense model has no router loss.
  auto dense = models::load_hf_model(ref.dir + "/granite");
  data::Batch batch{{"input_ids", ids}, {"labels", ids}};
  batch.router_aux_loss = true;
  EXPECT_FALSE(dense->forward(batch).aux_loss.defined());
}

// The router loss's gradient reaches the routers through activation checkpointing (a sparse
// block returns its router logits beside its output), as without it.
TEST(HfFamilies, RouterLossGradientsThroughActivationCheckpointing) {
  const Reference& ref = reference();
  const torch::Tensor ids = ref.tensors.at("input_ids");
  std::vector<torch::Tensor> grads;
  for (bool checkpointing : {false, true}) {
    auto model = models::load_hf_model(ref.dir + "/qwen3_moe");
    model->train();
    models::set_activation_checkpointing(*model, checkpointing ? 1 : 0);
    data::Batch batch{{"input_ids", ids}, {"labels", ids}};
    batch.router_aux_loss = true;
    const models::ModelOutput out = model->forward(batch);
    (out.loss + 10.0 * out.aux_loss).backward();
    grads.push_back(model->named_parameters()["model.layers.0.mlp.gate.weight"].grad().clone());
  }
  ASSERT_TRUE(grads[1].defined());
  EXPECT_GT(grads[0].abs().max().item<double>(), 0);
  EXPECT_LE((grads[0] - grads[1]).abs().max().item<double>(), 1e-6);
}

// Each family's shape matters: phi3's longrope past original_max_position_embeddings, its partial
// rotary and its window, gemma2's soft-capping and windows, smollm3's layers without rotary and its
// window, granite's multipliers, olmo2's norms each change the logits (so the test above checks
// them); and the layer kinds derived from the config alone (layer_types taken away) are the ones
// Transformers wrote.
TEST(HfFamilies, EachFeatureChangesTheLogits) {
  const Reference& ref = reference();
  testing::TempDir tmp;
  torch::NoGradGuard no_grad;
  using Edit = std::function<void(nlohmann::ordered_json&)>;
  struct Case {
    std::string name;
    Edit edit;
    bool changes;
  };
  const std::vector<Case> cases = {
      {"phi3",
       [](auto& j) { j["rope_scaling"]["long_factor"] = j["rope_scaling"]["short_factor"]; }, true},
      {"phi3",
       [](auto& j) {
         j.erase("partial_rotary_factor");
         j.erase("rope_scaling");
       },
       true},
      {"phi3", [](auto& j) { j["sliding_window"] = nullptr; }, true},
      {"gemma2", [](auto& j) { j["attn_logit_softcapping"] = nullptr; }, true},
      {"gemma2", [](auto& j) { j["final_logit_softcapping"] = nullptr; }, true},
      {"gemma2", [](auto& j) { j["sliding_window"] = 64; }, true},
      {"gemma2", [](auto& j) { j.erase("layer_types"); }, false},
      {"smollm3",
       [](auto& j) {
         j["no_rope_layers"] = {1, 1, 1, 1};
         j.erase("layer_types");
       },
       true},
      {"smollm3",
       [](auto& j) {
         j["use_sliding_window"] = false;
         j.erase("layer_types");
       },
       true},
      {"smollm3",
       [](auto& j) {
         j.erase("layer_types");
         j.erase("no_rope_layers");
       },
       false},
      {"granite", [](auto& j) { j["residual_multiplier"] = 1.0; }, true},
      {"granite", [](auto& j) { j["attention_multiplier"] = 1.0; }, true},
      {"granite", [](auto& j) { j["embedding_multiplier"] = 1.0; }, true},
      {"granite", [](auto& j) { j["logits_scaling"] = 1.0; }, true},
      {"olmo2", [](auto& j) { j["rms_norm_eps"] = 0.5; }, true},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const std::string dir = tmp.file(c.name + std::to_string(i));
    std::filesystem::copy(ref.dir + "/" + c.name, dir);
    auto j = nlohmann::ordered_json::parse(std::ifstream(dir + "/config.json"));
    c.edit(j);
    std::ofstream(dir + "/config.json") << j.dump(2);
    auto model = models::load_hf_model(dir);
    model->eval();
    const double diff = max_diff(model->logits(ref.tensors.at("input_ids")).slice(2, 0, 64),
                                 ref.tensors.at(c.name + ".logits"));
    if (c.changes) {
      EXPECT_GT(diff, 1e-4) << c.name << " case " << i;
    } else {
      EXPECT_LE(diff, 1e-5) << c.name << " case " << i;
    }
  }
}

TEST(HfFamilies, FreshConfigsHaveTransformersDefaults) {
  auto defaults = nlohmann::json::parse(std::ifstream(reference().dir + "/defaults.json"));
  ASSERT_EQ(defaults.size(), 7u);
  hf_models_test::expect_transformers_defaults(defaults);
}

// PEFT's default LoRA targets: gemma2's q_proj and v_proj; none for the others (PEFT asks for
// target_modules there; for mixtral too, which its table lists but its Transformers 5 conversion
// empties).
TEST(HfFamilies, PeftDefaultTargets) {
  EXPECT_EQ(models::peft_default_target_modules("gemma2"),
            (std::vector<std::string>{"q_proj", "v_proj"}));
  for (const char* type : {"phi3", "olmo2", "smollm3", "granite", "mixtral", "qwen3_moe"}) {
    EXPECT_TRUE(models::peft_default_target_modules(type).empty()) << type;
  }
}

// Bad configs of the families: one line naming the field.
TEST(HfFamilies, BadConfigsAreOneLine) {
  const Reference& ref = reference();
  testing::TempDir tmp;
  auto bad = [&](const std::string& name, auto edit, const std::string& part) {
    const std::string dir = tmp.file("bad");
    std::filesystem::remove_all(dir);
    std::filesystem::copy(ref.dir + "/" + name, dir);
    auto j = nlohmann::ordered_json::parse(std::ifstream(dir + "/config.json"));
    edit(j);
    std::ofstream(dir + "/config.json") << j.dump(2);
    testing::expect_input_error([&] { models::load_hf_model(dir); }, {part});
  };
  bad(
      "phi3", [](auto& j) { j["rope_scaling"]["type"] = "llama3"; },
      "rope_scaling: rope_type \"llama3\" is not supported (default, longrope for phi3)");
  bad(
      "phi3",
      [](auto& j) {
        j["rope_scaling"]["long_factor"] = {1.0, 2.0, 3.0, 4.0};
      },
      "rope_scaling: long_factor lists 4 factors where the rotary embedding has 3 frequencies");
  bad(
      "smollm3",
      [](auto& j) {
        j["no_rope_layers"] = {1, 1};
      },
      "no_rope_layers lists 2 layers where num_hidden_layers is 4");
  bad(
      "granite", [](auto& j) { j["logits_scaling"] = 0; },
      "logits_scaling 0 is not a finite non-zero number");
  bad(
      "gemma2", [](auto& j) { j["attn_logit_softcapping"] = -1; },
      "attn_logit_softcapping -1 is not > 0 (or null)");
  bad(
      "mixtral", [](auto& j) { j["num_experts_per_tok"] = 5; },
      "num_experts_per_tok 5 is more than the 4 experts (num_local_experts)");
  bad(
      "qwen3_moe", [](auto& j) { j["mlp_only_layers"] = {7}; },
      "mlp_only_layers names layer 7 of 3");
  bad(
      "qwen3_moe", [](auto& j) { j["num_experts"] = 100000; },
      "num_experts 100000 is more than 4096 experts");
  bad(
      "mixtral", [](auto& j) { j["num_local_experts"] = 3; },
      "the weights hold tensor 'model.layers.0.block_sparse_moe.experts.3.");
}

// LoRA on the families as PEFT names their layers: phi3's fused qkv_proj and gate_up_proj, and a
// mixture's experts one by one (mixtral's w1, w2, w3, which PEFT 0.21 converts to its fused
// experts on load): the adapter folder `trainer train` saves loads in PEFT over the base with
// every tensor, its B matrices trained away from their zeros, and PEFT's logits of the adapted
// model equal ours. Without target_modules, a type PEFT has no default for is one line, exit 2.
TEST(FamilyLora, AdaptersLoadInPeftAndGiveOurLogits) {
  const Reference& ref = reference();
  testing::TempDir tmp;
  struct Case {
    std::string model, targets;
    int tensors;  // adapter tensors: 2 per adapted layer
  };
  const std::string corpus = "/usr/share/games/fortunes/fortunes";
  for (const Case& c : {Case{"phi3", "qkv_proj,o_proj,gate_up_proj,down_proj", 16},
                        Case{"mixtral", "q_proj,v_proj,w1,w2,w3", 2 * 2 * (2 + 3 * 4)}}) {
    const std::string out = tmp.file(c.model);
    auto r = testing::run(
        "OMP_NUM_THREADS=1 " + testing::kTrainerBin + " train --model_name_or_path " + ref.dir +
        "/" + c.model + " --train_file " + corpus +
        " --block_size 32 --per_device_train_batch_size 4 --max_steps 3"
        " --learning_rate 1e-2 --use_peft true --lora_r 4 --lora_alpha 8"
        " --target_modules " +
        c.targets + " --save_strategy no --disable_tqdm true --output_dir " + out + " 2>&1");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    auto peft = testing::run(
        std::string(TRAINER_PYTHON) +
        " -c \"import sys, torch; from transformers import AutoModelForCausalLM;"
        " from peft import PeftModel; from safetensors import safe_open;"
        " m = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(sys.argv[1],"
        " dtype=torch.float32), sys.argv[2]).eval();"
        " f = safe_open(sys.argv[2] + '/adapter_model.safetensors', 'pt');"
        " ids = torch.arange(12).reshape(1, 12) * 37 % 512;"
        " logits = m(input_ids=ids).logits;"
        " print('PEFT', len(list(f.keys())), sum(p.abs().sum().item() > 0 for n, p in"
        " m.named_parameters() if 'lora_B' in n) > 0, '%.6f' % logits.sum().item(),"
        " '%.6f' % logits.abs().sum().item())\" " +
        ref.dir + "/" + c.model + " " + out + " 2>&1");
    ASSERT_EQ(peft.exit_code, 0) << peft.out;
    const size_t at = peft.out.rfind("PEFT ");
    ASSERT_NE(at, std::string::npos) << peft.out;
    std::istringstream words(peft.out.substr(at + 5));
    int tensors = 0;
    std::string trained;
    double sum = 0, abs_sum = 0;
    words >> tensors >> trained >> sum >> abs_sum;
    EXPECT_EQ(tensors, c.tensors) << c.model << ": " << peft.out;
    EXPECT_EQ(trained, "True") << c.model << ": " << peft.out;
    auto ours = models::load_peft_model(out);
    ours->eval();
    torch::NoGradGuard no_grad;
    const torch::Tensor ids = (torch::arange(12, torch::kLong) * 37).remainder(512).unsqueeze(0);
    const torch::Tensor logits = models::as_hf_causal_lm(*ours)->logits(ids);
    EXPECT_NEAR(logits.sum().item<double>(), sum, 1e-4 * std::abs(abs_sum)) << c.model;
    EXPECT_NEAR(logits.abs().sum().item<double>(), abs_sum, 1e-5 * abs_sum) << c.model;
  }
  auto r = testing::run(testing::kTrainerBin + " train --model_name_or_path " + ref.dir +
                        "/olmo2 --train_file " + corpus + " --use_peft true --max_steps 1" +
                        " --output_dir " + tmp.file("none") + " 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("use_peft: PEFT has no default target_modules for model_type olmo2: give "
                       "target_modules"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace trainer::hf_families_test
