// Sharded data parallel (fsdp) through the real programs: every strategy trains to DDP's
// parameters on the same batches (relative 1e-5, with gradient accumulation and clipping) for
// BasicNet, the gpt model and a Hugging Face Llama on 2 and 3 processes; full sharding holds at
// most 1/N of DDP's state plus one unit between steps; a sharded checkpoint of 2 ranks resumes on
// 3 and on 1 to the uninterrupted run; kill -9 trials under `trainer launch`; a rank killed
// mid-run ends the other within the timeout; bad arguments are one line.
#include <array>
#include <csignal>
#include <filesystem>
#include <random>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <torch/torch.h>

#include "lib/base/files.h"
#include "lib/io/safetensors.h"
#include "tests/test_util.h"
#include "tests/torch_test_util.h"
#include "trainer/checkpoint_manifest.h"

namespace trainer {
namespace sharding_test {

using testing::relative_difference;
using testing::run;
using testing::slurp;
using testing::TempDir;

const std::string kCorpus = "/usr/share/games/fortunes/fortunes";

class Sharding : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir();
    testing::write_mnist_dir(tmp_->file("data"), 96, 32, false);
  }
  static void TearDownTestSuite() { delete tmp_; }

  // `trainer train` (under `trainer launch` with several processes) into `out`; its output.
  static testing::ProcessResult train(int processes, const std::string& arguments,
                                      const std::string& out) {
    const std::string train =
        testing::kTrainerBin + " train --disable_tqdm true --output_dir " + out + " " + arguments;
    return run("OMP_NUM_THREADS=1 " +
               (processes == 1 ? train
                               : testing::launch("--nproc-per-node " + std::to_string(processes) +
                                                 " " + train)) +
               " 2>&1");
  }
  // The models of the equality test, as arguments (with accumulation and clipping on).
  static std::string model_arguments(const std::string& model) {
    const std::string common =
        " --max_steps 6 --per_device_train_batch_size 4 --gradient_accumulation_steps 2 "
        "--max_grad_norm 0.5 --learning_rate 1e-3 --logging_steps 3 --save_strategy no";
    if (model == "basic_net") return "--dataset_dir " + tmp_->file("data") + common;
    if (model == "gpt") {
      return "--model_name gpt --dataset_name text --dataset_config "
             "'{\"context_length\":32,\"path\":\"" +
             kCorpus + "\"}' --model_config '{\"n_layer\":3,\"n_embd\":32,\"n_head\":2}' " +
             "--max_train_samples 400" + common;
    }
    // A Hugging Face folder: the fixtures' Llama, or hf_families.py's Qwen3-MoE (experts, a dense
    // layer, its router loss on).
    const std::string folder = model == "llama"
                                   ? testing::hf_fixtures_dir() + "/llama"
                                   : testing::reference_dir("hf_families") + "/" + model;
    return "--model_name_or_path " + folder + " --train_file " + kCorpus + " --block_size 32" +
           common;
  }

  static TempDir* tmp_;
};
TempDir* Sharding::tmp_ = nullptr;

class ShardingModels : public Sharding, public ::testing::WithParamInterface<std::string> {};

TEST_P(ShardingModels, EveryStrategyTrainsToDdpsParametersOnTwoAndThreeProcesses) {
  const std::string model = GetParam();
  if (model == "llama") {
    ASSERT_FALSE(testing::hf_fixtures_dir().empty());
  }
  const std::string arguments = model_arguments(model);
  const std::string wrap = model == "basic_net" ? "full_shard" : "full_shard auto_wrap";
  for (int processes : {2, 3}) {
    const std::string ddp = tmp_->file(model + "-ddp-" + std::to_string(processes));
    auto base = train(processes, arguments, ddp);
    ASSERT_EQ(base.exit_code, 0) << base.out;
    // Every strategy on 2 processes; on 3 (chunks of unequal parameters' pieces), full sharding.
    std::vector<std::string> strategies = {wrap};
    if (processes == 2) strategies = {"shard_optimizer", "shard_grad_op", wrap};
    for (const std::string& strategy : strategies) {
      const std::string out = tmp_->file(model + "-" + std::to_string(processes) + "-" +
                                         strategy.substr(0, strategy.find(' ')));
      auto r = train(processes, arguments + " --fsdp '" + strategy + "'", out);
      ASSERT_EQ(r.exit_code, 0) << r.out;
      const double rel =
          relative_difference(ddp + "/model.safetensors", out + "/model.safetensors");
      EXPECT_LT(rel, 1e-5) << model << " " << strategy << " on " << processes;
      std::printf("%s %s on %d processes: relative difference to DDP %.2e\n", model.c_str(),
                  strategy.c_str(), processes, rel);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ShardingModels,
                         ::testing::Values("basic_net", "gpt", "llama", "qwen3_moe"));

// The Llama family's sharding units are its decoder layers by Transformers' class name: Gemma 3's
// wrapped by transformer_layer_cls_to_wrap train to DDP's parameters, and another family's class
// is refused naming this one's.
TEST_F(Sharding, Gemma3DecoderLayersAreTheUnitsByTheirClassName) {
  const std::string fixtures = testing::hf_fixtures_dir();
  ASSERT_FALSE(fixtures.empty());
  const std::string arguments =
      "--model_name_or_path " + fixtures + "/gemma3_text --train_file " + kCorpus +
      " --block_size 32 --max_steps 4 --per_device_train_batch_size 2 --max_grad_norm 0.5 "
      "--learning_rate 1e-3 --logging_steps 2 --save_strategy no";
  const std::string ddp = tmp_->file("gemma3-ddp"), sharded = tmp_->file("gemma3-fsdp");
  auto base = train(2, arguments, ddp);
  ASSERT_EQ(base.exit_code, 0) << base.out;
  auto r = train(2,
                 arguments +
                     " --fsdp 'full_shard auto_wrap' --fsdp_config "
                     "'{\"transformer_layer_cls_to_wrap\":\"Gemma3DecoderLayer\"}'",
                 sharded);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_LT(relative_difference(ddp + "/model.safetensors", sharded + "/model.safetensors"), 1e-5);
  auto wrong = train(1,
                     arguments +
                         " --fsdp 'full_shard auto_wrap' --fsdp_config "
                         "'{\"transformer_layer_cls_to_wrap\":\"Qwen3DecoderLayer\"}'",
                     tmp_->file("gemma3-wrong"));
  EXPECT_EQ(wrong.exit_code, 2) << wrong.out;
  EXPECT_NE(wrong.out.find("transformer_layer_cls_to_wrap Qwen3DecoderLayer is not a layer of this "
                           "model (its blocks are Gemma3DecoderLayer)"),
            std::string::npos)
      << wrong.out;
}

TEST_F(Sharding, FullShardHoldsAtMostItsShareOfDdpsStatePlusOneUnitBetweenSteps) {
  // A 4-block gpt, one unit per block: parameters, gradients and AdamW's moments each rank holds
  // after a step, from the tensors' storage sizes (ddp_worker shard).
  auto held = [](int processes, const std::string& strategy) {
    auto r = run("OMP_NUM_THREADS=1 " +
                 testing::launch("--nproc-per-node " + std::to_string(processes) + " " +
                                 testing::kWorkerBin + " shard --strategy " + strategy) +
                 " 2>&1");
    EXPECT_EQ(r.exit_code, 0) << r.out;
    std::vector<std::array<int64_t, 5>> ranks;
    const std::regex line(
        "rank [0-9]+ params ([0-9]+) grads ([0-9]+) optimizer ([0-9]+) unit ([0-9]+) total "
        "([0-9]+)");
    for (std::sregex_iterator it(r.out.begin(), r.out.end(), line), end; it != end; ++it) {
      const std::smatch& parts = *it;
      ranks.push_back({std::stoll(parts[1]), std::stoll(parts[2]), std::stoll(parts[3]),
                       std::stoll(parts[4]), std::stoll(parts[5])});
    }
    EXPECT_EQ(ranks.size(), static_cast<size_t>(processes)) << r.out;
    return ranks;
  };
  for (int processes : {2, 3}) {
    const auto ddp = held(processes, "ddp");
    const auto sharded = held(processes, "full_shard");
    ASSERT_FALSE(ddp.empty());
    ASSERT_EQ(sharded.size(), ddp.size());
    const int64_t ddp_total = ddp[0][4];
    // 206,208 parameters: 824,832 bytes of weights, twice that of moments.
    EXPECT_EQ(ddp_total, 3 * 824832) << "the gpt of ddp_worker shard changed";
    for (const auto& rank : sharded) {
      EXPECT_LE(rank[4], ddp_total / processes + rank[3]);
      // Nothing but the chunks between steps: no gathered unit, no gradient.
      EXPECT_EQ(rank[1], 0);
      // (each of the 5 units padded to a multiple of the processes)
      EXPECT_LE(rank[0], ddp[0][0] / processes + 5 * 4 * processes);
    }
    std::printf("%d processes: DDP holds %lld bytes a rank, full_shard %lld (one unit: %lld)\n",
                processes, static_cast<long long>(ddp_total), static_cast<long long>(sharded[0][4]),
                static_cast<long long>(sharded[0][3]));
  }
}

TEST_F(Sharding, ACheckpointOfTwoRanksResumesOnThreeAndOneToTheUninterruptedRun) {
  // An mlp (no dropout: the masks would differ with the split), 24 examples a step: 2 x 4 x 3,
  // 3 x 4 x 2 and 1 x 4 x 6.
  const std::string arguments = "--dataset_dir " + tmp_->file("data") +
                                " --model_name mlp --max_steps 12 --save_steps 6 "
                                "--per_device_train_batch_size 4 --learning_rate 1e-3 "
                                "--logging_steps 4 --max_grad_norm 0.5";
  const std::vector<std::pair<std::string, std::string>> variants = {
      {"full_shard", " --fsdp full_shard"},
      {"shard_grad_op", " --fsdp shard_grad_op"},
      {"full_shard-sharded",
       " --fsdp full_shard --fsdp_config '{\"state_dict_type\":\"SHARDED_STATE_DICT\"}'"}};
  for (const auto& [variant, fsdp] : variants) {
    const bool sharded_dict = variant == "full_shard-sharded";
    const std::string name = "resume-" + variant;
    const std::string whole = tmp_->file(name);
    auto r = train(2, arguments + fsdp + " --gradient_accumulation_steps 3", whole);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const std::string checkpoint = whole + "/checkpoint-6";
    const Manifest manifest = verify_checkpoint(checkpoint);
    EXPECT_TRUE(manifest.sharded);
    EXPECT_TRUE(std::filesystem::exists(checkpoint + "/sharded_state_1_of_2.safetensors"));
    EXPECT_EQ(std::filesystem::exists(checkpoint + "/model.safetensors"), !sharded_dict) << variant;
    for (int processes : {3, 1}) {
      const std::string out = whole + "-on-" + std::to_string(processes);
      std::filesystem::create_directories(out);
      std::filesystem::copy(checkpoint, out + "/checkpoint-6",
                            std::filesystem::copy_options::recursive);
      auto resumed = train(processes,
                           arguments + fsdp + " --resume_from_checkpoint true" +
                               " --gradient_accumulation_steps " + std::to_string(6 / processes),
                           out);
      ASSERT_EQ(resumed.exit_code, 0) << resumed.out;
      EXPECT_NE(resumed.out.find("Continuing training from checkpoint " + out + "/checkpoint-6"),
                std::string::npos);
      const double rel =
          relative_difference(whole + "/model.safetensors", out + "/model.safetensors");
      EXPECT_LT(rel, 1e-5) << variant << " resumed on " << processes;
      std::printf("%s: resumed on %d processes, relative difference %.2e\n", variant.c_str(),
                  processes, rel);
    }
  }
  // A sharded checkpoint resumed without fsdp, or an unsharded one with it: one line each.
  const std::string whole = tmp_->file("resume-ddp");
  auto r = train(2, arguments + " --gradient_accumulation_steps 3", whole);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto mixed = train(2,
                     arguments +
                         " --gradient_accumulation_steps 3 --fsdp full_shard "
                         "--resume_from_checkpoint " +
                         whole + "/checkpoint-6",
                     tmp_->file("mixed1"));
  EXPECT_EQ(mixed.exit_code, 2) << mixed.out;
  EXPECT_NE(mixed.out.find("checkpoint " + whole +
                           "/checkpoint-6 was saved without fsdp; this run shards (fsdp "
                           "full_shard): resume it without fsdp, or start a new run"),
            std::string::npos)
      << mixed.out;
  const std::string sharded = tmp_->file("resume-full_shard");
  mixed = train(1,
                arguments + " --gradient_accumulation_steps 6 --resume_from_checkpoint " + sharded +
                    "/checkpoint-6",
                tmp_->file("mixed2"));
  EXPECT_EQ(mixed.exit_code, 2) << mixed.out;
  EXPECT_NE(mixed.out.find("was saved by a sharded run (fsdp); resume it with fsdp (any strategy "
                           "and number of processes)"),
            std::string::npos)
      << mixed.out;
}

TEST_F(Sharding, KillNineUnderLaunchThenResumingEndsByteIdenticalToTheUninterruptedRun) {
  // The checkpoints issue's trials, on 2 ranks in full-shard mode: every process SIGKILLed at a
  // random moment (half of them inside a save), then resumed with --resume_from_checkpoint.
  auto argv = [&](const std::string& out, const std::string& extra) {
    std::vector<std::string> words = {testing::kTrainerBin, "launch",
                                      "--nproc-per-node",   "2",
                                      "--master-port",      std::to_string(testing::free_port()),
                                      testing::kTrainerBin};
    for (const std::string& w :
         testing::train_argv(tmp_->file("data"), out,
                             {"--per_device_train_batch_size", "8", "--num_train_epochs", "2",
                              "--save_steps", "2", "--logging_steps", "3", "--learning_rate",
                              "1e-3", "--disable_tqdm", "true", "--fsdp", "full_shard"})) {
      if (w != testing::kTrainerBin) words.push_back(w);
    }
    if (!extra.empty()) {
      words.push_back(extra.substr(0, extra.find(' ')));
      words.push_back(extra.substr(extra.find(' ') + 1));
    }
    return words;
  };
  const std::string base = tmp_->file("kill-base");
  auto uninterrupted = run(testing::command_line(argv(base, "")) + " 2>&1");
  ASSERT_EQ(uninterrupted.exit_code, 0) << uninterrupted.out;
  const std::string expected = slurp(base + "/model.safetensors");
  std::mt19937 random(20261202);
  const int kTrials = 4;
  int inside_save = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    const std::string out = tmp_->file("kill" + std::to_string(trial));
    int launcher = testing::start(argv(out, ""), out + ".log", out + ".err");
    ASSERT_GT(launcher, 0);
    const double deadline = testing::now_seconds() + 60;
    if (trial % 2 == 0) {
      const std::string staging =
          out + "/.tmp-checkpoint-" + std::to_string(2 + 2 * (random() % 5));
      while (!std::filesystem::exists(staging) && testing::now_seconds() < deadline) ::usleep(200);
    } else {
      while (!std::filesystem::exists(out + "/checkpoint-2") && testing::now_seconds() < deadline)
        ::usleep(1000);
      ::usleep(random() % 500000);
    }
    // Every process of the run: the ranks, then the launcher.
    std::istringstream children(slurp("/proc/" + std::to_string(launcher) + "/task/" +
                                      std::to_string(launcher) + "/children"));
    for (int child; children >> child;) ::kill(child, SIGKILL);
    ::kill(launcher, SIGKILL);
    int status = 0;
    ::waitpid(launcher, &status, 0);
    ::usleep(100000);  // the ranks' exit
    for (const auto& name : base::list_directory(out)) {
      if (name.rfind(".tmp-checkpoint-", 0) == 0) ++inside_save;
    }
    const bool any = !list_checkpoints(out).empty();
    auto resumed = run(testing::command_line(argv(out, any ? "--resume_from_checkpoint true"
                                                           : "--overwrite_output_dir true")) +
                       " 2>&1");
    ASSERT_EQ(resumed.exit_code, 0) << "trial " << trial << ": " << resumed.out;
    EXPECT_TRUE(slurp(out + "/model.safetensors") == expected)
        << "trial " << trial << " ended with other weights";
    for (const auto& checkpoint : list_checkpoints(out)) {
      EXPECT_NO_THROW(verify_checkpoint(checkpoint.path)) << checkpoint.path;
    }
  }
  EXPECT_GE(inside_save, kTrials / 2 - 1);
  std::printf("kill -9 trials under launch (full_shard): %d, inside a save: %d\n", kTrials,
              inside_save);
}

TEST_F(Sharding, ARankKilledMidRunEndsTheOtherWithinTheTimeoutWithOneLine) {
  // Two ranks started by hand (no launcher to stop the survivor): rank 1 is SIGKILLed while
  // full sharding all-gathers and reduce-scatters every step; rank 0 ends on its own.
  const int port = testing::free_port();
  const std::string out = tmp_->file("killed-rank");
  std::vector<int> pids;
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<std::string> words = {"/usr/bin/env",
                                      "RANK=" + std::to_string(rank),
                                      "LOCAL_RANK=" + std::to_string(rank),
                                      "WORLD_SIZE=2",
                                      "LOCAL_WORLD_SIZE=2",
                                      "MASTER_ADDR=127.0.0.1",
                                      "MASTER_PORT=" + std::to_string(port),
                                      "OMP_NUM_THREADS=1"};
    for (const std::string& w : testing::train_argv(
             tmp_->file("data"), out,
             {"--max_steps", "100000", "--per_device_train_batch_size", "8", "--save_strategy",
              "no", "--disable_tqdm", "true", "--fsdp", "full_shard", "--ddp_timeout", "20"})) {
      words.push_back(w);
    }
    pids.push_back(testing::start(words, out + std::to_string(rank) + ".log",
                                  out + std::to_string(rank) + ".err"));
  }
  const double deadline = testing::now_seconds() + 60;
  while (slurp(out + "0.log").find("Number of trainable parameters") == std::string::npos &&
         testing::now_seconds() < deadline) {
    ::usleep(10000);
  }
  ::usleep(500000);  // well inside the steps
  ::kill(pids[1], SIGKILL);
  const double killed = testing::now_seconds();
  int status = 0;
  ::waitpid(pids[1], &status, 0);
  while (testing::alive(pids[0]) && testing::now_seconds() < killed + 40) ::usleep(10000);
  const double took = testing::now_seconds() - killed;
  if (testing::alive(pids[0])) ::kill(pids[0], SIGKILL);
  ::waitpid(pids[0], &status, 0);
  EXPECT_LT(took, 25.0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 0);
  const std::string err = slurp(out + "0.err");
  EXPECT_EQ(testing::lines_of(err).size(), 1u) << err;
  EXPECT_TRUE(std::regex_search(
      err, std::regex("^trainer: error: [a-z_]+ failed on rank 0 of 2 \\(timeout 20 s\\): ")))
      << err;
  std::printf("rank 0 ended %.1f s after rank 1 was killed: %s", took, err.c_str());
}

// The losses and gradient norms a run logged (trainer_state.json's log_history), in order.
std::vector<std::string> logged_losses(const std::string& out) {
  const std::string state = slurp(out + "/trainer_state.json");
  std::vector<std::string> values;
  const std::regex entry("\"(loss|grad_norm|train_loss)\": ([-0-9.e+]+)");
  for (std::sregex_iterator it(state.begin(), state.end(), entry), end; it != end; ++it)
    values.push_back((*it)[1].str() + " " + (*it)[2].str());
  return values;
}

// A DeepSpeed config runs on this sharding: stage 2 with its values spelled out trains as fsdp
// shard_grad_op, stage 3 with "auto" everywhere as full_shard auto_wrap, on 2 processes: the
// same weights byte for byte and the same logged losses.
TEST_F(Sharding, ADeepSpeedConfigTrainsAsItsStrategy) {
  const std::string arguments = model_arguments("basic_net");
  const std::string stage2 = tmp_->file("ds2.json"), stage3 = tmp_->file("ds3.json");
  // model_arguments' values: micro batch 4, accumulation 2, clipping 0.5, lr 1e-3; 2 processes.
  base::write_file_atomic(stage2, R"({
    "train_batch_size": 16, "train_micro_batch_size_per_gpu": 4,
    "gradient_accumulation_steps": 2, "gradient_clipping": 0.5,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8,
                                              "weight_decay": 0.0}},
    "zero_optimization": {"stage": 2, "overlap_comm": true, "contiguous_gradients": true,
                          "reduce_bucket_size": 5e8, "allgather_bucket_size": 5e8},
    "steps_per_print": 2000, "wall_clock_breakdown": false})");
  base::write_file_atomic(stage3, R"({
    "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
    "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
    "bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"},
    "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto",
                                              "weight_decay": "auto"}},
    "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": "auto",
      "warmup_max_lr": "auto", "warmup_num_steps": "auto", "total_num_steps": "auto",
      "warmup_type": "linear"}},
    "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"},
      "offload_param": {"device": "cpu"}, "overlap_comm": true, "reduce_bucket_size": "auto",
      "stage3_prefetch_bucket_size": "auto", "stage3_param_persistence_threshold": "auto",
      "stage3_gather_16bit_weights_on_model_save": true}})");
  for (const auto& [config, strategy] :
       {std::pair{stage2, std::string("shard_grad_op")},
        std::pair{stage3, std::string("full_shard auto_wrap offload")}}) {
    const std::string name = strategy.substr(0, strategy.find(' '));
    const std::string fsdp = tmp_->file("ds-fsdp-" + name), ds = tmp_->file("ds-" + name);
    auto base = train(2, arguments + " --fsdp '" + strategy + "'", fsdp);
    ASSERT_EQ(base.exit_code, 0) << base.out;
    auto r = train(2, arguments + " --deepspeed " + config, ds);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(slurp(ds + "/model.safetensors"), slurp(fsdp + "/model.safetensors")) << strategy;
    EXPECT_FALSE(logged_losses(ds).empty());
    EXPECT_EQ(logged_losses(ds), logged_losses(fsdp)) << strategy;
    std::printf("deepspeed %s as fsdp %s: weights byte for byte, %zu logged values equal\n",
                config.c_str(), strategy.c_str(), logged_losses(ds).size());
  }
  // Stage 2's config sets the batch, accumulation and clipping arguments not given.
  const std::string bare =
      "--dataset_dir " + tmp_->file("data") + " --max_steps 6 --logging_steps 3 --save_strategy no";
  const std::string set = tmp_->file("ds-set");
  auto r = train(2, bare + " --deepspeed " + stage2, set);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(slurp(set + "/model.safetensors"),
            slurp(tmp_->file("ds-fsdp-shard_grad_op") + "/model.safetensors"));
  EXPECT_EQ(logged_losses(set), logged_losses(tmp_->file("ds-fsdp-shard_grad_op")));
}

TEST_F(Sharding, ABadDeepSpeedConfigIsOneLineAndTouchesNothing) {
  const std::string data = "--dataset_dir " + tmp_->file("data") + " --max_steps 1";
  const std::string corrupt = tmp_->file("ds-corrupt.json"), stage4 = tmp_->file("ds4.json"),
                    nvme = tmp_->file("ds-nvme.json"), missing = tmp_->file("ds-missing.json");
  base::write_file_atomic(corrupt, R"({"zero_optimization": {"stage": 2})");
  base::write_file_atomic(stage4, R"({"zero_optimization": {"stage": 4}})");
  base::write_file_atomic(
      nvme, R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme"}}})");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--deepspeed " + corrupt, "argument deepspeed: " + corrupt + " is not valid JSON: "},
      {"--deepspeed " + missing,
       "argument deepspeed: cannot open DeepSpeed config " + missing + ": "},
      {"--deepspeed " + stage4,
       "argument deepspeed: zero_optimization.stage 4 is not allowed (0, 1, 2 or 3)"},
      {"--deepspeed " + nvme,
       "argument deepspeed: zero_optimization.offload_param.device \"nvme\" is not allowed (cpu "
       "or none: offloading to NVMe is not built)"},
      {"--max_grad_norm 1 --deepspeed '{\"gradient_clipping\": 0.5}'",
       "argument deepspeed: gradient_clipping 0.5 differs from max_grad_norm 1.0 (give \"auto\" "
       "or the same value)"},
      {"--fsdp shard_grad_op --deepspeed '{\"gradient_clipping\": \"auto\"}'",
       "argument deepspeed: not with fsdp \"shard_grad_op\""},
  };
  for (const auto& [arguments, message] : cases) {
    const std::string out = tmp_->file("bad");
    auto r = run(testing::kTrainerBin + " train " + data + " --output_dir " + out + " " +
                 arguments + " 2>&1");
    EXPECT_EQ(r.exit_code, 2) << arguments << ": " << r.out;
    EXPECT_NE(r.out.find("trainer: error: " + message), std::string::npos) << r.out;
    EXPECT_EQ(testing::lines_of(r.out).size(), 1u) << r.out;
    EXPECT_FALSE(std::filesystem::exists(out)) << arguments;
  }
}

TEST_F(Sharding, BadArgumentsAreOneLineAndTouchNothing) {
  const std::string data = "--dataset_dir " + tmp_->file("data") + " --max_steps 1";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--fsdp bogus",
       "argument fsdp: bogus is not allowed (allowed: full_shard, shard_grad_op, shard_optimizer, "
       "no_shard, auto_wrap, offload; hybrid_shard needs several nodes' groups, not built)"},
      {"--fsdp 'full_shard shard_grad_op'",
       "argument fsdp: full_shard and shard_grad_op are two strategies; choose one"},
      {"--fsdp auto_wrap",
       "argument fsdp: \"auto_wrap\" names no strategy (add full_shard, shard_grad_op or "
       "shard_optimizer)"},
      {"--fsdp_config '{\"min_num_params\":10}'",
       "argument fsdp_config: used only with fsdp (full_shard, shard_grad_op or shard_optimizer)"},
      {"--fsdp full_shard --fsdp_config '{\"wrap\":1}'", "argument fsdp_config: wrap is not a key"},
      {"--fsdp full_shard --fsdp_config '{\"min_num_params\":-1}'",
       "argument fsdp_config: min_num_params -1 is not allowed (an integer >= 0)"},
      {"--fsdp full_shard --fsdp_config '{\"state_dict_type\":\"LOCAL\"}'",
       "argument fsdp_config: state_dict_type \"LOCAL\" is not allowed (FULL_STATE_DICT or "
       "SHARDED_STATE_DICT)"},
      {"--fsdp full_shard --fsdp_config '{\"min_num_params\":100}'",
       "argument fsdp_config: min_num_params chooses auto_wrap's units; add auto_wrap to fsdp "
       "(\"full_shard auto_wrap\")"},
      {"--fsdp 'full_shard auto_wrap' --fsdp_config "
       "'{\"min_num_params\":100,\"transformer_layer_cls_to_wrap\":\"Block\"}'",
       "argument fsdp_config: min_num_params and transformer_layer_cls_to_wrap are mutually "
       "exclusive; give one"},
      {"--fsdp shard_grad_op --fp16 true", "argument fp16: true is not allowed (fsdp shards the"},
      {"--fsdp 'full_shard auto_wrap' --fsdp_config "
       "'{\"transformer_layer_cls_to_wrap\":\"LlamaDecoderLayer\"}'",
       "argument fsdp_config: transformer_layer_cls_to_wrap LlamaDecoderLayer is not a layer of "
       "this model (it has no blocks to wrap; without it the model is one unit)"},
  };
  for (const auto& [arguments, message] : cases) {
    const std::string out = tmp_->file("bad");
    auto r = run(testing::kTrainerBin + " train " + data + " --output_dir " + out + " " +
                 arguments + " 2>&1");
    EXPECT_EQ(r.exit_code, 2) << arguments << ": " << r.out;
    EXPECT_NE(r.out.find("trainer: error: " + message), std::string::npos) << r.out;
    EXPECT_EQ(testing::lines_of(r.out).size(), 1u) << r.out;
    EXPECT_FALSE(std::filesystem::exists(out)) << arguments;
  }
  // The gpt's blocks are named in the error.
  auto r = run(testing::kTrainerBin +
               " train --model_name gpt --dataset_name text --dataset_config "
               "'{\"context_length\":16,\"path\":\"" +
               kCorpus + "\"}' --max_steps 1 --output_dir " + tmp_->file("bad") +
               " --fsdp 'full_shard auto_wrap' --fsdp_config "
               "'{\"transformer_layer_cls_to_wrap\":\"GPT2Block, LlamaDecoderLayer\"}' 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("transformer_layer_cls_to_wrap GPT2Block is not a layer of this model (its "
                       "blocks are Block)"),
            std::string::npos)
      << r.out;
}

}  // namespace sharding_test
}  // namespace trainer
