// The checkpoints as the Hub publishes them (tests/reference/scripts/hub_checkpoints.py): sixteen
// config.json files spelt key for key as today's most fine-tuned Hub folders (Llama 3.1 and 3.2,
// Qwen2.5 plain and with YaRN, Qwen3, Gemma 3's text model, Phi-4-mini, Phi-3-mini, Gemma 2, OLMo
// 2, SmolLM2, SmolLM3, Granite 3.3, Mixtral, Qwen3-MoE, Mistral 7B), sizes shrunk, each with the
// tokenizer layout its family ships (Llama 3's, GPT-2's, Qwen2Tokenizer's, SentencePiece's as
// LlamaTokenizer and GemmaTokenizer build it, Mistral 7B's older Hub file): the folder loads, the
// tokenizer gives AutoTokenizer's ids, the model Transformers' loss on each line, and
// `trainer evaluate` run_clm.py's eval_loss.
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "lib/models/hf_pretrained.h"
#include "lib/tokenizers/tokenizer.h"
#include "tests/program_in_process.h"
#include "tests/test_util.h"

namespace trainer {
namespace hub_checkpoints_test {

using json = nlohmann::json;

const json& cases() {
  static const json c = [] {
    const std::string dir = testing::reference_dir("hub_checkpoints");
    return dir.empty() ? json() : json::parse(testing::slurp(dir + "/cases.json"));
  }();
  return c;
}

class HubCheckpoint : public ::testing::TestWithParam<std::string> {};

TEST_P(HubCheckpoint, LoadsWithItsTokenizerAndGivesTransformersIdsLossesAndEvalLoss) {
  const std::string dir = testing::reference_dir("hub_checkpoints");
  ASSERT_FALSE(dir.empty());
  const std::string name = GetParam(), folder = dir + "/" + name;
  const json& c = cases()["cases"][name];
  const auto& lines = cases()["lines"];

  {
    const tokenizers::Tokenizer tokenizer = tokenizers::Tokenizer::load(folder);
    // float32, as the reference's from_pretrained(dtype=torch.float32): the configs say bfloat16.
    auto model = models::load_hf_model(folder, "float32");
    model->eval();
    torch::NoGradGuard no_grad;
    for (size_t k = 0; k < lines.size(); ++k) {
      const std::vector<int32_t> ids = tokenizer.encode(lines[k].get<std::string>());
      ASSERT_EQ(json(ids), c["ids"][k]) << name << " (" << c["class"] << ") line " << k;
      if (c["losses"][k].is_null()) continue;
      const torch::Tensor t =
          torch::tensor(std::vector<int64_t>(ids.begin(), ids.end()), torch::kLong).unsqueeze(0);
      data::Batch batch{{"input_ids", t}, {"labels", t}};
      EXPECT_NEAR(model->forward(batch).loss.item<double>(), c["losses"][k].get<double>(), 1e-5)
          << name << " line " << k;
    }
  }

  // `trainer evaluate` on the lines as run_clm.py reads a .txt (one example a line, no line
  // breaks kept), in blocks of 16.
  testing::TempDir tmp;
  {
    std::ofstream text(tmp.file("lines.txt"));
    for (const auto& line : lines) text << line.get<std::string>() << "\n";
  }
  const auto run = testing::run_trainer_in_process(
      {"evaluate", "--model_name_or_path", folder, "--validation_file", tmp.file("lines.txt"),
       "--keep_linebreaks", "false", "--block_size",
       std::to_string(cases()["block_size"].get<int>()), "--per_device_eval_batch_size", "1",
       "--torch_dtype", "float32", "--output_dir", tmp.file("out"), "--report_to", "none",
       "--disable_tqdm", "true"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const json results = json::parse(testing::slurp(tmp.file("out") + "/eval_results.json"));
  EXPECT_NEAR(results["eval_loss"].get<double>(), c["eval_loss"].get<double>(), 1e-5) << name;
}

INSTANTIATE_TEST_SUITE_P(Hub, HubCheckpoint,
                         ::testing::Values("llama3.1", "llama3.2", "qwen2.5", "qwen2.5_yarn",
                                           "qwen3", "gemma3_4b_text", "phi4_mini", "phi3_mini",
                                           "gemma2", "olmo2", "smollm2", "smollm3", "granite3.3",
                                           "mixtral", "qwen3_moe", "mistral7b"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return n;
                         });

}  // namespace hub_checkpoints_test
}  // namespace trainer
