// Several nodes for real, in network namespaces made by scripts/netns/nodes (each its own address
// in 192.0.2.0/24, joined through a bridge): 2 nodes x 2 ranks train to 1 node x 4's parameters,
// a lost node (its processes killed, or its link down) ends every other rank with one line naming
// it, and an elastic run loses a node, goes on with the same global batch on the other, takes the
// node back, and ends with the uninterrupted run's parameters, every example once per epoch.
// Skipped, with one line, where namespaces cannot be created (not root, no iproute2).
#include <algorithm>
#include <csignal>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "lib/base/text.h"
#include "lib/io/safetensors.h"
#include "tests/test_util.h"
#include "tests/torch_test_util.h"

namespace trainer {
namespace multinode_test {

using testing::relative_difference;
using testing::run;
using testing::slurp;
using testing::TempDir;

const std::string kNodes = std::string(SOURCE_DIR) + "/scripts/netns/nodes";

// A set of nodes for one test: created in SetUp, removed in TearDown (and by the script's own
// traps were the test killed while it runs a command inside).
class Multinode : public ::testing::Test {
 protected:
  void SetUp() override {
    auto check = run(kNodes + " check");
    if (check.exit_code != 0) GTEST_SKIP() << testing::lines_of(check.err).front();
    prefix_ = "trt" + std::to_string(::getpid() % 100000);
    auto up = run(kNodes + " up 2 " + prefix_);
    ASSERT_EQ(up.exit_code, 0) << up.err;
  }
  void TearDown() override {
    if (!prefix_.empty()) run(kNodes + " down " + prefix_);
  }
  // `command` inside node `i`'s namespace, as a shell command line.
  std::string on_node(int i, const std::string& command) const {
    return "ip netns exec " + prefix_ + "-node" + std::to_string(i) + " " + command;
  }
  // Starts `command` in node `i` (stdout and stderr to files), returns its pid.
  int start_on_node(int i, const std::string& command, const std::string& log) const {
    return testing::start({"/bin/sh", "-c", on_node(i, command)}, log, log + ".err");
  }
  // SIGKILL to every process inside node `i`.
  void kill_node(int i) const {
    run("kill -9 $(ip netns pids " + prefix_ + "-node" + std::to_string(i) + ") 2>/dev/null");
  }
  // A long run on both nodes (2 ranks each) at `port`, logging into `dir`: the launchers' pids,
  // once node 1's last rank has begun step 3 (node 1's pid -1 when it never does).
  std::pair<int, int> start_long_run(const TempDir& dir, int port) const;
  static int wait_exit(int pid) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  std::string prefix_;
};

// `trainer launch` of node `node` of 2 (2 ranks each) at 192.0.2.1, running `program`.
std::string launch_on(int node, int port, const std::string& program,
                      const std::string& extra = "") {
  return fmt::format(
      "{} launch --nnodes 2 --node-rank {} --nproc-per-node 2 --master-addr 192.0.2.1 "
      "--master-port {} --rdzv-timeout 30 {}{}",
      testing::kTrainerBin, node, port, extra, program);
}

std::pair<int, int> Multinode::start_long_run(const TempDir& dir, int port) const {
  const std::string program = testing::kAccelerateWorkerBin +
                              " elastic --epochs 50 --step-ms 100 --out " + dir.file("out") +
                              " --seen " + dir.file("seen");
  int node0 = start_on_node(0, launch_on(0, port, program), dir.file("node0"));
  int node1 = start_on_node(1, launch_on(1, port, program), dir.file("node1"));
  for (int i = 0; i < 600 && slurp(dir.file("seen.0.3")).find("step 3") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (slurp(dir.file("seen.0.3")).find("step 3") == std::string::npos) {
    kill_node(0);
    kill_node(1);
    wait_exit(node0);
    wait_exit(node1);
    return {node0, -1};
  }
  return {node0, node1};
}

TEST_F(Multinode, TwoNodesOfTwoRanksEndWithTheParametersOfOneNodeOfFour) {
  TempDir dir;
  testing::write_mnist_dir(dir.file("data"), 256, 32, false);
  auto train = [&](const std::string& out) {
    return testing::command_line(testing::train_argv(
        dir.file("data"), out,
        {"--per_device_train_batch_size", "8", "--num_train_epochs", "1", "--logging_steps", "2",
         "--save_steps", "4", "--disable_tqdm", "true", "--ddp_timeout", "30"}));
  };
  auto one = run(testing::launch("--nproc-per-node 4 " + train(dir.file("one"))));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  // Both nodes see the same folder: one set of outputs, written by global rank 0.
  const std::string out = dir.file("two");
  int node0 = start_on_node(0, launch_on(0, 29411, train(out)), dir.file("node0"));
  int node1 = start_on_node(1, launch_on(1, 29411, train(out)), dir.file("node1"));
  EXPECT_EQ(wait_exit(node0), 0) << slurp(dir.file("node0.err"));
  EXPECT_EQ(wait_exit(node1), 0) << slurp(dir.file("node1.err"));
  const double difference =
      relative_difference(dir.file("one") + "/model.safetensors", out + "/model.safetensors");
  std::printf("2 nodes x 2 ranks against 1 x 4: relative difference %.2e\n", difference);
  EXPECT_LT(difference, 1e-5);
  // Rank 0's tables on node 0; node 1's launcher forwarded nothing of rank 0.
  EXPECT_NE(slurp(dir.file("node0")).find("[rank0]: ***** Running training *****"),
            std::string::npos);
  EXPECT_EQ(slurp(dir.file("node1")).find("[rank0]"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(out + "/checkpoint-8/rank_state_3.safetensors"));
}

TEST_F(Multinode, ANodeKilledWholeEndsTheOtherNodesRanksWithOneLineNamingIt) {
  TempDir dir;
  auto [node0, node1] = start_long_run(dir, 29412);
  ASSERT_GT(node1, 0) << slurp(dir.file("node1.err"));
  const double killed = testing::now_seconds();
  kill_node(1);
  wait_exit(node1);
  const int status = wait_exit(node0);
  const double took = testing::now_seconds() - killed;
  const std::string err = slurp(dir.file("node0.err"));
  EXPECT_EQ(status, 1) << err;
  // The ranks' timeout is 30 s; the lost heartbeat is known after 6.
  EXPECT_LT(took, 20) << err;
  auto lines = testing::lines_of(err);
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines.back().find("trainer launch: node 1 (192.0.2.2) was lost: no heartbeat for"),
            std::string::npos)
      << err;
  EXPECT_NE(lines.back().find("stopping the other ranks"), std::string::npos) << err;
  std::printf("node 0 ended %.1f s after node 1 was killed: %s\n", took, lines.back().c_str());
}

TEST_F(Multinode, ALinkTakenDownEndsBothSidesWithinTheTimeoutWithOneLineEach) {
  TempDir dir;
  auto [node0, node1] = start_long_run(dir, 29413);
  ASSERT_GT(node1, 0) << slurp(dir.file("node1.err"));
  const double cut = testing::now_seconds();
  auto down = run("ip -n " + prefix_ + "-switch link set v1 down");
  ASSERT_EQ(down.exit_code, 0) << down.err;
  const int status0 = wait_exit(node0);
  const double took0 = testing::now_seconds() - cut;
  const int status1 = wait_exit(node1);
  const double took1 = testing::now_seconds() - cut;
  const std::string err0 = slurp(dir.file("node0.err")), err1 = slurp(dir.file("node1.err"));
  EXPECT_EQ(status0, 1) << err0;
  EXPECT_NE(status1, 0) << err1;
  // No reset comes over a link that is down: the heartbeat (6 s) and the store's timeout (10 s)
  // end it, well before the ranks' 30 s.
  EXPECT_LT(took0, 20) << err0;
  EXPECT_LT(took1, 25) << err1;
  auto last0 = testing::lines_of(err0).back(), last1 = testing::lines_of(err1).back();
  EXPECT_NE(last0.find("node 1 (192.0.2.2) was lost: no heartbeat for"), std::string::npos) << err0;
  EXPECT_NE(last1.find("the rendezvous at 192.0.2.1:29413 was lost"), std::string::npos) << err1;
  std::printf("link down: node 0 ended after %.1f s (%s), node 1 after %.1f s (%s)\n", took0,
              last0.c_str(), took1, last1.c_str());
}

TEST_F(Multinode, SaveOnEachNodeGivesEveryNodeItsOwnWholeCheckpointsAndResumesFromThem) {
  TempDir dir;
  testing::write_mnist_dir(dir.file("data"), 256, 32, false);
  auto train = [&](const std::string& out, int max_steps, bool resume) {
    return testing::command_line(testing::train_argv(
               dir.file("data"), out,
               {"--per_device_train_batch_size", "8", "--max_steps", std::to_string(max_steps),
                "--lr_scheduler_type", "constant", "--logging_steps", "2", "--save_steps", "2",
                "--disable_tqdm", "true", "--ddp_timeout", "30", "--save_on_each_node", "true"})) +
           (resume ? " --resume_from_checkpoint true" : "");
  };
  auto whole = run(testing::launch("--nproc-per-node 4 " + train(dir.file("whole"), 8, false)));
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  // Each node sees its own disk at the same path (a bind mount in its own mount namespace), as
  // machines without a shared file system do.
  const std::string out = dir.file("out");
  std::filesystem::create_directories(out);
  auto both = [&](int max_steps, bool resume, int port) {
    int pids[2];
    for (int node = 0; node < 2; ++node) {
      const std::string disk = dir.file("disk" + std::to_string(node));
      std::filesystem::create_directories(disk);
      pids[node] = start_on_node(node,
                                 "sh -c 'mount --bind " + disk + " " + out + " && exec " +
                                     launch_on(node, port, train(out, max_steps, resume)) + "'",
                                 dir.file(fmt::format("node{}-{}", node, max_steps)));
    }
    for (int node = 0; node < 2; ++node) {
      const std::string log = dir.file(fmt::format("node{}-{}", node, max_steps));
      EXPECT_EQ(wait_exit(pids[node]), 0) << slurp(log + ".err");
    }
  };
  both(4, false, 29415);
  for (int node = 0; node < 2; ++node) {
    const std::string disk = dir.file("disk" + std::to_string(node));
    for (int rank = 0; rank < 4; ++rank) {
      EXPECT_TRUE(std::filesystem::exists(
          fmt::format("{}/checkpoint-4/rank_state_{}.safetensors", disk, rank)))
          << "node " << node << " rank " << rank;
    }
    EXPECT_TRUE(std::filesystem::exists(disk + "/model.safetensors")) << "node " << node;
  }
  // The reports are the main process's: on node 0 only, as Transformers writes them.
  EXPECT_TRUE(std::filesystem::exists(dir.file("disk0") + "/trainer_state.json"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("disk1") + "/trainer_state.json"));
  // Node 1 lost its newest checkpoint: both nodes resume from the newest they share (step 2).
  std::filesystem::remove_all(dir.file("disk1") + "/checkpoint-4");
  both(8, true, 29416);
  const std::string err0 = slurp(dir.file("node0-8") + ".err");
  EXPECT_NE(
      slurp(dir.file("node0-8"))
          .find("Continuing training from checkpoint " + out + "/checkpoint-2 (global step 2"),
      std::string::npos)
      << slurp(dir.file("node0-8"));
  for (int node = 0; node < 2; ++node) {
    const std::string disk = dir.file("disk" + std::to_string(node));
    const double difference =
        relative_difference(dir.file("whole") + "/model.safetensors", disk + "/model.safetensors");
    std::printf("node %d's copy, resumed from step 2, against the uninterrupted run: %.2e\n", node,
                difference);
    // Not bit for bit: DDP's first step after a resume all-reduces in its initial buckets, the
    // uninterrupted run in the rebuilt ones, and 4 ranks' sums then round in another order.
    EXPECT_LT(difference, 1e-6) << err0;
  }
  EXPECT_TRUE(slurp(dir.file("disk0") + "/model.safetensors") ==
              slurp(dir.file("disk1") + "/model.safetensors"));
}

TEST_F(Multinode, GlooSocketIfnameNamesTheInterfaceAndAnUnknownOneEndsEveryNodeWithOneLine) {
  TempDir dir;
  testing::write_mnist_dir(dir.file("data"), 64, 16, false);
  auto train = [&](const std::string& out) {
    return testing::command_line(testing::train_argv(
        dir.file("data"), out,
        {"--per_device_train_batch_size", "8", "--max_steps", "2", "--save_strategy", "no",
         "--disable_tqdm", "true", "--ddp_timeout", "30"}));
  };
  auto both = [&](const std::string& interface1, int port, const std::string& out) {
    int pids[2];
    for (int node = 0; node < 2; ++node) {
      const std::string interface = node == 0 ? "eth0" : interface1;
      pids[node] = start_on_node(
          node, "env GLOO_SOCKET_IFNAME=" + interface + " " + launch_on(node, port, train(out)),
          dir.file(fmt::format("{}-node{}", port, node)));
    }
    return std::make_pair(wait_exit(pids[0]), wait_exit(pids[1]));
  };
  auto [ok0, ok1] = both("eth0", 29417, dir.file("out"));
  EXPECT_EQ(ok0, 0) << slurp(dir.file("29417-node0.err"));
  EXPECT_EQ(ok1, 0) << slurp(dir.file("29417-node1.err"));
  // Node 1's ranks refuse the interface (bad input: node 1 gives up), and node 0's launcher,
  // told so by the rendezvous, stops its ranks rather than letting them wait 30 s.
  const double start = testing::now_seconds();
  auto [bad0, bad1] = both("nosuch0", 29418, dir.file("bad"));
  const std::string err0 = slurp(dir.file("29418-node0.err")),
                    err1 = slurp(dir.file("29418-node1.err"));
  EXPECT_LT(testing::now_seconds() - start, 25);
  EXPECT_EQ(bad1, 2) << err1;
  EXPECT_NE(bad0, 0) << err0;
  // Either of node 1's ranks may fail first (the launcher then stops the other, which may not
  // have said anything yet): every launcher's last line names that rank and quotes its error.
  const std::vector<std::string> failed = testing::matches(
      testing::lines_of(err1).back(), R"(^trainer launch: rank (\d) \(local rank \d, pid \d+\))");
  ASSERT_EQ(failed.size(), 1u) << err1;
  const std::string rank = failed[0];
  EXPECT_TRUE(rank == "2" || rank == "3") << err1;
  const std::string error =
      "trainer: error: GLOO_SOCKET_IFNAME names interface nosuch0, which "
      "this machine does not have (rank " +
      rank + ")";
  EXPECT_NE(err1.find("[rank" + rank + "]: " + error + "\n"), std::string::npos) << err1;
  EXPECT_TRUE(base::ends_with(testing::lines_of(err1).back(),
                              " exited with code 2: " + error + "; stopping the other ranks"))
      << err1;
  const std::string last0 = testing::lines_of(err0).back();
  EXPECT_EQ(last0.rfind("trainer launch: node 1 (192.0.2.2): rank " + rank + " (", 0), 0u) << err0;
  EXPECT_TRUE(base::ends_with(last0, " exited with code 2: " + error + "; stopped every rank"))
      << err0;
}

// What a seen file of the elastic worker holds: the examples read for each step.
using StepExamples = std::map<int64_t, std::vector<int64_t>>;
StepExamples read_steps(const std::string& path) {
  StepExamples steps;
  int64_t step = -1;
  for (const std::string& line : testing::lines_of(slurp(path))) {
    if (line.rfind("step ", 0) == 0) {
      step = std::stoll(line.substr(5));
      steps[step].clear();  // a step begun again (it never ended before) starts over
    } else if (!line.empty() && step >= 0) {
      steps[step].push_back(std::stoll(line));
    }
  }
  return steps;
}

TEST_F(Multinode, AnElasticRunLosesANodeGoesOnWithTheSameBatchTakesItBackAndEndsAsUninterrupted) {
  TempDir dir;
  // 512 examples, a global batch of 32 (4 ranks x 8): 16 steps an epoch, 3 epochs.
  auto program = [&](const std::string& out, const std::string& seen) {
    return testing::kAccelerateWorkerBin + " elastic --epochs 3 --save-steps 2 --step-ms 120 " +
           "--out " + out + " --seen " + seen;
  };
  auto whole = run(
      testing::launch("--nproc-per-node 4 " + program(dir.file("whole"), dir.file("whole-seen"))));
  ASSERT_EQ(whole.exit_code, 0) << whole.err;

  const std::string out = dir.file("out"), seen = dir.file("seen");
  const std::string elastic = "--max-restarts 3 --rdzv-last-call 2 ";
  auto node_launch = [&](int node) {
    return fmt::format(
        "{} launch --nnodes 1:2 --nproc-per-node 2 --master-addr 192.0.2.1 --master-port 29414 "
        "--rdzv-timeout 30 {}{}",
        testing::kTrainerBin, elastic, program(out, seen));
  };
  int node0 = start_on_node(0, node_launch(0), dir.file("node0"));
  int node1 = start_on_node(1, node_launch(1), dir.file("node1"));
  // Node 1 (192.0.2.2) is killed at a random step of the first epoch (rank 3's steps: all four
  // ranks step together, whichever node holds rank 3).
  std::mt19937 random(std::random_device{}());
  const int kill_step = std::uniform_int_distribution<int>(3, 12)(random);
  const std::string marker = "step " + std::to_string(kill_step) + "\n";
  for (int i = 0; i < 1200; ++i) {
    if (slurp(seen + ".0.3").find(marker) != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_NE(slurp(seen + ".0.3").find(marker), std::string::npos) << slurp(dir.file("node1.err"));
  kill_node(1);
  wait_exit(node1);
  // Node 0 goes on alone (round 1, 2 ranks); once it has made 3 steps, node 1 comes back.
  for (int i = 0; i < 1500 && read_steps(seen + ".1.0").size() < 4; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_GE(read_steps(seen + ".1.0").size(), 4u) << slurp(dir.file("node0.err"));
  node1 = start_on_node(1, node_launch(1), dir.file("node1b"));
  const int status0 = wait_exit(node0), status1 = wait_exit(node1);
  const std::string err0 = slurp(dir.file("node0.err"));
  ASSERT_EQ(status0, 0) << err0;
  ASSERT_EQ(status1, 0) << slurp(dir.file("node1b.err"));
  // Round 0's node ranks go by arrival too: the killed node (192.0.2.2) was node 1 or node 0.
  EXPECT_TRUE(err0.find("node 1 (192.0.2.2) was lost: no heartbeat for") != std::string::npos ||
              err0.find("node 0 (192.0.2.2) was lost: no heartbeat for") != std::string::npos)
      << err0;
  EXPECT_NE(err0.find("round 1: 1 node (192.0.2.1), world size 2"), std::string::npos) << err0;
  EXPECT_NE(err0.find("a node (192.0.2.2) waits to join"), std::string::npos) << err0;
  // Round 2's node ranks go by arrival at the rendezvous (as in torch elastic's c10d
  // rendezvous): node 0 stops its ranks and moves the round on while node 1 already waits, so
  // either may come first.
  EXPECT_TRUE(
      err0.find("round 2: 2 nodes (192.0.2.1, 192.0.2.2), world size 4") != std::string::npos ||
      err0.find("round 2: 2 nodes (192.0.2.2, 192.0.2.1), world size 4") != std::string::npos)
      << err0;
  EXPECT_NE(slurp(dir.file("node0"))
                .find("Elastic run on 2 processes: gradient_accumulation_steps 1 -> 2"),
            std::string::npos);

  const double difference =
      relative_difference(dir.file("whole") + "/model.safetensors", out + "/model.safetensors");
  std::printf(
      "elastic run (node 1 killed at step %d, back in round 2) against the uninterrupted "
      "run: relative difference %.2e\n",
      kill_step, difference);
  // The worker's model is float64: only the order of the sums differs (4 ranks x 1 micro-batch
  // against 2 x 2).
  EXPECT_LT(difference, 1e-12);

  // The examples behind each step: the last round that ran the step says (a step redone after
  // a resume replaces what a killed round read for it).
  std::map<int64_t, std::pair<int, std::vector<int64_t>>> final_steps;  // step -> (round, ids)
  for (int round = 0; round < 3; ++round) {
    std::map<int64_t, std::vector<int64_t>> in_round;
    for (int rank = 0; rank < 4; ++rank) {
      for (auto& [step, ids] : read_steps(fmt::format("{}.{}.{}", seen, round, rank)))
        in_round[step].insert(in_round[step].end(), ids.begin(), ids.end());
    }
    for (auto& [step, ids] : in_round) final_steps[step] = {round, ids};
  }
  ASSERT_EQ(final_steps.size(), 48u);
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::map<int64_t, int> count;
    for (int64_t step = epoch * 16 + 1; step <= (epoch + 1) * 16; ++step) {
      EXPECT_EQ(final_steps[step].second.size(), 32u) << "step " << step;
      for (int64_t id : final_steps[step].second) ++count[id];
    }
    EXPECT_EQ(count.size(), 512u) << "epoch " << epoch;
    for (const auto& [id, n] : count) EXPECT_EQ(n, 1) << "epoch " << epoch << " example " << id;
  }
  std::set<int> rounds;
  for (const auto& [step, entry] : final_steps) rounds.insert(entry.first);
  EXPECT_EQ(rounds, (std::set<int>{0, 1, 2}));
}

}  // namespace multinode_test
}  // namespace trainer
