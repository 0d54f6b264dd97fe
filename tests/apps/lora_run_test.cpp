// LoRA fine-tuning through the trainer program, against PEFT + Transformers' Trainer
// (tests/reference/scripts/hf_finetune.py --adapter): from the same adapter (PEFT wrote it), 30
// steps give the same losses on 1 and 2 processes (Llama and GPT-2); the adapter folder we save
// PEFT loads to our eval loss; `trainer merge` equals PEFT's merge_and_unload; adapter folders
// evaluate and generate; resuming is exact and checkpoints hold the adapter only; bad settings are
// one line, exit 2.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace trainer::lora_run_test {
namespace {

using json = nlohmann::json;
using testing::run;

#define NEED_PEFT()                                                                           \
  const std::string peft = testing::peft_fixtures_dir();                                      \
  const std::string fixtures = testing::hf_fixtures_dir();                                    \
  if (peft.empty() || !testing::python_has("datasets") || !testing::python_has("accelerate")) \
  GTEST_SKIP()                                                                                \
      << "TRAINER_PYTHON lacks transformers, peft, datasets or accelerate (scripts/setup "    \
         "installs them)"

const std::string kCorpus = "/usr/share/games/fortunes/fortunes";
constexpr int kSteps = 30;

std::string python() { return std::string(TRAINER_PYTHON); }

// 3584 -> "3,584".
std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// hf_finetune.py's command line on BASE with --adapter ADAPTER, writing OUT.
std::string hf_finetune(const std::string& base, const std::string& adapter, int steps,
                        const std::string& out, const std::string& datasets_cache) {
  return "HF_DATASETS_OFFLINE=1 HF_DATASETS_CACHE=" + datasets_cache + " " + python() + " " +
         SOURCE_DIR + "/tests/reference/scripts/hf_finetune.py " + base + " " + kCorpus + " " +
         out + " --steps " + std::to_string(steps) + " --adapter " + adapter + " 2>&1";
}

// Its JSON for the adapter `name` of the PEFT fixtures, kSteps steps (hf_finetune_lora_<name> of
// tests/reference/references).
json reference(const std::string& name) {
  const std::string dir = testing::reference_dir("hf_finetune_lora_" + name);
  if (dir.empty()) return json();
  std::ifstream in(dir + "/reference.json");
  return json::parse(in);
}

// Its JSON for an adapter of ours, run now.
json scored(const std::string& base, const std::string& adapter, const std::string& out) {
  testing::TempDir cache;
  auto r = run(hf_finetune(base, adapter, 0, out, cache.path()));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  std::ifstream in(out);
  return json::parse(in);
}

// `trainer train` on the adapter folder with run_clm's arguments; its output.
testing::ProcessResult train(const std::string& model, const std::string& out, int processes,
                             const std::string& extra = "") {
  const std::string arguments =
      "--model_name_or_path " + model + " --train_file " + kCorpus +
      " --block_size 64 --per_device_train_batch_size " + std::to_string(4 / processes) +
      " --per_device_eval_batch_size 4 --learning_rate 1e-3 --logging_steps 1 --max_steps " +
      std::to_string(kSteps) + " --save_strategy no --disable_tqdm true --do_eval true " +
      "--output_dir " + out + " " + extra;
  return run((processes == 1
                  ? "OMP_NUM_THREADS=1 " + testing::kTrainerBin + " train " + arguments
                  : testing::launch("--nproc-per-node " + std::to_string(processes) + " " +
                                    testing::kTrainerBin + " train " + arguments)) +
             " 2>&1");
}

std::vector<double> losses_of(const std::string& out) {
  std::ifstream in(out + "/trainer_state.json");
  const json state = json::parse(in);
  std::vector<double> losses;
  for (const auto& e : state["log_history"]) {
    if (e.contains("loss")) losses.push_back(e["loss"].get<double>());
  }
  return losses;
}

void expect_same_losses(const std::vector<double>& ours, const json& ref) {
  ASSERT_EQ(ours.size(), ref["losses"].size());
  for (size_t i = 0; i < ours.size(); ++i) {
    const double theirs = ref["losses"][i].get<double>();
    EXPECT_NEAR(ours[i], theirs, 1e-4 * std::abs(theirs)) << "step " << i + 1;
  }
}

double eval_loss_of(const std::string& out) {
  std::ifstream in(out + "/all_results.json");
  return json::parse(in)["eval_loss"].get<double>();
}

class LoraRun : public ::testing::TestWithParam<std::string> {};

TEST_P(LoraRun, LossesEqualPeftAndTheFolderGoesBackToPeft) {
  NEED_PEFT();
  const std::string name = GetParam();
  const std::string adapter = peft + "/" + name;
  const std::string base = fixtures + "/" + (name.rfind("gpt2", 0) == 0 ? "gpt2" : "llama");
  testing::TempDir tmp;
  const json ref = reference(name);
  ASSERT_FALSE(ref.is_null());
  auto one = train(adapter, tmp.file("one"), 1);
  ASSERT_EQ(one.exit_code, 0) << one.out;
  expect_same_losses(losses_of(tmp.file("one")), ref);
  // The banner counts what PEFT's Trainer counts.
  EXPECT_NE(one.out.find("Number of trainable parameters = " +
                         with_commas(ref["trainable_parameters"].get<int64_t>())),
            std::string::npos)
      << one.out;
  EXPECT_NEAR(eval_loss_of(tmp.file("one")), ref["eval_loss"].get<double>(),
              1e-4 * ref["eval_loss"].get<double>());
  // Two processes of 2 blocks each: the same steps (DDP over the adapters only).
  auto two = train(adapter, tmp.file("two"), 2);
  ASSERT_EQ(two.exit_code, 0) << two.out;
  expect_same_losses(losses_of(tmp.file("two")), ref);

  // The round trip below goes through the same code for both models (their merges against PEFT's
  // are lora_test's): once, on Llama, for time.
  if (name != "llama_r8") return;
  // output_dir is an adapter folder (with the tokenizer), not a model folder: PEFT loads it onto
  // the base and scores our eval loss.
  for (const char* file : {"adapter_config.json", "adapter_model.safetensors", "tokenizer.json"}) {
    EXPECT_TRUE(std::filesystem::exists(tmp.file("one/") + file)) << file;
  }
  for (const char* file : {"model.safetensors", "config.json"}) {
    EXPECT_FALSE(std::filesystem::exists(tmp.file("one/") + file)) << file;
  }
  const json back = scored(base, tmp.file("one"), tmp.file("back.json"));
  EXPECT_NEAR(back["eval_loss"].get<double>(), eval_loss_of(tmp.file("one")),
              1e-5 * eval_loss_of(tmp.file("one")));

  // trainer merge = PEFT's merge_and_unload of the same folder, tensor for tensor.
  auto m = run(testing::kTrainerBin + " merge " + tmp.file("one") + " --output_dir " +
               tmp.file("merged") + " 2>&1");
  ASSERT_EQ(m.exit_code, 0) << m.out;
  auto p = run(python() + " " + SOURCE_DIR + "/tests/reference/scripts/peft_reference.py merge " +
               tmp.file("one") + " " + tmp.file("peft_merged") + " 2>&1");
  ASSERT_EQ(p.exit_code, 0) << p.out;
  auto c = run(python() +
               " -c \"import sys, torch; from safetensors.torch import load_file as l; "
               "a, b = (l(p + '/model.safetensors') for p in sys.argv[1:]); "
               "assert a.keys() == b.keys(), a.keys() ^ b.keys(); "
               "d = max((a[k] - b[k]).abs().max().item() for k in a); assert d <= 1e-6, d\" " +
               tmp.file("merged") + " " + tmp.file("peft_merged") + " 2>&1");
  EXPECT_EQ(c.exit_code, 0) << c.out;
  // An adapter folder generates as its merged model does (greedy, token for token), and
  // evaluates to the run's eval loss.
  const std::string generate = " --prompt 'The ' --max_new_tokens 12 --output_ids true 2>&1";
  auto g1 = run(testing::kTrainerBin + " generate " + tmp.file("one") + generate);
  auto g2 = run(testing::kTrainerBin + " generate " + tmp.file("merged") + generate);
  ASSERT_EQ(g1.exit_code, 0) << g1.out;
  EXPECT_EQ(g1.out, g2.out);
  auto e = run(testing::kTrainerBin + " evaluate --model_name_or_path " + tmp.file("one") +
               " --train_file " + kCorpus + " --block_size 64 --per_device_eval_batch_size 4 " +
               "--output_dir " + tmp.file("eval") + " 2>&1");
  ASSERT_EQ(e.exit_code, 0) << e.out;
  EXPECT_NEAR(eval_loss_of(tmp.file("eval")), eval_loss_of(tmp.file("one")),
              1e-6 * eval_loss_of(tmp.file("one")));
}

INSTANTIATE_TEST_SUITE_P(Adapters, LoraRun, ::testing::Values("llama_r8", "gpt2_r4"));

// Checkpoints hold the adapter (kilobytes, no base weights); resuming from one ends byte for byte
// where the uninterrupted run ends.
TEST(LoraRuns, ResumeIsExactAndCheckpointsHoldTheAdapterOnly) {
  NEED_PEFT();
  testing::TempDir tmp;
  const std::string arguments = " --model_name_or_path " + fixtures +
                                "/llama --use_peft true --lora_r 4 --lora_dropout 0.1 "
                                "--train_file " +
                                kCorpus +
                                " --block_size 32 --max_steps 6 --save_steps 3 --learning_rate "
                                "1e-3 --disable_tqdm true --per_device_train_batch_size 2 ";
  auto full = run(testing::kTrainerBin + " train" + arguments + "--output_dir " + tmp.file("full") +
                  " 2>&1");
  ASSERT_EQ(full.exit_code, 0) << full.out;
  const std::string checkpoint = tmp.file("full/checkpoint-3");
  EXPECT_TRUE(std::filesystem::exists(checkpoint + "/adapter_model.safetensors"));
  EXPECT_TRUE(std::filesystem::exists(checkpoint + "/adapter_config.json"));
  EXPECT_FALSE(std::filesystem::exists(checkpoint + "/model.safetensors"));
  EXPECT_LT(std::filesystem::file_size(checkpoint + "/adapter_model.safetensors"), 64u * 1024);
  std::filesystem::create_directories(tmp.file("resumed"));
  std::filesystem::copy(checkpoint, tmp.file("resumed/checkpoint-3"),
                        std::filesystem::copy_options::recursive);
  auto resumed = run(testing::kTrainerBin + " train" + arguments + "--output_dir " +
                     tmp.file("resumed") + " --resume_from_checkpoint true 2>&1");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_EQ(testing::slurp(tmp.file("full/adapter_model.safetensors")),
            testing::slurp(tmp.file("resumed/adapter_model.safetensors")));
  // evaluate with the run's arguments scores the run's adapter, not the bare base: the same eval
  // loss as the adapter folder itself gives.
  auto by_args = run(testing::kTrainerBin + " evaluate" + arguments + "--output_dir " +
                     tmp.file("full") + " 2>&1");
  ASSERT_EQ(by_args.exit_code, 0) << by_args.out;
  const double with_args = eval_loss_of(tmp.file("full"));
  auto by_folder = run(testing::kTrainerBin + " evaluate --model_name_or_path " + tmp.file("full") +
                       " --train_file " + kCorpus + " --block_size 32 --output_dir " +
                       tmp.file("scores") + " 2>&1");
  ASSERT_EQ(by_folder.exit_code, 0) << by_folder.out;
  EXPECT_DOUBLE_EQ(eval_loss_of(tmp.file("scores")), with_args);
  auto bare = run(testing::kTrainerBin + " evaluate --model_name_or_path " + fixtures +
                  "/llama --train_file " + kCorpus + " --block_size 32 --output_dir " +
                  tmp.file("bare") + " 2>&1");
  ASSERT_EQ(bare.exit_code, 0) << bare.out;
  EXPECT_NE(eval_loss_of(tmp.file("bare")), with_args);
}

// A target that matches nothing beside one that does trains (PEFT says nothing) and is warned
// about once, though the adapter is built again for the sample at the end of the run.
TEST(LoraRuns, ATargetThatMatchesNothingIsWarnedOnce) {
  NEED_PEFT();
  testing::TempDir tmp;
  auto r = run(testing::kTrainerBin + " train --model_name_or_path " + fixtures +
               "/llama --target_modules q_proj,nothing --train_file " + kCorpus +
               " --block_size 32 --max_steps 1 --max_train_samples 8 --disable_tqdm true "
               "--output_dir " +
               tmp.file("run"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string warning = "trainer: warning: target_modules: nothing matches no linear layer";
  const size_t first = r.err.find(warning);
  ASSERT_NE(first, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(warning, first + 1), std::string::npos) << r.err;
}

TEST(LoraRuns, BadSettingsAreOneLineAndWriteNothing) {
  NEED_PEFT();
  testing::TempDir tmp;
  const std::string llama = " --model_name_or_path " + fixtures + "/llama --train_file " + kCorpus;
  // An adapter whose base is another model.
  std::filesystem::copy(peft + "/llama_r4", tmp.file("foreign"));
  {
    std::string config = testing::slurp(tmp.file("foreign/adapter_config.json"));
    const std::string from = fixtures + "/llama\"";
    config.replace(config.find(from), from.size(), fixtures + "/gpt2\"");
    std::ofstream(tmp.file("foreign/adapter_config.json")) << config;
  }
  struct Case {
    std::string arguments;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {llama + " --use_peft true --lora_r 0", {"argument lora_r: 0 is not allowed"}},
      {llama + " --use_peft true --lora_alpha -2", {"argument lora_alpha: -2.0 is not allowed"}},
      {llama + " --target_modules query,value",
       {"target_modules query, value match no linear layer", "q_proj, k_proj"}},
      {llama + " --lora_r 16", {"argument lora_r", "use_peft"}},
      {llama + " --use_peft true --bias some", {"argument bias", "none, all or lora_only"}},
      {llama + " --use_peft true --lora_dropout 1", {"argument lora_dropout"}},
      {" --model_name_or_path " + tmp.file("foreign") + " --train_file " + kCorpus,
       {"adapter_config.json: target_modules", "match no linear layer", "c_attn"}},
      {" --model_name_or_path " + peft + "/llama_r4 --train_file " + kCorpus + " --use_peft true",
       {"is an adapter folder", "adapter_config.json gives the LoRA settings"}},
      {" --use_peft true --target_modules fc1 --model_name_or_path " + tmp.file("missing.pt"),
       {"missing.pt"}},
      {" --use_peft true --config_name " + fixtures + "/llama --tokenizer_name " + fixtures +
           "/llama --train_file " + kCorpus,
       {"LoRA adapts a pretrained model"}},
  };
  for (const Case& c : cases) {
    auto r = run(testing::kTrainerBin + " train --output_dir " + tmp.file("out") + c.arguments +
                 " 2>&1");
    EXPECT_EQ(r.exit_code, 2) << c.arguments << "\n" << r.out;
    EXPECT_EQ(testing::count(r.out, "\n"), 1u) << c.arguments << "\n" << r.out;
    for (const auto& part : c.parts) {
      EXPECT_NE(r.out.find(part), std::string::npos) << c.arguments << "\n" << r.out;
    }
    EXPECT_FALSE(std::filesystem::exists(tmp.file("out"))) << c.arguments;
  }
  // merge: an adapter folder in, a new folder out.
  auto m = run(testing::kTrainerBin + " merge " + fixtures + "/llama --output_dir " +
               tmp.file("m") + " 2>&1");
  EXPECT_EQ(m.exit_code, 2) << m.out;
  EXPECT_NE(m.out.find("is not an adapter folder"), std::string::npos) << m.out;
  m = run(testing::kTrainerBin + " merge " + peft + "/llama_r4 --output_dir " + fixtures +
          "/llama 2>&1");
  EXPECT_EQ(m.exit_code, 2) << m.out;
  EXPECT_NE(m.out.find("already holds config.json"), std::string::npos) << m.out;
  m = run(testing::kTrainerBin + " merge " + peft + "/llama_r4 2>&1");
  EXPECT_EQ(m.exit_code, 2) << m.out;
  EXPECT_NE(m.out.find("needs --output_dir"), std::string::npos) << m.out;
}

// Registry models: BasicNet with adapters on its hidden layer and its output layer trained in
// full (the trainable count says so, and evaluate reads the run back: adapter and base), and the
// gpt with adapters, whose run `trainer generate` reads back.
TEST(LoraRuns, RegistryModelsTrainAdaptersAndEvaluateBack) {
  testing::TempDir tmp;
  const std::string arguments =
      " --use_peft true --target_modules all-linear --modules_to_save fc2 --max_train_samples "
      "256 --max_eval_samples 128 --max_steps 4 --per_device_train_batch_size 32 --learning_rate "
      "1e-2 --eval_strategy steps --eval_steps 4 --disable_tqdm true --output_dir " +
      tmp.file("out");
  auto r = run(testing::kTrainerBin + " train" + arguments + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("Number of trainable parameters = 76,042"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("trainable params: 76,042 || all params: 1,275,924 || trainable%: 5.9598"),
            std::string::npos)
      << r.out;
  std::ifstream in(tmp.file("out/all_results.json"));
  const double accuracy = json::parse(in)["eval_accuracy"].get<double>();
  auto e = run(testing::kTrainerBin + " evaluate" + arguments + " 2>&1");
  ASSERT_EQ(e.exit_code, 0) << e.out;
  std::ifstream again(tmp.file("out/eval_results.json"));
  EXPECT_EQ(json::parse(again)["eval_accuracy"].get<double>(), accuracy);

  // The byte-level gpt with adapters on its attention: the run ends with a sample, and
  // `trainer generate` reads the run's base and adapters back (the same seed, the same text).
  std::ofstream(tmp.file("corpus.txt")) << std::string(2000, 'a') + "bcd efg hij\n";
  auto g = run(testing::kTrainerBin +
               " train --model_name gpt --model_config '{\"n_layer\": 1, \"n_head\": 2, "
               "\"n_embd\": 32}' --dataset_name text --dataset_config '{\"path\": \"" +
               tmp.file("corpus.txt") +
               "\", \"context_length\": 32}' --target_modules c_attn --max_steps 3 "
               "--learning_rate 1e-2 --disable_tqdm true --save_strategy no --output_dir " +
               tmp.file("gpt") + " 2>&1");
  ASSERT_EQ(g.exit_code, 0) << g.out;
  const size_t at = g.out.find("Sample (trainer generate");
  ASSERT_NE(at, std::string::npos) << g.out;
  auto again_text = run(testing::kTrainerBin + " generate " + tmp.file("gpt") + " --seed 42");
  ASSERT_EQ(again_text.exit_code, 0) << again_text.out;
  const std::string sample = g.out.substr(g.out.find('\n', at) + 1);
  EXPECT_EQ(sample.substr(0, again_text.out.size()), again_text.out);
}

}  // namespace
}  // namespace trainer::lora_run_test
