// libFuzzer target for GRPO's reward entries and answers (torch-free): the first byte picks
// what the rest is: a reward_funcs entry (a name or a Python-style call, or a JSON object) read by
// trl::make_builtin_reward, or a solution and a completion (split at the first NUL) matched as
// TRL's accuracy_reward matches them (trl::math), or an exec: program's answer line. Only
// trainer::InputError may come out of the entry, the matching never throws, and a reward scored
// is finite or None.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "trl/builtin_rewards.h"
#include "trl/math_answer.h"
#include "trl/reward_program.h"

namespace {

using Json = nlohmann::ordered_json;
using namespace trainer;

void fail(const char* what) {
  std::fprintf(stderr, "rewards fuzz: %s\n", what);
  abort();
}

void check_entry(std::string_view text) {
  Json spec = Json::parse(text, nullptr, false);
  if (spec.is_discarded()) spec = std::string(text);
  std::unique_ptr<trl::BuiltinReward> reward;
  try {
    reward = trl::make_builtin_reward(spec);
  } catch (const InputError&) {
    return;
  }
  // Score a few completions against a row with a solution.
  const Json row = {{"solution", "\\boxed{\\frac{1}{2}}"}};
  const std::vector<trl::RewardSample> samples = {
      {"<think>x</think> The answer is \\boxed{0.5}", {1, 2, 3}, &row},
      {"", {}, &row},
      {"#### 42", {5, 5, 5, 5}, &row}};
  try {
    for (const auto& value : reward->score(samples)) {
      if (value && !std::isfinite(*value)) fail("a reward that is not finite");
    }
  } catch (const InputError&) {
  }
}

void check_answers(std::string_view text) {
  const size_t split = text.find('\0');
  const std::string_view solution = text.substr(0, split);
  const std::string_view completion =
      split == std::string_view::npos ? std::string_view() : text.substr(split + 1);
  const trl::math::MathAnswer gold = trl::math::parse_solution(solution);
  const trl::math::MathAnswer answer = trl::math::parse_completion(completion);
  (void)trl::math::verify(gold, answer);
  (void)gold.describe();
  (void)answer.describe();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      check_entry(rest);
      break;
    case 1:
      check_answers(rest);
      break;
    default:
      (void)trl::parse_reward_answer(std::string(rest));
  }
  return 0;
}
