// models::generate_tokens against Transformers' model.generate(do_sample=True) (reference
// hf_sample: tests/reference/scripts/hf_sample.py): with the same seed, the same tokens for one
// prompt and for a left-padded batch of three, on GPT-2, Llama and Qwen3 fixtures, under
// temperature with top_k, top_p, min_p, the repetition penalty, and plain sampling.
#include <string>

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "lib/models/lora.h"
#include "lib/models/pretrained_source.h"
#include "lib/models/sampling.h"
#include "tests/test_util.h"
#include "tests/torch_test_util.h"

namespace trainer::models {
namespace {

using json = nlohmann::json;

TEST(Sampling, DrawsTransformersTokensForOnePromptAndALeftPaddedBatch) {
  const std::string dir = testing::reference_dir("hf_sample");
  ASSERT_FALSE(dir.empty());
  // Python's json writes the processors' filter_value as -Infinity, which JSON has not.
  std::string text = testing::slurp(dir + "/sample.json");
  for (size_t at = text.find("-Infinity"); at != std::string::npos; at = text.find("-Infinity"))
    text.replace(at, 9, "null");
  const json reference = json::parse(text);
  std::map<std::string, std::shared_ptr<Model>> models;
  int compared = 0, batches = 0;
  for (const auto& run : reference["runs"]) {
    const std::string name = run["model"];
    const json& fixture = reference["models"][name]["fixture"];
    if (!models.count(name)) {
      const std::string path = testing::reference_dir(fixture["ref"].get<std::string>()) + "/" +
                               fixture["model"].get<std::string>();
      models[name] = load_pretrained(*read_pretrained_source(path), "float32");
      models[name]->eval();
    }
    HfCausalLM* model = as_hf_causal_lm(*models[name]);
    const json& e = run["effective"];
    SamplingSettings s;
    s.do_sample = e["do_sample"];
    s.max_new_tokens = e["max_new_tokens"];
    s.temperature = e["temperature"];
    s.top_k = e["top_k"];
    s.top_p = e["top_p"];
    if (!e["min_p"].is_null()) s.min_p = e["min_p"].get<double>();
    s.repetition_penalty = e["repetition_penalty"];
    s.no_repeat_ngram_size = e["no_repeat_ngram_size"];
    s.eos_token_ids = {e["eos_token_id"].get<int64_t>()};
    s.pad_token_id = e["pad_token_id"];
    const torch::Tensor ids = testing::long_rows(run["input_ids"]);
    const torch::Tensor mask = testing::long_rows(run["attention_mask"]);
    at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(run["seed"].get<uint64_t>());
    const torch::Tensor tokens = generate_tokens(*model, ids, mask, s, generator);
    const torch::Tensor want = testing::long_rows(run["sequences"]).slice(1, ids.size(1));
    const std::string what =
        name + " " + run["prompts"].get<std::string>() + " " + run["setting"].get<std::string>();
    ASSERT_EQ(tokens.sizes(), want.sizes()) << what << ": " << tokens << " vs " << want;
    EXPECT_TRUE(torch::equal(tokens, want)) << what << ":\n" << tokens << "\nvs\n" << want;
    ++compared;
    if (ids.size(0) > 1) ++batches;
  }
  EXPECT_EQ(compared, 30);
  EXPECT_EQ(batches, 15);
}

}  // namespace
}  // namespace trainer::models
