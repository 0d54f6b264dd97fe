// Fine-tuning Hugging Face folders as run_clm.py does, against Transformers itself
// (tests/reference/scripts/hf_finetune.py: `datasets`, group_texts, Transformers' Trainer in our
// sampler's order): the same blocks, per-step losses equal (relative 1e-4) on 1 and 2 processes,
// the saved folder loaded by Transformers gives our eval loss, a folder trained with learning
// rate 0 is saved with the same tensors, and bad folders and files are one line, exit 2.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/io/safetensors_header.h"
#include "tests/test_util.h"

namespace trainer::hf_finetune_test {
namespace {

using json = nlohmann::json;
using testing::run;

#undef NEED_FIXTURES  // another test file of the unity batch may define its own
#define NEED_FIXTURES()                                                                           \
  const std::string fixtures = testing::hf_fixtures_dir();                                        \
  if (fixtures.empty() || !testing::python_has("datasets") || !testing::python_has("accelerate")) \
  GTEST_SKIP()                                                                                    \
      << "TRAINER_PYTHON lacks transformers, datasets or accelerate (scripts/setup installs them)"

const std::string kCorpus = "/usr/share/games/fortunes/fortunes";
constexpr int kSteps = 30;
// The generate checks' commands run on one thread: on a busy machine LibTorch's threads wait on
// each other (24 tokens without the cache took 7 s on two, 0.7 s on one).
const std::string kOneThread = "OMP_NUM_THREADS=1 ";

std::string python() { return std::string(TRAINER_PYTHON); }

// Transformers' run for `name` (hf_finetune_<name> of tests/reference/references: the fixture
// `name`, kSteps steps on kCorpus).
json reference(const std::string& name) {
  const std::string dir = testing::reference_dir("hf_finetune_" + name);
  if (dir.empty()) return json();
  std::ifstream in(dir + "/reference.json");
  return json::parse(in);
}

// Our run's trainer_state.json after `trainer train` (or `launch`) with run_clm's arguments.
json ours(const std::string& fixtures, const std::string& model, const std::string& out,
          int processes = 1, const std::string& extra = "") {
  const std::string per_device = std::to_string(4 / processes);
  const std::string arguments =
      "--model_name_or_path " + fixtures + "/" + model + " --train_file " + kCorpus +
      " --block_size 64 --per_device_train_batch_size " + per_device +
      " --per_device_eval_batch_size 4 --learning_rate 1e-3 --logging_steps 1 --max_steps " +
      std::to_string(kSteps) + " --save_strategy no --disable_tqdm true --do_eval true " +
      "--output_dir " + out + " " + extra;
  const std::string command =
      processes == 1 ? "OMP_NUM_THREADS=1 " + testing::kTrainerBin + " train " + arguments
                     : testing::launch("--nproc-per-node " + std::to_string(processes) + " " +
                                       testing::kTrainerBin + " train " + arguments);
  auto r = run(command + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  std::ifstream in(out + "/trainer_state.json");
  return json::parse(in);
}

void expect_same_losses(const json& state, const json& ref) {
  std::vector<double> losses;
  for (const auto& e : state["log_history"]) {
    if (e.contains("loss")) losses.push_back(e["loss"].get<double>());
  }
  ASSERT_EQ(losses.size(), ref["losses"].size());
  double largest = 0;
  for (size_t i = 0; i < losses.size(); ++i) {
    const double theirs = ref["losses"][i].get<double>();
    EXPECT_NEAR(losses[i], theirs, 1e-4 * std::abs(theirs)) << "step " << i + 1;
    largest = std::max(largest, std::abs(losses[i] - theirs) / std::abs(theirs));
  }
  std::printf("%zu steps: largest relative difference to Transformers' Trainer %.2e\n",
              losses.size(), largest);
}

// tmp/"one", our run's folder, goes back to Transformers: it loads with its tokenizer, without
// missing or unexpected keys, and scores our eval loss (`all`: its all_results.json) on the
// validation blocks.
void expect_folder_goes_back(const testing::TempDir& tmp, const json& all) {
  const std::string check =
      "HF_DATASETS_OFFLINE=1 HF_DATASETS_CACHE=" + tmp.file("datasets-cache") + " " + python() +
      " " + SOURCE_DIR + "/tests/reference/scripts/hf_finetune.py " + tmp.file("one") + " " +
      kCorpus + " " + tmp.file("check.json") + " --steps 0 2>&1";
  auto r = run(check);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::ifstream in(tmp.file("check.json"));
  json back = json::parse(in);
  EXPECT_TRUE(back["missing_keys"].empty()) << back["missing_keys"];
  EXPECT_TRUE(back["unexpected_keys"].empty()) << back["unexpected_keys"];
  EXPECT_NEAR(back["eval_loss"].get<double>(), all["eval_loss"].get<double>(),
              1e-5 * all["eval_loss"].get<double>());
}

// Our one-process run of `model` (a folder of `fixtures`) into tmp/"one" against Transformers'
// run `ref`: the same losses, training blocks and eval loss. Returns its all_results.json.
json one_process_equals(const std::string& fixtures, const std::string& model, const json& ref,
                        const testing::TempDir& tmp) {
  expect_same_losses(ours(fixtures, model, tmp.file("one")), ref);
  std::ifstream results(tmp.file("one") + "/all_results.json");
  json all = json::parse(results);
  EXPECT_EQ(all["train_samples"].get<int64_t>(), ref["train_blocks"].get<int64_t>());
  EXPECT_NEAR(all["eval_loss"].get<double>(), ref["eval_loss"].get<double>(),
              1e-4 * ref["eval_loss"].get<double>());
  return all;
}

class HfFineTune : public ::testing::TestWithParam<std::string> {};

TEST_P(HfFineTune, LossesEqualTransformersTrainerOnOneAndTwoProcesses) {
  NEED_FIXTURES();
  const std::string model = GetParam();
  json ref = reference(model);
  testing::TempDir tmp;
  json state = ours(fixtures, model, tmp.file("one"));
  expect_same_losses(state, ref);
  // The same blocks: run_clm's counts.
  std::ifstream results(tmp.file("one") + "/all_results.json");
  json all = json::parse(results);
  EXPECT_EQ(all["eval_samples"].get<int64_t>(), ref["eval_blocks"].get<int64_t>());
  EXPECT_EQ(all["train_samples"].get<int64_t>(), ref["train_blocks"].get<int64_t>());
  EXPECT_NEAR(all["perplexity"].get<double>(), std::exp(all["eval_loss"].get<double>()), 1e-9);
  EXPECT_NEAR(all["eval_loss"].get<double>(), ref["eval_loss"].get<double>(),
              1e-4 * ref["eval_loss"].get<double>());
  // Two processes of 2 take the same 4 blocks a step.
  expect_same_losses(ours(fixtures, model, tmp.file("two"), 2), ref);

  // The folder goes back to Transformers.
  expect_folder_goes_back(tmp, all);
  for (const char* name : {"config.json", "generation_config.json", "tokenizer.json",
                           "tokenizer_config.json", "model.safetensors"}) {
    EXPECT_TRUE(std::filesystem::exists(tmp.file("one") + "/" + name)) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, HfFineTune,
                         ::testing::Values("gpt2", "llama", "qwen3", "gemma3_text"));

// The other Llama-family members, on one process: a tied Qwen2 with a sliding layer, and Mistral
// (sliding_window 8 under blocks of 64), train to the losses of Transformers' Trainer.
class HfFineTuneOneProcess : public ::testing::TestWithParam<std::string> {};

TEST_P(HfFineTuneOneProcess, LossesEqualTransformersTrainer) {
  NEED_FIXTURES();
  const std::string model = GetParam();
  json ref = reference(model);
  testing::TempDir tmp;
  one_process_equals(fixtures, model, ref, tmp);
}

INSTANTIATE_TEST_SUITE_P(Models, HfFineTuneOneProcess, ::testing::Values("qwen2_tied", "mistral"));

// The families beyond Llama (phi3, gemma2, olmo2, smollm3, granite: tests/reference/scripts/
// hf_families.py, their config.json in the Hub's spelling) train to the losses of Transformers'
// Trainer on one process, and the folder goes back to Transformers with no key missing or left
// over, scoring our eval loss.
class FamilyFineTune : public ::testing::TestWithParam<std::string> {};

TEST_P(FamilyFineTune, LossesEqualTransformersTrainerAndTheFolderGoesBack) {
  NEED_FIXTURES();
  const std::string families = testing::reference_dir("hf_families");
  ASSERT_FALSE(families.empty());
  const std::string model = GetParam();
  json ref = reference(model);
  testing::TempDir tmp;
  expect_folder_goes_back(tmp, one_process_equals(families, model, ref, tmp));
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyFineTune,
                         ::testing::Values("phi3", "gemma2", "olmo2", "smollm3", "granite",
                                           "mixtral", "qwen3_moe"));

// Mixtral on two processes of 2 rows takes the same 4 rows a step as one process of 4: the same
// losses as Transformers' Trainer. (Qwen3-MoE's fixture has its router loss on, which each process
// computes over its own rows, as Transformers' does: not the one-process run's numbers.)
class MoeFineTuneTwoProcesses : public ::testing::TestWithParam<std::string> {};

TEST_P(MoeFineTuneTwoProcesses, LossesEqualTransformersTrainer) {
  NEED_FIXTURES();
  const std::string families = testing::reference_dir("hf_families");
  ASSERT_FALSE(families.empty());
  testing::TempDir tmp;
  expect_same_losses(ours(families, GetParam(), tmp.file("two"), 2), reference(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Families, MoeFineTuneTwoProcesses, ::testing::Values("mixtral"));

// TrainingArguments' keys against Transformers' Trainer on the same run: label_smoothing_factor
// (its LabelSmoother in training and evaluation) with include_num_input_tokens_seen (the count in
// each log).
class HfFineTuneKeys : public ::testing::TestWithParam<std::string> {};

TEST_P(HfFineTuneKeys, EqualTransformersTrainer) {
  NEED_FIXTURES();
  const std::string which = GetParam();
  const bool neftune = which == "neftune";
  // hf_finetune_keys_<which> runs Transformers' Trainer with the same keys.
  const std::string extra_args =
      neftune ? "--neftune_noise_alpha 5"
              : "--label_smoothing_factor 0.1 --include_num_input_tokens_seen all";
  const json ref = reference("keys_" + which);
  ASSERT_FALSE(ref.is_null());
  testing::TempDir tmp;
  const json state = ours(fixtures, "llama", tmp.file("one"), 1, extra_args);
  expect_same_losses(state, ref);
  std::ifstream results(tmp.file("one") + "/all_results.json");
  const json all = json::parse(results);
  EXPECT_NEAR(all["eval_loss"].get<double>(), ref["eval_loss"].get<double>(),
              1e-4 * ref["eval_loss"].get<double>());
  if (neftune) return;
  std::vector<json> logs;
  for (const auto& e : state["log_history"])
    if (e.contains("loss")) logs.push_back(e);
  ASSERT_EQ(logs.size(), ref["logs"].size());
  for (size_t i = 0; i < logs.size(); ++i) {
    EXPECT_EQ(logs[i]["num_input_tokens_seen"], ref["logs"][i]["num_input_tokens_seen"])
        << "step " << i + 1;
  }
}

// NEFTune's noise is drawn from a generator in another state than Transformers' at each step
// (the losses differ from step 1), so its run is not compared here; its bound and its training
// only are TrainingKeys.NeftuneNoise*'s.
INSTANTIATE_TEST_SUITE_P(Keys, HfFineTuneKeys, ::testing::Values("smoothing"));

// A safetensors file's tensors: name -> dtype, shape and bytes.
std::map<std::string, std::string> tensors_of(const std::string& path) {
  const std::string bytes = testing::slurp(path);
  const io::SafetensorsHeader header =
      io::parse_safetensors_header(bytes.data(), bytes.size(), path);
  std::map<std::string, std::string> tensors;
  for (const auto& e : header.entries) {
    tensors[e.name] = e.dtype + fmt::format(" {} ", fmt::join(e.shape, ",")) +
                      bytes.substr(header.data_start + e.begin, e.end - e.begin);
  }
  return tensors;
}

// A folder Transformers wrote, trained here with learning rate 0 and saved: the same tensors
// (and a checkpoint folder is a model folder too).
TEST(HfFineTuneFolders, LearningRateZeroSavesTheSameTensors) {
  NEED_FIXTURES();
  testing::TempDir tmp;
  for (const std::string model : {"gpt2", "llama_tied"}) {
    const std::string out = tmp.file(model);
    auto r = run(testing::kTrainerBin + " train --model_name_or_path " + fixtures + "/" + model +
                 " --train_file " + kCorpus + " --block_size 32 --max_steps 2 --save_steps 2 " +
                 "--learning_rate 0 --output_dir " + out + " --disable_tqdm true 2>&1");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const auto theirs = tensors_of(fixtures + "/" + model + "/model.safetensors");
    EXPECT_FALSE(theirs.empty());
    EXPECT_TRUE(tensors_of(out + "/model.safetensors") == theirs) << model;
    EXPECT_TRUE(tensors_of(out + "/checkpoint-2/model.safetensors") == theirs) << model;
  }
}

// A fresh model (model_type and model_config's config.json keys) takes the tokenizer's special
// tokens, not Transformers' defaults (GPT-2's 50256 lies outside a vocabulary of 512), and the
// run ends with a sample of its saved folder.
TEST(HfFineTuneFolders, AFreshModelTakesTheTokenizersSpecialTokens) {
  NEED_FIXTURES();
  testing::TempDir tmp;
  auto r =
      run(testing::kTrainerBin +
          " train --model_type gpt2 --model_config '{\"n_embd\": 32, \"n_head\": 2, "
          "\"n_layer\": 1, \"n_positions\": 64}' --tokenizer_name " +
          fixtures + "/tokenizer_gpt2 --train_file " + kCorpus + " --block_size 32 --max_steps 2 " +
          "--disable_tqdm true --output_dir " + tmp.file("out") + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("Sample (trainer generate"), std::string::npos) << r.out;
  std::ifstream in(tmp.file("out/config.json"));
  json config = json::parse(in);
  EXPECT_EQ(config["eos_token_id"], 0);
  EXPECT_EQ(config["bos_token_id"], 0);
  EXPECT_EQ(config["vocab_size"], 512);
  EXPECT_EQ(config["n_embd"], 32);
  EXPECT_EQ(config["architectures"][0], "GPT2LMHeadModel");
}

TEST(HfFineTuneFolders, BadFoldersAndFilesAreOneLineAndWriteNothing) {
  NEED_FIXTURES();
  testing::TempDir tmp;
  std::ofstream(tmp.file("bad.csv")) << "text\nx\n";
  std::ofstream(tmp.file("config.json")) << R"({"model_type": "bert", "vocab_size": 10})";
  std::ofstream(tmp.file("notes.txt")) << "hello\n";
  // A tokenizer folder whose tokenizer_config.json names a class that builds another tokenizer.
  std::filesystem::create_directory(tmp.file("bert"));
  std::filesystem::copy(fixtures + "/tokenizer_llama3/tokenizer.json",
                        tmp.file("bert/tokenizer.json"));
  std::ofstream(tmp.file("bert/tokenizer_config.json"))
      << R"({"tokenizer_class": "BertTokenizer"})";
  const std::string train = testing::kTrainerBin + " train --output_dir " + tmp.file("out") + " ";
  const std::string llama = " --model_name_or_path " + fixtures + "/llama";
  struct Case {
    std::string arguments;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {llama + " --train_file " + tmp.file("bad.csv"), {"bad.csv", ".txt"}},
      {llama + " --train_file " + tmp.file("missing.txt"), {"missing.txt"}},
      {llama + " --train_file " + kCorpus + " --block_size 4096",
       {"block_size 4096", "128 positions"}},
      {" --model_name_or_path " + tmp.path() + " --train_file " + tmp.file("notes.txt"),
       {"model_type", "bert", "gpt2, llama, qwen2, qwen3, mistral, gemma3_text"}},
      {" --model_type llama --train_file " + tmp.file("notes.txt"), {"tokenizer_name"}},
      {" --model_type qwen2_moe --tokenizer_name " + fixtures + "/llama --train_file " +
           tmp.file("notes.txt"),
       {"model_type", "qwen2_moe"}},
      {llama + " --train_file " + kCorpus + " --torch_dtype float64", {"torch_dtype", "float64"}},
      {llama + " --train_file " + kCorpus + " --tokenizer_name " + tmp.file("bert"),
       {"tokenizer_class \"BertTokenizer\" is not supported"}},
      {" --model_name_or_path " + tmp.file("nowhere") + " --train_file " + kCorpus,
       {"model_name_or_path", "nowhere", "does not exist"}},
      {" --model_type gpt2 --model_config '{\"n_embed\": 32}' --tokenizer_name " + fixtures +
           "/gpt2 --train_file " + kCorpus,
       {"n_embed", "did you mean \"n_embd\""}},
      {llama + " --train_file " + kCorpus + " --validation_split_percentage 101",
       {"validation_split_percentage", "101"}},
      {" --model_type llama --model_config '{\"vocab_size\": 100, \"hidden_size\": 32, "
       "\"num_attention_heads\": 2, \"num_hidden_layers\": 1, \"intermediate_size\": 64}' "
       "--tokenizer_name " +
           fixtures + "/llama --train_file " + tmp.file("notes.txt") + " --block_size 8",
       {"512 tokens", "vocab_size 100"}},
  };
  for (const auto& c : cases) {
    auto r = run(train + c.arguments);
    EXPECT_EQ(r.exit_code, 2) << c.arguments << "\n" << r.err;
    EXPECT_EQ(testing::count(r.err, "\n"), 1u) << r.err;
    for (const auto& part : c.parts) EXPECT_NE(r.err.find(part), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(tmp.file("out"))) << c.arguments;
  }
}

}  // namespace
}  // namespace trainer::hf_finetune_test

namespace trainer::hf_finetune_test {
namespace {

// The ids (prompt and 24 new tokens) of Transformers' model.generate(do_sample=False) on a fixture
// (its generation_config.json applies; "<fixture>_processors" with the logits processors of
// hf_generate.py set there), as `trainer generate --output_ids` prints them.
std::string transformers_greedy(const std::string& name) {
  static const json greedy = [] {
    const std::string dir = testing::reference_dir("hf_generate");
    return dir.empty() ? json() : json::parse(testing::slurp(dir + "/greedy.json"));
  }();
  EXPECT_TRUE(greedy.contains(name)) << name;
  return greedy.contains(name) ? greedy[name].get<std::string>() + "\n" : "";
}

// Greedy generation equals Transformers' model.generate(do_sample=False) token for token, with
// and without the KV cache; sampling is seeded.
TEST(HfGenerate, GreedyEqualsTransformersGenerateTokenForToken) {
  NEED_FIXTURES();
  for (const std::string model : {"gpt2", "llama"}) {
    const std::string dir = fixtures + "/" + model;
    const std::string prompt = "The meaning of life";
    const std::string theirs = transformers_greedy(model);
    for (const std::string cache : {"true", "false"}) {
      auto ours = run(kOneThread + testing::kTrainerBin + " generate " + dir + " --prompt '" +
                      prompt + "' --max_new_tokens 24 --output_ids true --use_cache " + cache);
      ASSERT_EQ(ours.exit_code, 0) << ours.err;
      EXPECT_EQ(ours.out, theirs) << model << " use_cache " << cache;
    }
  }
  // generation_config.json's logits processors, as model.generate applies them (the prompt's
  // ids count): a repetition penalty, no repeated bigram, and bad words (one token, and two), as
  // hf_generate.py sets them.
  testing::TempDir tmp;
  for (const std::string model : {"gpt2", "llama"}) {
    const std::string dir = tmp.file(model);
    std::filesystem::copy(fixtures + "/" + model, dir, std::filesystem::copy_options::recursive);
    json generation = json::parse(testing::slurp(dir + "/generation_config.json"));
    generation["repetition_penalty"] = 1.3;
    generation["no_repeat_ngram_size"] = 2;
    generation["bad_words_ids"] = {{5}, {264, 72}};
    std::filesystem::remove(dir + "/generation_config.json");
    std::ofstream(dir + "/generation_config.json") << generation.dump(2);
    const std::string prompt = "the the the the";
    const std::string theirs = transformers_greedy(model + "_processors");
    auto ours = run(kOneThread + testing::kTrainerBin + " generate " + dir + " --prompt '" +
                    prompt + "' --max_new_tokens 24 --output_ids true");
    ASSERT_EQ(ours.exit_code, 0) << ours.err;
    EXPECT_EQ(ours.out, theirs) << model << " with logits processors";
    auto plain = run(kOneThread + testing::kTrainerBin + " generate " + fixtures + "/" + model +
                     " --prompt '" + prompt + "' --max_new_tokens 24 --output_ids true");
    EXPECT_NE(plain.out, ours.out) << "the processors changed nothing: a weak test";
    // Sampling's settings come from the file where the command line gives none (as
    // model.generate's): do_sample with top_k 1 is greedy.
    generation["do_sample"] = true;
    generation["top_k"] = 1;
    std::filesystem::remove(dir + "/generation_config.json");
    std::ofstream(dir + "/generation_config.json") << generation.dump(2);
    auto top1 = run(kOneThread + testing::kTrainerBin + " generate " + dir + " --prompt '" +
                    prompt + "' --max_new_tokens 24 --output_ids true --seed 5");
    ASSERT_EQ(top1.exit_code, 0) << top1.err;
    EXPECT_EQ(top1.out, theirs) << model << " do_sample with generation_config's top_k 1";
  }
  auto a =
      run(kOneThread + testing::kTrainerBin + " generate " + fixtures +
          "/llama --prompt Hello --do_sample true --seed 3 --max_new_tokens 16 --output_ids true");
  auto b =
      run(kOneThread + testing::kTrainerBin + " generate " + fixtures +
          "/llama --prompt Hello --do_sample true --seed 3 --max_new_tokens 16 --output_ids true");
  EXPECT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
}

// The Llama family's newer members (Qwen2 tied with a sliding layer and untied, Qwen3, Mistral,
// Gemma 3) generate Transformers' greedy tokens (hf_generate.py's), with and without the KV cache:
// 30 tokens, past their sliding windows of 8. So do a fresh Qwen3 and Gemma 3 (model_type,
// Transformers' defaults under model_config's keys) trained 2 steps and saved: Transformers loads
// them as its classes without a missing or unexpected key. One Python process answers for the
// fresh ones (folders of ours, made here).
TEST(HfGenerate, TheLlamaFamilyAndFreshModelsGenerateTransformersGreedyTokens) {
  NEED_FIXTURES();
  testing::TempDir tmp;
  const std::string sizes =
      "\"hidden_size\": 32, \"num_attention_heads\": 2, \"num_key_value_heads\": 1, "
      "\"num_hidden_layers\": 2, \"intermediate_size\": 64, \"head_dim\": 16, "
      "\"max_position_embeddings\": 64";
  const std::vector<std::pair<std::string, std::string>> fresh = {
      {"qwen3", "{" + sizes + "}"},
      {"gemma3_text", "{" + sizes + ", \"sliding_window\": 8, \"final_logit_softcapping\": 2.0}"}};
  const std::string prompt = "The meaning of life";
  for (const std::string name : {"qwen2", "qwen2_tied", "qwen3", "mistral", "gemma3_text"}) {
    const std::string theirs = transformers_greedy(name);
    for (const std::string cache : {"true", "false"}) {
      auto ours = run(kOneThread + testing::kTrainerBin + " generate " + fixtures + "/" + name +
                      " --prompt '" + prompt +
                      "' --max_new_tokens 24 --output_ids true --use_cache " + cache);
      ASSERT_EQ(ours.exit_code, 0) << ours.err;
      EXPECT_EQ(ours.out, theirs) << name << " use_cache " << cache;
    }
  }
  std::vector<std::pair<std::string, std::string>> models;  // (folder, Transformers' class prefix)
  std::string dirs;
  for (const auto& [type, config] : fresh) {
    const std::string out = tmp.file(type);
    auto r = run(kOneThread + testing::kTrainerBin + " train --model_type " + type +
                 " --model_config '" + config + "' --tokenizer_name " + fixtures +
                 "/tokenizer_llama3 --train_file " + kCorpus +
                 " --block_size 32 --max_steps 2 --learning_rate 1e-2 " +
                 "--disable_tqdm true --output_dir " + out + " 2>&1");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    json saved = json::parse(testing::slurp(out + "/config.json"));
    EXPECT_EQ(saved["model_type"], type);
    EXPECT_EQ(saved["hidden_size"], 32);
    models.push_back({out, type == "qwen3" ? "Qwen3" : "Gemma3"});
    dirs += " " + out;
  }
  auto theirs = run(kOneThread + python() +
                    " -c \"import sys; from transformers import AutoModelForCausalLM as M, "
                    "AutoTokenizer as T\nfor d in sys.argv[2:]:\n m, i = M.from_pretrained(d, "
                    "output_loading_info=True); t = T.from_pretrained(d); assert not "
                    "i['missing_keys'] and not i['unexpected_keys'], i; ids = t(sys.argv[1], "
                    "return_tensors='pt').input_ids; print(type(m).__name__, ' '.join(map(str, "
                    "m.generate(ids, do_sample=False, max_new_tokens=24)[0].tolist())))\" '" +
                    prompt + "'" + dirs + " 2>&1");
  ASSERT_EQ(theirs.exit_code, 0) << theirs.out;
  std::vector<std::string> lines;
  for (const auto& line : testing::lines_of(theirs.out)) {
    if (line.find("ForCausalLM ") != std::string::npos) lines.push_back(line);
  }
  ASSERT_EQ(lines.size(), models.size()) << theirs.out;
  for (size_t i = 0; i < models.size(); ++i) {
    const auto& [dir, prefix] = models[i];
    const size_t space = lines[i].find(' ');
    EXPECT_EQ(lines[i].substr(0, space), prefix + "ForCausalLM") << dir;
    for (const std::string cache : {"true", "false"}) {
      auto ours = run(kOneThread + testing::kTrainerBin + " generate " + dir + " --prompt '" +
                      prompt + "' --max_new_tokens 24 --output_ids true --use_cache " + cache);
      ASSERT_EQ(ours.exit_code, 0) << ours.err;
      EXPECT_EQ(ours.out, lines[i].substr(space + 1) + "\n") << dir << " use_cache " << cache;
    }
  }
}

}  // namespace
}  // namespace trainer::hf_finetune_test

namespace trainer::hf_finetune_test {
namespace {

// Above save_safetensors_max_shard_size the weights are shards with an index, in output_dir and
// in checkpoints, as save_pretrained writes them: Transformers loads them, a run resumes from
// them, and a later run saving one file removes the earlier shards.
TEST(HfFineTuneFolders, ShardedWeightsLoadInTransformersAndResume) {
  NEED_FIXTURES();
  testing::TempDir tmp;
  const std::string out = tmp.file("run");
  const std::string base = testing::kTrainerBin + " train --model_name_or_path " + fixtures +
                           "/llama --train_file " + kCorpus +
                           " --block_size 32 --per_device_train_batch_size 2 --save_steps 2 "
                           "--disable_tqdm true --output_dir " +
                           out + " ";
  auto r = run(base + "--max_steps 4 --save_safetensors_max_shard_size 100KB 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const std::string& dir : {out, out + "/checkpoint-4"}) {
    EXPECT_FALSE(std::filesystem::exists(dir + "/model.safetensors")) << dir;
    EXPECT_TRUE(std::filesystem::exists(dir + "/model.safetensors.index.json")) << dir;
    EXPECT_TRUE(std::filesystem::exists(dir + "/model-00006-of-00006.safetensors")) << dir;
  }
  auto loaded = run(python() +
                    " -c \"import sys; from transformers import AutoModelForCausalLM as M; m, i = "
                    "M.from_pretrained(sys.argv[1], output_loading_info=True); assert not "
                    "i['missing_keys'] and not i['unexpected_keys'], i\" " +
                    out + " 2>&1");
  EXPECT_EQ(loaded.exit_code, 0) << loaded.out;
  r = run(
      base +
      "--max_steps 6 --save_safetensors_max_shard_size 100KB --resume_from_checkpoint true 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("Continuing training from checkpoint " + out + "/checkpoint-4"),
            std::string::npos)
      << r.out;
  r = run(base + "--max_steps 2 --save_strategy no --overwrite_output_dir true 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(std::filesystem::exists(out + "/model.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(out + "/model.safetensors.index.json"));
  EXPECT_FALSE(std::filesystem::exists(out + "/model-00001-of-00006.safetensors"));
  r = run(base + "--max_steps 2 --save_safetensors_max_shard_size 12XB");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("save_safetensors_max_shard_size: 12XB is not allowed"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace trainer::hf_finetune_test
