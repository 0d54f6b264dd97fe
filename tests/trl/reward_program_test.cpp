// exec: reward programs (trl/reward_program.h): one JSON object a line out, one number a line
// back, in order, numbers, null, NaN; and their death, silence, junk and a command that is not
// there as one line naming the program and the row.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "trl/reward_program.h"
#include "trl/rewards.h"

namespace trainer::trl {
namespace {

using json = nlohmann::ordered_json;

std::vector<json> requests(int n) {
  std::vector<json> out;
  for (int i = 0; i < n; ++i) out.push_back(json{{"completion", std::string(i, 'x')}, {"i", i}});
  return out;
}

std::vector<std::string> rows(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back("data.jsonl row " + std::to_string(i + 1));
  return out;
}

std::string error_of(RewardProgram& program, int n) {
  try {
    program.score(requests(n), rows(n));
  } catch (const RewardProgramError& e) {
    return e.what();
  }
  return "";
}

TEST(RewardProgram, AnswersEachLineInOrderAcrossCalls) {
  // The completion's length, as a program that reads a line and answers it.
  RewardProgram program(
      "python3 -c 'import json,sys\n"
      "for line in sys.stdin:\n"
      "    r = json.loads(line)\n"
      "    print(None if r[\"i\"] == 2 else len(r[\"completion\"]) / 2, flush=True)'",
      30);
  for (int round = 0; round < 2; ++round) {
    const auto scores = program.score(requests(5), rows(5));
    ASSERT_EQ(scores.size(), 5u);
    EXPECT_EQ(scores[0], 0.0);
    EXPECT_EQ(scores[1], 0.5);
    EXPECT_FALSE(scores[2].has_value());
    EXPECT_EQ(scores[4], 2.0);
  }
}

TEST(RewardProgram, ManyLongRequestsFlowBothWaysWithoutDeadlock) {
  // 3,000 lines of 2 KB each, more than a pipe holds: written while the answers are read.
  RewardProgram echo(
      "python3 -c 'import sys\n"
      "for n, line in enumerate(sys.stdin, 1):\n"
      "    print(n, flush=True)'",
      30);
  std::vector<json> many;
  for (int i = 0; i < 3000; ++i) many.push_back(json{{"completion", std::string(2000, 'y')}});
  const auto scores = echo.score(many, {});
  ASSERT_EQ(scores.size(), 3000u);
  EXPECT_EQ(scores[2999], 3000.0);
}

TEST(RewardProgram, ParsesNumbersNullAndPythonsSpecialValues) {
  EXPECT_EQ(parse_reward_answer("1.5").value, 1.5);
  EXPECT_EQ(parse_reward_answer(" -2e-3 \r").value, -2e-3);
  EXPECT_TRUE(parse_reward_answer("null").ok);
  EXPECT_FALSE(parse_reward_answer("null").value.has_value());
  EXPECT_TRUE(parse_reward_answer("None").ok);
  EXPECT_TRUE(std::isnan(*parse_reward_answer("NaN").value));
  EXPECT_EQ(*parse_reward_answer("-inf").value, -INFINITY);
  EXPECT_FALSE(parse_reward_answer("").ok);
  EXPECT_FALSE(parse_reward_answer("0x10").ok);
  EXPECT_FALSE(parse_reward_answer("1.5 2").ok);
  EXPECT_FALSE(parse_reward_answer("good").ok);
}

TEST(RewardProgram, DeathSilenceAndJunkAreOneLineNamingTheProgramAndTheRow) {
  {
    RewardProgram program("read line; echo 1; exit 3", 30);
    EXPECT_EQ(error_of(program, 2),
              "reward program exec:read line; echo 1; exit 3 exited with status 3 (at data.jsonl "
              "row 2)");
  }
  {
    RewardProgram program("while read line; do echo good; done", 30);
    EXPECT_EQ(error_of(program, 1),
              "reward program exec:while read line; do echo good; done answered 'good' (allowed: "
              "one number or null a line) (at data.jsonl row 1)");
  }
  {
    RewardProgram program("sleep 30", 0.5);
    EXPECT_EQ(error_of(program, 1),
              "reward program exec:sleep 30 gave no answer within 0.5 s (at data.jsonl row 1)");
  }
  {
    RewardProgram program("no-such-reward-program-here", 30);
    EXPECT_EQ(error_of(program, 1),
              "reward program exec:no-such-reward-program-here exited with status 127 (at "
              "data.jsonl row 1)");
  }
}

std::string error_of_many(RewardProgram& program) {
  std::vector<json> many;
  for (int i = 0; i < 3000; ++i) many.push_back(json{{"completion", std::string(2000, 'z')}});
  try {
    program.score(many, rows(3000));
  } catch (const RewardProgramError& e) {
    return e.what();
  }
  return "";
}

TEST(RewardProgram, AProgramThatStopsReadingIsALineAndNeverSigpipe) {
  // 6 MB of requests to programs that stop reading: the writes meet a closed pipe. This test
  // binary leaves SIGPIPE at its default, which would end it there.
  {
    RewardProgram program("read line; exit 4", 30);
    EXPECT_EQ(error_of_many(program),
              "reward program exec:read line; exit 4 exited with status 4 (at data.jsonl row 1)");
  }
  {
    RewardProgram program("exec 0<&-; sleep 30", 1);
    EXPECT_EQ(error_of_many(program),
              "reward program exec:exec 0<&-; sleep 30 closed its input before reading every "
              "request (at data.jsonl row 1)");
  }
  for (int round = 0; round < 20; ++round) {
    RewardProgram program("no-such-reward-program-here 2>/dev/null", 30);
    EXPECT_EQ(error_of_many(program),
              "reward program exec:no-such-reward-program-here 2>/dev/null exited with status 127 "
              "(at data.jsonl row 1)");
  }
}

TEST(RewardProgram, MetricNamesComeFromTheProgramsFile) {
  EXPECT_EQ(reward_program_name("python3 rewards/length.py --n 3"), "length");
  EXPECT_EQ(reward_program_name("./score"), "score");
  EXPECT_EQ(reward_program_name("/usr/bin/env node judge.mjs"), "judge");
}

}  // namespace
}  // namespace trainer::trl
