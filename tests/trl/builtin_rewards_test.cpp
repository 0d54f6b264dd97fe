// TRL's built-in reward functions (trl/builtin_rewards.h) over math_verify's answer matching
// (trl/math_answer.h): every reward of tests/reference/inputs/grpo_rewards/cases.json on its
// completions equal to what TRL 1.16's trl.rewards gives them
// (tests/reference/scripts/grpo_rewards_reference.py, math-verify 0.9.0), the cases marked
// "beyond" (what sympy decides: math_answer.h names it) counted apart; the names TRL logs; the
// entries that name a built-in and the one-line errors of those that do not.
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/test_util.h"
#include "trl/builtin_rewards.h"
#include "trl/math_answer.h"

namespace trainer {
namespace builtin_rewards_test {

using Json = nlohmann::ordered_json;
using testing::expect_input_error;
using trl::make_builtin_reward;
using trl::RewardSample;

Json cases_json() {
  return Json::parse(testing::slurp(testing::paths::source_dir() +
                                    "/tests/reference/inputs/grpo_rewards/cases.json"));
}

std::vector<RewardSample> samples_of(const Json& cases, std::vector<Json>& rows) {
  rows.clear();
  for (const Json& c : cases) rows.push_back({{"solution", c["solution"]}});
  std::vector<RewardSample> samples;
  for (size_t i = 0; i < cases.size(); ++i) {
    samples.push_back({cases[i]["completion"].get<std::string>(),
                       cases[i]["completion_ids"].get<std::vector<int64_t>>(), &rows[i]});
  }
  return samples;
}

std::string shown(const std::optional<double>& v) {
  if (!v) return "None";
  char buffer[40];
  std::snprintf(buffer, sizeof buffer, "%.17g", *v);
  return buffer;
}

TEST(GrpoRewards, EqualTrlsBuiltinsOnEveryCase) {
  const std::string dir = testing::reference_dir("grpo_rewards");
  ASSERT_FALSE(dir.empty());
  const Json reference = Json::parse(testing::slurp(dir + "/rewards.json"));
  const Json spec = cases_json();
  const Json& cases = spec["cases"];
  ASSERT_EQ(cases.size(), 192u);
  ASSERT_EQ(reference["rewards"].size(), spec["rewards"].size());
  std::vector<Json> rows;
  const std::vector<RewardSample> samples = samples_of(cases, rows);
  const Json& parsed = reference["accuracy_parsed"];
  size_t beyond = 0, beyond_differing = 0, compared = 0;
  for (const Json& expected : reference["rewards"]) {
    const auto reward = make_builtin_reward(expected["spec"]);
    EXPECT_EQ(reward->name(), expected["name"].get<std::string>()) << expected["spec"];
    const std::vector<std::optional<double>> got = reward->score(samples);
    ASSERT_EQ(got.size(), cases.size());
    const bool uses_answers = reward->name() == "accuracy_reward" ||
                              reward->name() == "reasoning_accuracy_reward" ||
                              reward->name() == "cosine_scaled_reward";
    for (size_t i = 0; i < cases.size(); ++i) {
      const Json& value = expected["values"][i];
      const std::optional<double> want =
          value.is_null() ? std::nullopt : std::optional<double>(value.get<double>());
      if (uses_answers && cases[i].contains("beyond")) {
        ++beyond;
        // (Compared as text: GCC's optional != here warns of a value it thinks unset.)
        beyond_differing += shown(got[i]) != shown(want);
        continue;
      }
      ++compared;
      EXPECT_EQ(shown(got[i]), shown(want))
          << expected["spec"] << " on case '" << cases[i]["name"].get<std::string>()
          << "': completion " << cases[i]["completion"] << ", solution " << cases[i]["solution"]
          << "; math_verify parsed the solution as " << parsed["gold_parsed"][i]
          << " and the completion as " << parsed["answer_parsed"][i] << "; ours "
          << trl::math::parse_solution(
                 cases[i]["solution"].is_string() ? cases[i]["solution"].get<std::string>() : "")
                 .describe()
          << " and "
          << trl::math::parse_completion(cases[i]["completion"].get<std::string>()).describe();
    }
  }
  EXPECT_EQ(compared, 192u * 12 - beyond);
  // What sympy decides (math_answer.h's "does not cover"): not compared, only counted.
  std::cout << "GrpoRewards: " << beyond << " rewards of cases marked beyond math_answer.h left "
            << "uncompared (" << beyond_differing << " differ from TRL's)\n";
  EXPECT_GT(beyond_differing, 0u);
}

TEST(GrpoRewards, NamedAsTrlLogsThem) {
  EXPECT_EQ(make_builtin_reward("think_format_reward")->name(), "think_format_reward");
  EXPECT_EQ(make_builtin_reward("accuracy_reward")->name(), "accuracy_reward");
  EXPECT_EQ(make_builtin_reward("reasoning_accuracy_reward")->name(), "reasoning_accuracy_reward");
  EXPECT_EQ(make_builtin_reward("get_soft_overlong_punishment")->name(),
            "soft_overlong_punishment_reward");
  EXPECT_EQ(make_builtin_reward("get_repetition_penalty_reward")->name(),
            "repetition_penalty_reward");
  EXPECT_EQ(make_builtin_reward("get_cosine_scaled_reward(max_len=8)")->name(),
            "cosine_scaled_reward");
  EXPECT_EQ(make_builtin_reward("trl.rewards.accuracy_reward")->name(), "accuracy_reward");
  EXPECT_EQ(make_builtin_reward(Json{{"name", "get_cosine_scaled_reward"}, {"max_len", 8}})->name(),
            "cosine_scaled_reward");
}

TEST(GrpoRewards, KnowsItsBuiltins) {
  EXPECT_TRUE(trl::is_builtin_reward("accuracy_reward"));
  EXPECT_TRUE(
      trl::is_builtin_reward("get_soft_overlong_punishment(max_completion_len=5, "
                             "soft_punish_cache=1)"));
  EXPECT_TRUE(trl::is_builtin_reward(Json{{"name", "think_format_reward"}}));
  EXPECT_FALSE(trl::is_builtin_reward("my_rewards.length_reward"));
  EXPECT_FALSE(trl::is_builtin_reward(Json{{"name", 3}}));
  EXPECT_FALSE(trl::is_builtin_reward(Json(3)));
  EXPECT_EQ(trl::builtin_reward_names().size(), 6u);
}

// TRL's docstring examples.
TEST(GrpoRewards, TrlsDocstringExamples) {
  auto score = [](const std::string& spec, const std::vector<std::string>& completions,
                  const std::vector<std::vector<int64_t>>& ids, const std::string& solution) {
    const Json row = {{"solution", solution}};
    std::vector<RewardSample> samples;
    for (size_t i = 0; i < completions.size(); ++i)
      samples.push_back({completions[i], ids[i], &row});
    return make_builtin_reward(spec)->score(samples);
  };
  using V = std::vector<std::optional<double>>;
  EXPECT_EQ(score("accuracy_reward",
                  {R"(My answer is \boxed{\frac{1}{3}})", R"(My answer is \boxed{\frac{1}{2}})"},
                  {{}, {}}, R"(\frac{1}{3})"),
            (V{1.0, 0.0}));
  EXPECT_EQ(score("get_cosine_scaled_reward(max_len=100)",
                  {R"(\boxed{\frac{1}{3}})", R"(\boxed{\frac{1}{2}})"},
                  {std::vector<int64_t>(50, 1), std::vector<int64_t>(50, 1)}, R"(\frac{1}{3})"),
            (V{0.75, -0.75}));
  EXPECT_EQ(score("get_repetition_penalty_reward(ngram_size=2, max_penalty=-1.0)", {"", ""},
                  {{1, 2, 3, 4}, {5, 5, 5, 5, 5}}, "1"),
            (V{0.0, -0.75}));
  EXPECT_EQ(score("get_soft_overlong_punishment(max_completion_len=100, soft_punish_cache=20)",
                  {""}, {std::vector<int64_t>(90, 1)}, "1"),
            (V{-0.5}));
  EXPECT_EQ(score("think_format_reward",
                  {"<think>\nThis is my reasoning.\n</think>\nThis is my answer.",
                   "<think>\nThis is my reasoning.\nThis is my answer."},
                  {{}, {}}, "1"),
            (V{1.0, 0.0}));
}

TEST(GrpoRewards, AccuracyNeedsTheSolutionColumn) {
  const Json row = {{"answer", "72"}};
  const std::vector<RewardSample> samples = {{R"(\boxed{72})", {1}, &row}};
  for (const char* spec :
       {"accuracy_reward", "reasoning_accuracy_reward", "get_cosine_scaled_reward(max_len=4)"}) {
    expect_input_error([&] { make_builtin_reward(spec)->score(samples); },
                       {"no 'solution' column", spec});
  }
  const Json number = {{"solution", 72}};
  expect_input_error(
      [&] {
        make_builtin_reward("accuracy_reward")->score({{R"(\boxed{72})", {1}, &number}});
      },
      {"'solution' column holds 72 (an integer), not a text"});
  // The other rewards read no column.
  EXPECT_EQ(make_builtin_reward("think_format_reward")->score(samples).size(), 1u);
}

TEST(GrpoRewards, EntriesRefusedInOneLine) {
  auto refused = [](const Json& spec, const std::vector<std::string>& parts) {
    expect_input_error([&] { make_builtin_reward(spec); }, parts);
    const std::string message = testing::input_error_of([&] { make_builtin_reward(spec); });
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  };
  refused("acuracy_reward", {"'acuracy_reward' is not one of TRL's built-ins",
                             "accuracy_reward, "
                             "get_cosine",
                             "did you mean accuracy_reward?"});
  refused("my_module.reward", {"not one of TRL's built-ins"});
  refused("get_cosine_scaled_reward", {"get_cosine_scaled_reward needs max_len",
                                       "its parameters: max_len, min_value_wrong=-1.0"});
  refused("get_soft_overlong_punishment()", {"needs max_completion_len"});
  refused("get_soft_overlong_punishment(max_len=5, soft_punish_cache=1)",
          {"has no parameter 'max_len'", "max_completion_len, soft_punish_cache"});
  refused("get_soft_overlong_punishment(max_completion_len=5.5, soft_punish_cache=1)",
          {"max_completion_len is 5.5 (a number); it must be a whole number"});
  refused("get_soft_overlong_punishment(5, 1, 2)", {"takes 2 positional arguments, not 3"});
  refused("get_soft_overlong_punishment(5, max_completion_len=5)",
          {"max_completion_len is given twice"});
  refused("get_soft_overlong_punishment(max_completion_len=5, soft_punish_cache=-1)",
          {"soft_punish_cache is -1; it must be at least 0"});
  refused("get_repetition_penalty_reward(max_penalty=0.5)",
          {"max_penalty 0.5 should not be positive"});
  refused("get_repetition_penalty_reward(ngram_size=0)",
          {"ngram_size is 0; it must be at least 1"});
  refused("get_cosine_scaled_reward(max_len=0)", {"max_len is 0; it must be at least 1"});
  refused("get_cosine_scaled_reward(max_len=True)", {"max_len is True (a boolean)"});
  refused("reasoning_accuracy_reward(reasoning_delimiters='</think>')",
          {"reasoning_delimiters is \"</think>\" (a string); it must be a list of texts"});
  refused("reasoning_accuracy_reward(reasoning_delimiters=[''])", {"non-empty texts"});
  refused("think_format_reward(x=1)",
          {"think_format_reward has no parameter 'x'", "no parameters"});
  refused("get_soft_overlong_punishment(max_completion_len=5", {"not closed with ')'"});
  refused("get_soft_overlong_punishment(max_completion_len=abc)", {"'abc' is not a value"});
  refused("accuracy_reward() extra", {"unexpected"});
  refused(Json{{"max_len", 5}}, {"an object names its function in \"name\""});
  refused(Json(5), {"is an integer; name a built-in"});
}

TEST(GrpoRewards, CallsAndObjectsBindAsPython) {
  const Json row = {{"solution", "1"}};
  const std::vector<RewardSample> samples = {{"", std::vector<int64_t>(23, 1), &row}};
  auto overlong = [&](const Json& spec) { return *make_builtin_reward(spec)->score(samples)[0]; };
  // Alone: TRL's grpo script's 1280 and 256.
  EXPECT_EQ(overlong("get_soft_overlong_punishment"), 0.0);
  EXPECT_EQ(overlong("get_soft_overlong_punishment(24, 8)"), -7.0 / 8);
  EXPECT_EQ(overlong("get_soft_overlong_punishment(24, soft_punish_cache=8)"), -7.0 / 8);
  EXPECT_EQ(overlong(" get_soft_overlong_punishment ( max_completion_len = 24 , "
                     "soft_punish_cache=8, ) "),
            -7.0 / 8);
  EXPECT_EQ(overlong(Json{{"name", "get_soft_overlong_punishment"},
                          {"max_completion_len", 20},
                          {"soft_punish_cache", 2}}),
            -1.0);
  const Json answer = {{"solution", "72"}};
  const std::vector<RewardSample> tagged = {{R"(<answer>\boxed{72}</answer>)", {1}, &answer}};
  EXPECT_EQ(*make_builtin_reward("reasoning_accuracy_reward")->score(tagged)[0], 0.0);
  EXPECT_EQ(*make_builtin_reward(R"(reasoning_accuracy_reward(reasoning_delimiters=["<answer>"]))")
                 ->score(tagged)[0],
            1.0);
  EXPECT_EQ(*make_builtin_reward("reasoning_accuracy_reward(reasoning_delimiters=None)")
                 ->score(tagged)[0],
            0.0);
}

// math_verify's own examples and what GSM8K and MATH answers lean on.
TEST(GrpoMathAnswer, ParsesAndVerifiesAsMathVerify) {
  using trl::math::parse_completion;
  using trl::math::parse_solution;
  using trl::math::verify;
  EXPECT_TRUE(verify(parse_solution("$\\frac{1}{2}$"), parse_completion("\\boxed{0.5}")));
  EXPECT_TRUE(verify(parse_solution("#### 1,234"), parse_completion("So \\boxed{1234}.")));
  EXPECT_FALSE(verify(parse_solution("72"), parse_completion("The answer is 72")));
  EXPECT_TRUE(verify(parse_solution("72"), parse_completion("The answer is $72$")));
  EXPECT_TRUE(parse_solution("no number here").empty());
  EXPECT_FALSE(parse_solution("1/2").empty());
  EXPECT_EQ(parse_solution("#### 72").describe(), "72 [72]");
  EXPECT_EQ(parse_completion("\\boxed{\\dfrac{3}{4}}").describe(), "3/4 [\\frac{3}{4}]");
  EXPECT_EQ(parse_completion("\\boxed{50\\%}").describe(), "50% [50\\%]");
  EXPECT_TRUE(parse_completion("").empty());
  // Bytes that are not UTF-8 are read as Python reads them replaced.
  EXPECT_TRUE(verify(parse_solution("72"), parse_completion("\xff\\boxed{72}\xfe")));
}

}  // namespace builtin_rewards_test
}  // namespace trainer
