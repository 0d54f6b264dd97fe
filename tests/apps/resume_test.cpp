// Checkpoints against real faults, through the real programs: kill -9 at random moments (some
// inside a save), SIGTERM mid-epoch, each optimizer's state, damaged checkpoints, a rank killed
// under `trainer launch --max-restarts 1`, and a resume at another world size that sees every
// example once.
#include <algorithm>
#include <cmath>
#include <csignal>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/base/files.h"
#include "tests/test_util.h"
#include "trainer/checkpoint_manifest.h"

namespace trainer {
namespace resume_test {

using testing::run;
using testing::slurp;
using testing::TempDir;

// 160 random training images: 10 steps of 16 in each of 2 epochs, a checkpoint every 2.
class Resume : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir();
    testing::write_mnist_dir(tmp_->file("data"), 160, 32, false);
  }
  static void TearDownTestSuite() { delete tmp_; }

  static std::vector<std::string> train_argv(const std::string& out) {
    return testing::train_argv(
        tmp_->file("data"), out,
        {"--per_device_train_batch_size", "16", "--num_train_epochs", "2", "--save_steps", "2",
         "--logging_steps", "3", "--learning_rate", "1e-3", "--disable_tqdm", "true"});
  }
  // train_argv with `name`'s value replaced.
  static std::vector<std::string> with(std::vector<std::string> argv, const std::string& name,
                                       const std::string& value) {
    for (size_t i = 0; i + 1 < argv.size(); ++i) {
      if (argv[i] == name) argv[i + 1] = value;
    }
    return argv;
  }
  static std::string train_command(const std::string& out, const std::string& extra = "") {
    return testing::command_line(train_argv(out)) + extra;
  }
  // The uninterrupted run's model.safetensors, trained once per test.
  static std::string baseline() {
    std::string out = tmp_->file("baseline");
    if (!std::filesystem::exists(out + "/model.safetensors")) {
      auto result = run(train_command(out));
      EXPECT_EQ(result.exit_code, 0) << result.err;
    }
    return slurp(out + "/model.safetensors");
  }
  static bool has_staging_folder(const std::string& dir) {
    for (const auto& name : base::list_directory(dir)) {
      if (name.rfind(".tmp-checkpoint-", 0) == 0) return true;
    }
    return false;
  }
  static int wait_for(int pid) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    return status;
  }

  static TempDir* tmp_;
};
TempDir* Resume::tmp_ = nullptr;

TEST_F(Resume, KillNineAtRandomMomentsThenResumingEndsByteIdenticalToTheUninterruptedRun) {
  const std::string expected = baseline();
  ASSERT_FALSE(expected.empty());
  std::mt19937 random(20261130);
  int inside_save = 0, resumed = 0;
  const int kTrials = 10;
  for (int trial = 0; trial < kTrials; ++trial) {
    std::string out = tmp_->file("kill" + std::to_string(trial));
    std::string log = out + ".log";
    int pid = testing::start(train_argv(out), log, log + ".err");
    ASSERT_GT(pid, 0);
    if (trial % 2 == 0) {
      // Inside a save: the moment the staging folder of a randomly chosen step appears.
      std::string staging = out + "/.tmp-checkpoint-" + std::to_string(2 + 2 * (random() % 9));
      double deadline = testing::now_seconds() + 60;
      while (!std::filesystem::exists(staging) && testing::now_seconds() < deadline) {
        ::usleep(200);
      }
    } else {
      // At a random moment after the first checkpoint (possibly after the run ended).
      double deadline = testing::now_seconds() + 60;
      while (!std::filesystem::exists(out + "/checkpoint-2") && testing::now_seconds() < deadline) {
        ::usleep(1000);
      }
      ::usleep(random() % 1000000);
    }
    ::kill(pid, SIGKILL);
    wait_for(pid);
    if (has_staging_folder(out)) ++inside_save;
    // Resume from the newest good checkpoint, or start over where none was saved yet.
    bool any = !list_checkpoints(out).empty();
    resumed += any;
    auto result = run(
        train_command(out, any ? "--resume_from_checkpoint true" : "--overwrite_output_dir true"));
    ASSERT_EQ(result.exit_code, 0) << "trial " << trial << ": " << result.err;
    EXPECT_EQ(result.err, "") << "trial " << trial;
    EXPECT_TRUE(slurp(out + "/model.safetensors") == expected)
        << "trial " << trial << " ended with other weights";
    EXPECT_FALSE(has_staging_folder(out)) << "trial " << trial;
    for (const auto& checkpoint : list_checkpoints(out)) {
      EXPECT_NO_THROW(verify_checkpoint(checkpoint.path)) << checkpoint.path;
    }
  }
  // Half the trials were killed inside a save, leaving its staging folder behind; the other half
  // had a checkpoint to resume from.
  EXPECT_GE(inside_save, kTrials / 2 - 1);
  EXPECT_GE(resumed, kTrials / 2);
  std::printf("kill -9 trials: %d, inside a save: %d, resumed: %d\n", kTrials, inside_save,
              resumed);
}

TEST_F(Resume, SigtermMidEpochSavesAtTheNextStepBoundaryAndResumingEqualsTheUninterruptedRun) {
  const std::string expected = baseline();
  std::string out = tmp_->file("sigterm");
  std::string log = out + ".log";
  auto argv = with(with(train_argv(out), "--save_steps", "1000"), "--logging_steps", "1");
  int pid = testing::start(argv, log, log + ".err");
  ASSERT_GT(pid, 0);
  double deadline = testing::now_seconds() + 60;
  while (slurp(log).find("'epoch': 0.3") == std::string::npos &&
         testing::now_seconds() < deadline) {
    ::usleep(1000);
  }
  ::kill(pid, SIGTERM);
  int status = wait_for(pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 143);
  std::smatch match;
  std::string err = slurp(log + ".err");
  ASSERT_TRUE(std::regex_match(err, match,
                               std::regex("trainer: interrupted by SIGTERM at step ([0-9]+) of 20; "
                                          "saved (.*) \\(resume with --resume_from_checkpoint "
                                          "true\\)\n")))
      << err;
  int step = std::stoi(match[1].str());
  EXPECT_EQ(match[2].str(), out + "/checkpoint-" + std::to_string(step));
  EXPECT_GE(step, 3);
  EXPECT_LT(step, 20);
  EXPECT_NE(step, 10);  // mid-epoch
  auto checkpoints = list_checkpoints(out);
  ASSERT_EQ(checkpoints.size(), 1u);
  EXPECT_NO_THROW(verify_checkpoint(checkpoints[0].path));
  // Nothing but the checkpoint was written: the run's results come when it ends.
  EXPECT_FALSE(std::filesystem::exists(out + "/model.safetensors"));

  auto result = run(testing::command_line(with(train_argv(out), "--save_steps", "1000")) +
                    "--resume_from_checkpoint true");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("Continuing training from checkpoint " + match[2].str() +
                            " (global step " + std::to_string(step)),
            std::string::npos)
      << result.out;
  EXPECT_TRUE(slurp(out + "/model.safetensors") == expected);
}

// Each optimizer's state and options go through optimizer.pt: resumed from the checkpoint of step
// 12 (inside the second epoch), a run ends with the uninterrupted run's model.safetensors, byte
// for byte. A checkpoint resumes only under its own optimizer.
TEST_F(Resume, WithEachOptimizerResumingEndsByteIdenticalToTheUninterruptedRun) {
  // An MLP (a second a run), with weight decay on its weights and not on its biases.
  const std::string kMlp = "--model_name mlp --model_config '{\"hidden_sizes\": [32]}' ";
  const std::vector<std::pair<std::string, std::string>> optimizers = {
      {"sgd", "momentum=0.9,nesterov=true"},
      {"adagrad", "lr_decay=0.01"},
      {"rmsprop", "centered=true,momentum=0.5"},
      {"adafactor", ""}};
  for (const auto& [optim, optim_args] : optimizers) {
    SCOPED_TRACE(optim);
    const std::string chosen = kMlp + "--weight_decay 0.01 --optim " + optim +
                               (optim_args.empty() ? "" : " --optim_args " + optim_args);
    const std::string full = tmp_->file("optim_" + optim);
    auto result = run(train_command(full, chosen));
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const std::string expected = slurp(full + "/model.safetensors");
    ASSERT_FALSE(expected.empty());

    const std::string part = tmp_->file("optim_" + optim + "_part");
    ASSERT_EQ(run("mkdir " + part + " && cp -R " + full + "/checkpoint-12 " + part).exit_code, 0);
    result = run(train_command(part, chosen + " --resume_from_checkpoint true"));
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_NE(result.out.find("Continuing training from checkpoint " + part + "/checkpoint-12"),
              std::string::npos)
        << result.out;
    EXPECT_TRUE(slurp(part + "/model.safetensors") == expected);
  }
  // SGD's checkpoint under Adagrad, and AdamW's (the baseline's) under Adafactor: refused before
  // anything loads.
  const std::string sgd = tmp_->file("optim_sgd_part");
  auto refused = run(train_command(sgd, kMlp + "--optim adagrad --resume_from_checkpoint true"));
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_EQ(refused.err, "trainer: error: checkpoint " + sgd +
                             "/checkpoint-20 was trained with optim sgd; this run has adagrad: "
                             "resume with optim sgd (its optimizer state is sgd's), or start a "
                             "new run\n");
  baseline();
  const std::string adamw = tmp_->file("baseline");
  refused = run(train_command(adamw, "--optim adafactor --resume_from_checkpoint true"));
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_EQ(refused.err, "trainer: error: checkpoint " + adamw +
                             "/checkpoint-20 was trained with optim adamw_torch_fused; this run "
                             "has adafactor: resume with optim adamw_torch_fused (its optimizer "
                             "state is adamw_torch_fused's), or start a new run\n");
}

TEST_F(Resume, ReduceLrOnPlateauCutsAfterPatienceEvaluationsAndItsStateSurvivesAResume) {
  // An evaluation every 2 steps; with threshold 0.5 (rel, mode min) only an eval_loss below half
  // the best counts as better, so after the first evaluation (step 2) none does: with patience 1
  // the rate is cut tenfold at the second bad evaluation, then (the count restarting) at every
  // second one after: steps 6, 10, 14, 18.
  const std::string plateau =
      "--model_name mlp --model_config '{\"hidden_sizes\": [32]}' "
      "--eval_strategy steps --eval_steps 2 --lr_scheduler_type reduce_lr_on_plateau "
      "--lr_scheduler_kwargs '{\"patience\": 1, \"threshold\": 0.5}'";
  const std::string full = tmp_->file("plateau");
  // Logged every step.
  auto command = [&](const std::string& out) {
    return testing::command_line(with(train_argv(out), "--logging_steps", "1")) + " " + plateau;
  };
  auto result = run(command(full));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  auto learning_rates = [](const std::string& dir) {
    std::map<int64_t, double> lrs;
    const auto state = nlohmann::json::parse(slurp(dir + "/trainer_state.json"));
    for (const auto& entry : state["log_history"]) {
      if (entry.contains("learning_rate")) lrs[entry["step"]] = entry["learning_rate"];
    }
    return lrs;
  };
  const std::map<int64_t, double> lrs = learning_rates(full);
  ASSERT_EQ(lrs.size(), 20u);
  for (const auto& [step, lr] : lrs) {
    // A step's log comes before its evaluation: the cut of step 6 shows from step 7.
    const int cuts = step > 18 ? 4 : step > 14 ? 3 : step > 10 ? 2 : step > 6 ? 1 : 0;
    EXPECT_NEAR(lr, 1e-3 * std::pow(0.1, cuts), 1e-3 * std::pow(0.1, cuts) * 1e-9)
        << "step " << step;
  }
  const auto scheduler = nlohmann::json::parse(slurp(full + "/checkpoint-8/scheduler.json"));
  EXPECT_EQ(scheduler["reduce_lr_on_plateau"]["num_bad_epochs"], 1) << scheduler.dump();
  EXPECT_EQ(scheduler["reduce_lr_on_plateau"]["last_epoch"], 4) << scheduler.dump();

  // From step 8 (one bad evaluation counted): the cut comes at step 10 again, and the run ends
  // byte-identical. Counting afresh would cut at 12 instead.
  const std::string part = tmp_->file("plateau_part");
  ASSERT_EQ(run("mkdir " + part + " && cp -R " + full + "/checkpoint-8 " + part).exit_code, 0);
  result = run(command(part) + " --resume_from_checkpoint true");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(slurp(part + "/model.safetensors") == slurp(full + "/model.safetensors"));
  const std::map<int64_t, double> resumed = learning_rates(part);
  for (const auto& [step, lr] : resumed) EXPECT_EQ(lr, lrs.at(step)) << "step " << step;
  EXPECT_EQ(resumed.size(), 20u);
}

// Damage done to the newest of two checkpoints, and the line it must produce.
struct Damage {
  std::string name;
  std::string command;  // run in the checkpoint folder
  std::string detail;   // what the message says after "is damaged: "
};

TEST_F(Resume, ADamagedNewestCheckpointFallsBackWithOneWarningAndAnExplicitOneIsAnError) {
  std::string base = tmp_->file("damage_base");
  auto first = run(train_command(base, "--max_steps 4"));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::string expected = slurp(base + "/model.safetensors");
  const std::vector<Damage> damages = {
      {"truncated weights", "truncate -s 1000 model.safetensors",
       "model.safetensors is 1000 bytes, its manifest says 4800168"},
      {"missing optimizer", "rm optimizer.pt", "optimizer.pt is missing"},
      {"flipped byte",
       "printf '\\377' | dd of=optimizer.pt bs=1 seek=5000000 conv=notrunc status=none",
       "optimizer.pt has CRC-32 "},
      {"manifest that lies", "sed -i '0,/\"size\": [0-9]*/s//\"size\": 123/' manifest.json",
       "model.safetensors is 4800168 bytes, its manifest says 123"},
      {"no manifest", "rm manifest.json", "it has no manifest.json (not a complete checkpoint)"},
  };
  for (const Damage& damage : damages) {
    std::string out = tmp_->file("damage_" + std::to_string(&damage - damages.data()));
    std::string newest = out + "/checkpoint-4";
    ASSERT_EQ(
        run("cp -R " + base + " " + out + " && cd " + newest + " && " + damage.command).exit_code,
        0)
        << damage.name;
    // An explicit path: exit 2, one line naming the file.
    auto explicit_run = run(train_command(out, "--max_steps 4 --resume_from_checkpoint " + newest));
    EXPECT_EQ(explicit_run.exit_code, 2) << damage.name;
    EXPECT_EQ(explicit_run.err.rfind(
                  "trainer: error: checkpoint " + newest + " is damaged: " + damage.detail, 0),
              0u)
        << damage.name << ": " << explicit_run.err;
    EXPECT_EQ(std::count(explicit_run.err.begin(), explicit_run.err.end(), '\n'), 1) << damage.name;
    // true: the previous good checkpoint, with one warning line.
    auto fallback = run(train_command(out, "--max_steps 4 --resume_from_checkpoint true"));
    EXPECT_EQ(fallback.exit_code, 0) << damage.name << ": " << fallback.err;
    EXPECT_EQ(fallback.err.rfind(
                  "trainer: warning: checkpoint " + newest + " is damaged: " + damage.detail, 0),
              0u)
        << damage.name << ": " << fallback.err;
    EXPECT_NE(fallback.err.find("; resuming from " + out + "/checkpoint-2 instead\n"),
              std::string::npos)
        << fallback.err;
    EXPECT_EQ(std::count(fallback.err.begin(), fallback.err.end(), '\n'), 1) << damage.name;
    EXPECT_TRUE(slurp(out + "/model.safetensors") == expected) << damage.name;
    EXPECT_NO_THROW(verify_checkpoint(newest)) << "the damaged one was saved again";
  }
  // No good checkpoint at all: exit 2.
  std::string none = tmp_->file("damage_none");
  ASSERT_EQ(run("cp -R " + base + " " + none + " && rm " + none + "/checkpoint-*/manifest.json")
                .exit_code,
            0);
  auto result = run(train_command(none, "--max_steps 4 --resume_from_checkpoint true"));
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.err.rfind(
                "trainer: error: resume_from_checkpoint true: no good checkpoint in " + none, 0),
            0u)
      << result.err;
  // Another model_config whose tensors have the same shapes (basic_net unfused), or other data:
  // refused, naming the key, and nothing changes.
  const auto before = slurp(base + "/model.safetensors");
  const std::vector<std::pair<std::string, std::string>> changes = {
      {R"( --model_config '{"fused": false}')",
       "was trained with model_config {}; this run has {\"fused\":false}: resume with the same "
       "model_config (a run's model and data cannot change midway), or start a new run\n"},
      {" --max_train_samples 150",
       "was trained with max_train_samples null; this run has 150: resume with the same "
       "max_train_samples"},
  };
  for (const auto& [change, detail] : changes) {
    auto changed = run(train_command(base, "--max_steps 4 --resume_from_checkpoint true" + change));
    EXPECT_EQ(changed.exit_code, 2) << changed.err;
    EXPECT_EQ(
        changed.err.rfind("trainer: error: checkpoint " + base + "/checkpoint-4 " + detail, 0), 0u)
        << changed.err;
    EXPECT_EQ(std::count(changed.err.begin(), changed.err.end(), '\n'), 1) << changed.err;
  }
  EXPECT_TRUE(slurp(base + "/model.safetensors") == before);
}

TEST_F(Resume, ARankKilledUnderLaunchWithMaxRestartsIsRestartedAndTheRunEndsAsIfNothingFailed) {
  auto two_ranks = [&](const std::string& out) {
    std::vector<std::string> argv = {testing::kTrainerBin, "launch",
                                     "--nproc-per-node",   "2",
                                     "--master-port",      std::to_string(testing::free_port()),
                                     "--max-restarts",     "1"};
    // 2 ranks x 8: the same total batch.
    auto train = with(train_argv(out), "--per_device_train_batch_size", "8");
    argv.insert(argv.end(), train.begin(), train.end());
    return argv;
  };
  std::string base = tmp_->file("ranks_base");
  auto uninterrupted = run(testing::command_line(two_ranks(base)));
  ASSERT_EQ(uninterrupted.exit_code, 0) << uninterrupted.err;

  std::string out = tmp_->file("ranks");
  int launcher = testing::start(two_ranks(out), out + ".log", out + ".err");
  ASSERT_GT(launcher, 0);
  double deadline = testing::now_seconds() + 60;
  while (!std::filesystem::exists(out + "/checkpoint-6") && testing::now_seconds() < deadline) {
    ::usleep(1000);
  }
  // Rank 1: the launcher's child whose environment says RANK=1.
  int victim = -1;
  std::istringstream children(slurp("/proc/" + std::to_string(launcher) + "/task/" +
                                    std::to_string(launcher) + "/children"));
  for (int child; children >> child;) {
    std::istringstream variables(slurp("/proc/" + std::to_string(child) + "/environ"));
    for (std::string variable; std::getline(variables, variable, '\0');) {
      if (variable == "RANK=1") victim = child;
    }
  }
  ASSERT_GT(victim, 0);
  ::kill(victim, SIGKILL);
  int status = wait_for(launcher);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << slurp(out + ".err");
  std::string err = slurp(out + ".err");
  EXPECT_TRUE(
      std::regex_search(err, std::regex("trainer launch: rank 1 \\(local rank 1, pid [0-9]+\\) "
                                        "was killed by signal 9 \\(SIGKILL\\); restarting "
                                        "every rank \\(restart 1 of 1\\)\n")))
      << err;
  // The restarted ranks resumed from a checkpoint by themselves.
  EXPECT_NE(slurp(out + ".log")
                .find("[rank0]:   Continuing training from checkpoint " + out + "/checkpoint-"),
            std::string::npos)
      << slurp(out + ".log");
  EXPECT_TRUE(slurp(out + "/model.safetensors") == slurp(base + "/model.safetensors"));
}

TEST_F(Resume, SigtermToTheLauncherSavesOneCheckpointFromEveryRankAtTheSameStep) {
  std::string out = tmp_->file("launch_sigterm");
  std::vector<std::string> argv = {testing::kTrainerBin, "launch",
                                   "--nproc-per-node",   "2",
                                   "--master-port",      std::to_string(testing::free_port())};
  auto train =
      with(with(train_argv(out), "--per_device_train_batch_size", "8"), "--save_steps", "1000");
  argv.insert(argv.end(), train.begin(), train.end());
  argv.insert(argv.end(), {"--logging_steps", "1"});
  argv.erase(std::find(argv.begin() + 6, argv.end(), "--logging_steps") + 1);
  argv.erase(std::find(argv.begin() + 6, argv.end(), "--logging_steps"));
  int launcher = testing::start(argv, out + ".log", out + ".err");
  ASSERT_GT(launcher, 0);
  double deadline = testing::now_seconds() + 60;
  while (slurp(out + ".log").find("'epoch': 0.3") == std::string::npos &&
         testing::now_seconds() < deadline) {
    ::usleep(1000);
  }
  ::kill(launcher, SIGTERM);
  int status = wait_for(launcher);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 143);
  // Both ranks stopped at the same step boundary and say where the one checkpoint is.
  std::string err = slurp(out + ".err");
  std::smatch match;
  ASSERT_TRUE(std::regex_search(err, match,
                                std::regex("\\[rank0\\]: trainer: interrupted by SIGTERM at step "
                                           "([0-9]+) of 20; saved ([^ ]+) ")))
      << err;
  EXPECT_NE(err.find("[rank1]: trainer: interrupted by SIGTERM at step " + match[1].str() +
                     " of 20; saved " + match[2].str()),
            std::string::npos)
      << err;
  auto checkpoints = list_checkpoints(out);
  ASSERT_EQ(checkpoints.size(), 1u);
  Manifest manifest = verify_checkpoint(checkpoints[0].path);
  EXPECT_EQ(manifest.world_size, 2);
  EXPECT_TRUE(manifest.find("rank_state_1.safetensors"));
  // One process with the same total batch continues it.
  auto resumed = run(testing::command_line(with(train_argv(out), "--save_steps", "1000")) +
                     "--resume_from_checkpoint true");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(resumed.err, "");
}

// The examples each rank read, counted by index, from accelerate_worker's files.
std::map<int64_t, int> count_seen(const std::vector<std::string>& files) {
  std::map<int64_t, int> counts;
  for (const auto& file : files) {
    std::istringstream lines(slurp(file));
    for (int64_t index; lines >> index;) ++counts[index];
  }
  return counts;
}

TEST_F(Resume, AtAnotherWorldSizeWithTheSameTotalBatchEveryExampleIsSeenOnce) {
  TempDir dir;
  std::string out = dir.file("out");
  // One process x 64, stopped by SIGTERM raised at step 3 (the save comes at step 4's end).
  auto first = run(testing::kAccelerateWorkerBin + " resume-count --batch 64 --out " + out +
                   " --seen " + dir.file("first") + " --stop-at 3");
  EXPECT_EQ(first.exit_code, 143) << first.err;
  EXPECT_NE(first.err.find("interrupted by SIGTERM at step 4 of 8; saved " + out + "/checkpoint-4"),
            std::string::npos)
      << first.err;
  // Then two processes x 32, resumed.
  auto second = run(testing::launch("--nproc-per-node 2 " + testing::kAccelerateWorkerBin +
                                    " resume-count --batch 32 --resume --out " + out + " --seen " +
                                    dir.file("second")));
  ASSERT_EQ(second.exit_code, 0) << second.err;
  auto before = count_seen({dir.file("first.0")});
  auto after = count_seen({dir.file("second.0"), dir.file("second.1")});
  EXPECT_EQ(before.size(), 4u * 64);
  EXPECT_EQ(after.size(), 4u * 64);
  auto all = count_seen({dir.file("first.0"), dir.file("second.0"), dir.file("second.1")});
  ASSERT_EQ(all.size(), 512u);
  for (const auto& [index, count] : all) EXPECT_EQ(count, 1) << "example " << index;
}

}  // namespace resume_test
}  // namespace trainer
