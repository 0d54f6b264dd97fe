// trainer launch: torchrun's environment, prefixed output, a failing or killed rank stopping the
// run within seconds with no process left, --max-restarts starting every rank again (not after
// bad input), signals reaching every rank, and bad options (busy port, counts that do not add
// up, unreachable master, a bad restart count) as one line with exit code 2.
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include <sys/wait.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "lib/base/text.h"
#include "tests/test_util.h"

namespace trainer {
namespace launcher_test {

using testing::launch;
using testing::run;
using testing::TempDir;

const std::string& kTrainer = testing::kTrainerBin;
const std::string& kWorker = testing::kWorkerBin;

using testing::alive;

TEST(Launcher, GivesEachRankTorchrunsEnvironmentAndPrefixesItsLines) {
  auto result = run("env -u OMP_NUM_THREADS " +
                    launch("--nproc-per-node 2 sh -c 'echo $RANK $LOCAL_RANK $WORLD_SIZE "
                           "$LOCAL_WORLD_SIZE $MASTER_ADDR $OMP_NUM_THREADS; echo err$RANK >&2'"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  long cores = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
  std::string threads = std::to_string(std::max(1L, cores / 2));
  EXPECT_NE(result.out.find("[rank0]: 0 0 2 2 127.0.0.1 " + threads + "\n"), std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("[rank1]: 1 1 2 2 127.0.0.1 " + threads + "\n"), std::string::npos)
      << result.out;
  EXPECT_NE(result.err.find("[rank1]: err1\n"), std::string::npos) << result.err;
}

TEST(Launcher, Rank0OnlyHidesTheOtherRanksOutput) {
  auto result = run(launch("--nproc-per-node 2 --rank0-only sh -c 'echo out$RANK'"));
  ASSERT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.out, "[rank0]: out0\n");
}

TEST(Launcher, NodeShareOfTheWorld) {
  // Node 1 of 2 with 2 ranks each: global ranks 2 and 3 of 4, once node 0's launcher (hosting the
  // rendezvous) has taken it in.
  TempDir dir;
  const std::string port = std::to_string(testing::free_port());
  const std::string ranks = " sh -c 'echo $RANK $WORLD_SIZE $GROUP_RANK'";
  int node0 = testing::start({"/bin/sh", "-c",
                              kTrainer + " launch --nnodes 2 --node-rank 0 --nproc-per-node 2 " +
                                  "--master-port " + port + ranks},
                             dir.file("node0"), dir.file("node0.err"));
  auto result =
      run(kTrainer + " launch --nnodes 2 --node-rank 1 --nproc-per-node 2 --master-port " + port +
          ranks);
  int status = 0;
  ::waitpid(node0, &status, 0);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(status, 0) << testing::slurp(dir.file("node0.err"));
  EXPECT_NE(result.out.find("[rank2]: 2 4 1\n"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("[rank3]: 3 4 1\n"), std::string::npos) << result.out;
  EXPECT_NE(testing::slurp(dir.file("node0")).find("[rank0]: 0 4 0\n"), std::string::npos);
}

TEST(Launcher, ElasticNodesTakeTheirPlacesFromTheRendezvous) {
  // Two elastic launchers on this machine: the first to bind the port hosts the rendezvous; both
  // join one round of 2 nodes.
  TempDir dir;
  const std::string port = std::to_string(testing::free_port());
  const std::string node =
      kTrainer + " launch --nnodes 1:2 --nproc-per-node 1 --rdzv-last-call 30 " + "--master-port " +
      port + " sh -c 'echo $RANK $WORLD_SIZE $TRAINER_ELASTIC_WORLD_SIZE'";
  int first = testing::start({"/bin/sh", "-c", node}, dir.file("a"), dir.file("a.err"));
  auto second = run(node);
  int status = 0;
  ::waitpid(first, &status, 0);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(status, 0) << testing::slurp(dir.file("a.err"));
  const std::string both = testing::slurp(dir.file("a")) + second.out;
  EXPECT_NE(both.find("[rank0]: 0 2 2\n"), std::string::npos) << both;
  EXPECT_NE(both.find("[rank1]: 1 2 2\n"), std::string::npos) << both;
  // One node alone: the round closes with it once the last call passed, at half the world size.
  auto alone = run(kTrainer + " launch --nnodes 1:2 --nproc-per-node 2 --rdzv-last-call 0.2 " +
                   "--master-port " + std::to_string(testing::free_port()) +
                   " sh -c 'echo $RANK $WORLD_SIZE $TRAINER_ELASTIC_WORLD_SIZE'");
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  EXPECT_NE(alone.out.find("[rank1]: 1 2 4\n"), std::string::npos) << alone.out;
  EXPECT_NE(alone.err.find("trainer launch: round 0: 1 node (127.0.0.1), world size 2; this is "
                           "node 0\n"),
            std::string::npos)
      << alone.err;
}

TEST(Launcher, AnElasticNodeBeyondMaxStandsByWithoutStoppingTheRound) {
  // Two launchers fill a round of --nnodes 1:2; a third, come later, neither joins nor stops it:
  // it waits for a round that never comes and ends with one line after --rdzv-timeout.
  TempDir dir;
  const std::string port = std::to_string(testing::free_port());
  const std::string node = kTrainer + " launch --nnodes 1:2 --rdzv-last-call 30 --master-port " +
                           port + " sh -c 'sleep 4; echo $RANK $WORLD_SIZE'";
  int first = testing::start({"/bin/sh", "-c", node}, dir.file("a"), dir.file("a.err"));
  int second = testing::start({"/bin/sh", "-c", node}, dir.file("b"), dir.file("b.err"));
  for (int i = 0; i < 100 && testing::slurp(dir.file("a.err")).find("round 0") == std::string::npos;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  auto third = run(kTrainer + " launch --nnodes 1:2 --rdzv-timeout 1 --master-port " + port +
                   " sh -c 'echo never'");
  int status_a = 0, status_b = 0;
  ::waitpid(first, &status_a, 0);
  ::waitpid(second, &status_b, 0);
  EXPECT_EQ(status_a, 0) << testing::slurp(dir.file("a.err"));
  EXPECT_EQ(status_b, 0) << testing::slurp(dir.file("b.err"));
  const std::string both = testing::slurp(dir.file("a")) + testing::slurp(dir.file("b"));
  EXPECT_NE(both.find("[rank0]: 0 2\n"), std::string::npos) << both;
  EXPECT_NE(both.find("[rank1]: 1 2\n"), std::string::npos) << both;
  EXPECT_EQ(third.exit_code, 1);
  EXPECT_EQ(third.out, "");
  EXPECT_EQ(third.err,
            "trainer: error: trainer launch: the nodes of round 0 did not start a new "
            "round within 1 s\n");
}

TEST(Launcher, AnElasticNodeAloneBelowMinEndsWithOneLineWithinTheTimeout) {
  const std::string port = std::to_string(testing::free_port());
  const double start = testing::now_seconds();
  auto result =
      run(kTrainer + " launch --nnodes 2:3 --rdzv-timeout 1 --master-port " + port + " true");
  EXPECT_LT(testing::now_seconds() - start, 10);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err,
            "trainer: error: trainer launch: only 1 of at least 2 nodes joined the "
            "rendezvous at 127.0.0.1:" +
                port + " within 1 s\n");
}

TEST(Launcher, AFailingRankStopsTheOthersAndItsLastLineSaysWhy) {
  double start = testing::now_seconds();
  auto result =
      run(launch("--nproc-per-node 2 sh -c 'if [ $RANK = 1 ]; then echo step 1 >&2; echo no space "
                 "left on device >&2; echo; exit 3; fi; sleep 60'"));
  EXPECT_LT(testing::now_seconds() - start, 10.0);
  EXPECT_EQ(result.exit_code, 1);
  const std::string last = testing::lines_of(result.err).back();
  EXPECT_EQ(last.rfind("trainer launch: rank 1 (local rank 1, pid ", 0), 0u) << result.err;
  EXPECT_TRUE(base::ends_with(
      last, ") exited with code 3: no space left on device; stopping the other ranks"))
      << result.err;
  // A rank that says nothing is named without a reason.
  result = run(launch("--nproc-per-node 2 sh -c 'if [ $RANK = 1 ]; then exit 3; fi; sleep 60'"));
  EXPECT_NE(result.err.find(") exited with code 3; stopping the other ranks\n"), std::string::npos)
      << result.err;
}

// A rank that only learned that another failed (a collective's agreement: exit code 3, as the
// Trainer's "another process could not load its slices") is not the one named, even when it ends
// first: the rank that failed by itself, ending in its own error path, is.
TEST(Launcher, TheRankThatFailedIsNamedNotOneThatEchoedIt) {
  // Rank 1 is in its error path (SIGTERM ignored, as report_error defers it) before rank 0
  // echoes: rank 0 waits for its word.
  TempDir dir;
  const std::string ready = dir.file("ready");
  auto result = run(
      launch("--nproc-per-node 2 sh -c 'if [ $RANK = 0 ]; then while [ ! -e " + ready +
             " ]; do sleep 0.05; done; echo another process could not load its slices >&2; exit "
             "3; fi; trap \"\" TERM; touch " +
             ready + "; sleep 0.5; echo rank 1 slice is corrupt >&2; exit 2'"));
  EXPECT_EQ(result.exit_code, 2) << result.err;
  const std::string last = testing::lines_of(result.err).back();
  EXPECT_EQ(last.rfind("trainer launch: rank 1 (local rank 1, pid ", 0), 0u) << result.err;
  EXPECT_TRUE(base::ends_with(last,
                              "exited with code 2: rank 1 slice is corrupt; stopping the "
                              "other ranks"))
      << result.err;
}

TEST(Launcher, AKilledRankEndsTheRunWithin10sAndLeavesNoProcess) {
  TempDir dir;
  std::string command = launch("--nproc-per-node 2 " + kWorker + " hang --pid-dir " + dir.path());
  // Start the launcher in the background, kill rank 1 once both ranks are up, wait for the end.
  std::string script = "(" + command + " > " + dir.file("out") + " 2> " + dir.file("err") +
                       "; echo $? > " + dir.file("code") + ") & for i in $(seq 100); do [ -s " +
                       dir.file("rank.0") + " ] && [ -s " + dir.file("rank.1") +
                       " ] && break; sleep 0.1; done; kill -9 $(cat " + dir.file("rank.1") +
                       "); wait";
  double start = testing::now_seconds();
  auto result = run(script);
  double took = testing::now_seconds() - start;
  EXPECT_LT(took, 10.0);
  EXPECT_EQ(testing::slurp(dir.file("code")), "1\n");
  std::string err = testing::slurp(dir.file("err"));
  EXPECT_NE(err.find("trainer launch: rank 1 (local rank 1, pid "), std::string::npos) << err;
  EXPECT_NE(err.find("was killed by signal 9 (SIGKILL); stopping the other ranks"),
            std::string::npos)
      << err;
  for (const char* name : {"rank.0", "rank.1", "child.0", "child.1"}) {
    int pid = std::stoi(testing::slurp(dir.file(name)));
    EXPECT_FALSE(alive(pid)) << name << " " << pid << " is still running";
  }
}

TEST(Launcher, SigtermToTheLauncherReachesEveryRank) {
  TempDir dir;
  std::string command = launch(
      "--nproc-per-node 2 sh -c 'trap \"echo got TERM; exit 0\" TERM; echo up > " + dir.path() +
      "/up.$RANK; "
      "sleep 60 & wait'");
  auto result = run(command + " & pid=$!; for i in $(seq 100); do [ -e " + dir.file("up.0") +
                    " ] && [ -e " + dir.file("up.1") +
                    " ] && break; sleep 0.1; done; kill -TERM $pid; wait $pid; echo code=$?");
  EXPECT_NE(result.out.find("[rank0]: got TERM"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("[rank1]: got TERM"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("code=143"), std::string::npos) << result.out;
  EXPECT_NE(result.err.find("trainer launch: interrupted by SIGTERM; stopped every rank"),
            std::string::npos);
}

// A launcher waiting at the rendezvous for a node that never comes (static and elastic) ends at
// SIGTERM or SIGINT within a second, saying so (exit 128 + the signal), rather than when the
// rendezvous times out blaming the missing node.
TEST(Launcher, ASignalEndsAWaitAtTheRendezvousAtOnce) {
  for (const std::string nodes : {"--nnodes 2 --node-rank 0", "--nnodes 2:3"}) {
    for (const std::string signal : {"TERM", "INT"}) {
      SCOPED_TRACE(nodes + " SIG" + signal);
      const std::string port = std::to_string(testing::free_port());
      // Started in its own process group with SIGINT as the default (a background job of sh
      // ignores it); the signal comes once the launcher holds the rendezvous port.
      auto result =
          run("setsid sh -c 'trap - INT; exec " + kTrainer + " launch " + nodes +
              " --rdzv-timeout 60 --master-port " + port +
              " true' & pid=$!; for i in $(seq 100); do ss -ltn | grep -q ':" + port +
              " ' && break; sleep 0.1; done; sleep 0.3; start=$(date +%s%N); kill -" + signal +
              " $pid; wait $pid; echo code=$? ms=$((($(date +%s%N) - start) / " + "1000000))");
      EXPECT_NE(result.out.find(fmt::format("code={}", signal == "TERM" ? 143 : 130)),
                std::string::npos)
          << result.out << result.err;
      const size_t at = result.out.find("ms=");
      ASSERT_NE(at, std::string::npos) << result.out;
      EXPECT_LT(std::stoi(result.out.substr(at + 3)), 2000) << result.out;
      EXPECT_EQ(result.err, "trainer: trainer launch: interrupted by SIG" + signal +
                                " while waiting at the rendezvous at 127.0.0.1:" + port +
                                "; no rank was started\n");
    }
  }
}

// A port that accepts the connection but never answers (another program holds it) is given up on
// within --rdzv-timeout and a little, in one line, where c10d's client waited in recv() for ever.
TEST(Launcher, ARendezvousPortThatNeverAnswersIsGivenUpOnWithinTheTimeout) {
  TempDir dir;
  const std::string port = std::to_string(testing::free_port());
  const std::string listener = dir.file("listener.py");
  std::ofstream(listener) << "import socket, time\n"
                             "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, "
                             "socket.SO_REUSEADDR, 1)\n"
                             "s.bind(('127.0.0.1', "
                          << port
                          << ")); s.listen(8)\n"
                             "open('"
                          << dir.file("up")
                          << "', 'w').close()\n"
                             "conns = []\n"
                             "while True: conns.append(s.accept())\n";
  const double start = testing::now_seconds();
  auto result = run("python3 " + listener + " & pid=$!; for i in $(seq 100); do [ -e " +
                    dir.file("up") + " ] && break; sleep 0.1; done; " + kTrainer +
                    " launch --nnodes 2 --node-rank 1 --rdzv-timeout 1 --master-port " + port +
                    " true; code=$?; kill $pid; echo code=$code");
  EXPECT_LT(testing::now_seconds() - start, 15);
  EXPECT_NE(result.out.find("code=1"), std::string::npos) << result.out << result.err;
  EXPECT_EQ(result.err,
            "trainer: error: trainer launch: could not reach the rendezvous at "
            "127.0.0.1:" +
                port +
                " within 1 s: it accepted the connection but never "
                "answered (another program holds that port?)\n");
}

TEST(Launcher, SigintAfterOneRankExitedStillStopsTheOthers) {
  // Rank 0 ends at once (its SIGCHLD reaches the launcher first); rank 1 would run for a minute.
  TempDir dir;
  std::string command = launch("--nproc-per-node 2 sh -c '[ $RANK = 0 ] && exit 0; echo up > " +
                               dir.path() + "/up; sleep 60 & wait'");
  double start = testing::now_seconds();
  auto result = run(command + " & pid=$!; for i in $(seq 100); do [ -e " + dir.file("up") +
                    " ] && break; sleep 0.1; done; sleep 0.3; kill -INT $pid; wait $pid; "
                    "echo code=$?");
  EXPECT_LT(testing::now_seconds() - start, 20.0);
  EXPECT_NE(result.out.find("code=130"), std::string::npos) << result.out << result.err;
  EXPECT_NE(result.err.find("trainer launch: interrupted by SIGINT; stopped every rank"),
            std::string::npos)
      << result.err;
}

TEST(Launcher, AProcessARankLeftRunningDoesNotHoldTheLauncher) {
  // The rank starts a process in a session of its own, which keeps the rank's output open and is
  // out of reach of the launcher's process-group kill: the launcher reads on for the grace
  // period, then ends, saying so.
  TempDir dir;
  std::string pid_file = dir.file("pid");
  std::string rank = "setsid sh -c \"echo \\$\\$ > " + pid_file + "; exec sleep 30\" & " +
                     "while [ ! -s " + pid_file + " ]; do sleep 0.05; done; echo started";
  double start = testing::now_seconds();
  auto result = run(launch("--nproc-per-node 1 --grace-period 1 sh -c '" + rank + "'"));
  double took = testing::now_seconds() - start;
  std::string pid = testing::slurp(pid_file);
  ASSERT_FALSE(pid.empty()) << result.err;
  ::kill(std::stoi(pid), SIGKILL);
  EXPECT_LT(took, 5.0);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "[rank0]: started\n");
  EXPECT_EQ(result.err,
            "trainer launch: rank 0 exited but a process it started still holds its output; not "
            "waiting for it\n");
}

// Writes `body` as an executable sh script `name` in `dir` and returns its path.
std::string write_script(const TempDir& dir, const std::string& name, const std::string& body) {
  std::string path = dir.file(name);
  std::ofstream(path) << "#!/bin/sh\n" << body;
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path;
}

// "trainer launch: rank R (local rank R, pid P)<tail>" for some pid P.
void expect_rank_line(const std::string& line, int rank, const std::string& tail) {
  std::string head = fmt::format("trainer launch: rank {0} (local rank {0}, pid ", rank);
  EXPECT_EQ(line.rfind(head, 0), 0u) << line;
  EXPECT_TRUE(line.size() > tail.size() &&
              line.compare(line.size() - tail.size(), tail.size(), tail) == 0)
      << line;
}

TEST(Launcher, MaxRestartsStartsEveryRankAgainAfterAFailure) {
  // Rank 1 fails on the first attempt only, once rank 0 runs (which is then stopped).
  TempDir dir;
  std::string program = write_script(dir, "rank.sh",
                                     fmt::format(R"(
echo count=$TORCHELASTIC_RESTART_COUNT max=$TORCHELASTIC_MAX_RESTARTS
[ $TORCHELASTIC_RESTART_COUNT = 0 ] || exit 0
if [ $RANK = 1 ]; then
  for i in $(seq 100); do [ -e {0} ] && break; sleep 0.05; done
  exit 1
fi
touch {0}
exec sleep 30
)",
                                                 dir.file("up")));
  double start = testing::now_seconds();
  auto result = run(launch("--nproc-per-node 2 --max-restarts 1 --grace-period 1 " + program));
  EXPECT_LT(testing::now_seconds() - start, 5.0);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  auto err = testing::lines_of(result.err);
  ASSERT_EQ(err.size(), 1u) << result.err;
  expect_rank_line(err[0], 1, " exited with code 1; restarting every rank (restart 1 of 1)");
  for (const char* line : {"[rank0]: count=0 max=1\n", "[rank1]: count=0 max=1\n",
                           "[rank0]: count=1 max=1\n", "[rank1]: count=1 max=1\n"}) {
    EXPECT_NE(result.out.find(line), std::string::npos) << line << result.out;
  }
}

TEST(Launcher, MaxRestartsGivesUpAfterTheLastRestartAndLeavesNoProcess) {
  // Rank 0 always fails; rank 1 records its pid and sleeps until stopped. A fresh port each time.
  TempDir dir;
  std::string program = write_script(dir, "rank.sh",
                                     "if [ $RANK = 0 ]; then echo $TORCHELASTIC_RESTART_COUNT >> " +
                                         dir.file("runs") + "; exit 1; fi\necho $$ >> " +
                                         dir.file("pids") + "\nexec sleep 30\n");
  double start = testing::now_seconds();
  auto result = run(kTrainer + " launch --master-port 0 --nproc-per-node 2 --max_restarts 2 " +
                    "--grace-period 1 " + program);
  EXPECT_LT(testing::now_seconds() - start, 5.0);
  EXPECT_EQ(result.exit_code, 1) << result.err;
  auto err = testing::lines_of(result.err);
  ASSERT_EQ(err.size(), 3u) << result.err;
  expect_rank_line(err[0], 0, " exited with code 1; restarting every rank (restart 1 of 2)");
  expect_rank_line(err[1], 0, " exited with code 1; restarting every rank (restart 2 of 2)");
  expect_rank_line(err[2], 0, " exited with code 1; gave up after 2 restarts");
  EXPECT_EQ(testing::slurp(dir.file("runs")), "0\n1\n2\n");
  for (const auto& pid : testing::lines_of(testing::slurp(dir.file("pids")))) {
    EXPECT_FALSE(alive(std::stoi(pid))) << "rank 1's pid " << pid << " is still running";
  }
}

TEST(Launcher, MaxRestartsDoesNotRestartAfterBadInput) {
  TempDir dir;
  std::string program = write_script(
      dir, "rank.sh",
      "if [ $RANK = 1 ]; then echo run >> " + dir.file("runs") + "; exit 2; fi\nexec sleep 30\n");
  auto result = run(launch("--nproc-per-node 2 --max-restarts 3 --grace-period 1 " + program));
  EXPECT_EQ(result.exit_code, 2) << result.err;
  auto err = testing::lines_of(result.err);
  ASSERT_EQ(err.size(), 1u) << result.err;
  expect_rank_line(err[0], 1, " exited with code 2; stopping the other ranks");
  EXPECT_EQ(testing::slurp(dir.file("runs")), "run\n");
}

void expect_launch_error(const std::string& args, const std::string& message) {
  auto result = run(kTrainer + " launch " + args);
  EXPECT_EQ(result.exit_code, 2) << args;
  EXPECT_EQ(result.err, "trainer: error: " + message + "\n") << args;
}

TEST(Launcher, BadOptionsAreOneLineAndExitTwo) {
  testing::PortHolder busy;
  std::string port = std::to_string(busy.port());
  expect_launch_error(
      "--nproc-per-node 2 --master-port " + port + " true",
      "--master-port " + port +
          " is busy on this machine (another run or program holds it; choose a free port)");
  expect_launch_error("--nnodes 2 --node-rank 2 true",
                      "--node-rank 2 is not allowed (must be in [0, 2) for --nnodes 2)");
  expect_launch_error("--nproc-per-node 0 true",
                      "--nproc-per-node 0 is not allowed (an integer in 1..4096)");
  expect_launch_error("--nproc-per-node 2 /nonexistent/program",
                      "program /nonexistent/program is not an executable file or on PATH");
  int closed = testing::free_port();
  expect_launch_error(
      "--nnodes 2 --node-rank 1 --rdzv-timeout 1 --master-port " + std::to_string(closed) + " true",
      "--master-addr 127.0.0.1:" + std::to_string(closed) +
          " was not reachable within 1 s (is node 0 running?)");
  expect_launch_error("--nnodes 2 --node-rank 1 --master-addr no-such-host.invalid true",
                      "--master-addr no-such-host.invalid is not a known host name or address");
  for (const char* count : {"-1", "abc", "1001", "1.5"}) {
    expect_launch_error(
        fmt::format("--max-restarts '{}' true", count),
        fmt::format("--max-restarts {} is not allowed (an integer in 0..1000)", count));
  }
  expect_launch_error("--max_restarts 1001 true",
                      "--max-restarts 1001 is not allowed (an integer in 0..1000)");
  for (const char* nodes : {"3:2", "0:2", "1:", ":2", "a:2", "1:2:3"}) {
    expect_launch_error(fmt::format("--nnodes {} true", nodes),
                        fmt::format("--nnodes {} is not allowed (an integer in 1..65536, or "
                                    "MIN:MAX with 1 <= MIN <= MAX)",
                                    nodes));
  }
  expect_launch_error("--nnodes 1:2 --rdzv-last-call -1 true",
                      "--rdzv-last-call -1 is not allowed (seconds, a finite number in 0..86400)");
}

}  // namespace launcher_test
}  // namespace trainer
