// TRL 1.16's built-in reward functions (trl/rewards/*.py): how each scores a batch of completions.
#include "trl/builtin_rewards_internal.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <numeric>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/json_text.h"
#include "trl/math_answer.h"

namespace trainer::trl::builtin {

namespace {

constexpr double kPi = 3.14159265358979323846;

using Json = nlohmann::ordered_json;

// The correctness accuracy_reward gives each completion: 1.0 or 0.0, None where math_verify finds
// nothing in the solution; `texts` the part of each completion to parse; `reward` the entry that
// named the reward, for messages.
std::vector<std::optional<double>> accuracy(const std::vector<RewardSample>& samples,
                                            const std::vector<std::optional<std::string>>& texts,
                                            const std::string& reward) {
  std::map<std::string, math::MathAnswer> solutions;  // a prompt's completions share one
  std::vector<std::optional<double>> rewards;
  for (size_t i = 0; i < samples.size(); ++i) {
    const Json* row = samples[i].row;
    const Json* column = nullptr;
    if (row && row->is_object()) {
      const auto found = row->find("solution");
      if (found != row->end()) column = &*found;
    }
    if (!column) {
      throw InputError(fmt::format(
          "argument reward_funcs: {}: the data set has no 'solution' column (TRL passes it as the "
          "solution argument: the text of each row's answer)",
          reward));
    }
    if (!texts[i]) {
      rewards.emplace_back(0.0);  // reasoning_accuracy_reward: no delimiter, no answer yet
      continue;
    }
    if (column->is_null()) {
      rewards.emplace_back(std::nullopt);  // math_verify finds nothing in None
      continue;
    }
    if (!column->is_string()) {
      throw InputError(fmt::format(
          "argument reward_funcs: {}: the 'solution' column holds {} ({}), not a text (math_verify "
          "parses only texts; TRL would score such a row None)",
          reward, base::shown(*column), base::a_type(*column)));
    }
    const std::string& solution = column->get_ref<const std::string&>();
    auto found = solutions.find(solution);
    if (found == solutions.end()) {
      found = solutions.emplace(solution, math::parse_solution(solution)).first;
    }
    if (found->second.empty()) {
      rewards.emplace_back(std::nullopt);
      continue;
    }
    const math::MathAnswer answer = math::parse_completion(*texts[i]);
    rewards.emplace_back(math::verify(found->second, answer) ? 1.0 : 0.0);
  }
  return rewards;
}

std::vector<std::optional<std::string>> completions_of(const std::vector<RewardSample>& samples) {
  std::vector<std::optional<std::string>> texts;
  for (const RewardSample& s : samples) texts.emplace_back(s.completion);
  return texts;
}

}  // namespace

std::vector<std::optional<double>> ThinkFormatReward::score(
    const std::vector<RewardSample>& samples) const {
  std::vector<std::optional<double>> rewards;
  for (const RewardSample& s : samples) {
    const std::string_view text = s.completion;
    constexpr std::string_view kOpen = "<think>", kClose = "</think>";
    const bool good = text.substr(0, kOpen.size()) == kOpen &&
                      text.find(kOpen, kOpen.size()) == std::string_view::npos &&
                      text.find(kClose, kOpen.size()) != std::string_view::npos;
    rewards.emplace_back(good ? 1.0 : 0.0);
  }
  return rewards;
}

std::vector<std::optional<double>> SoftOverlongPunishment::score(
    const std::vector<RewardSample>& samples) const {
  std::vector<std::optional<double>> rewards;
  for (const RewardSample& s : samples) {
    const auto length = static_cast<int64_t>(s.completion_ids.size());
    if (length <= max_ - cache_) {
      rewards.emplace_back(0.0);
    } else if (length <= max_) {
      rewards.emplace_back(static_cast<double>(max_ - cache_ - length) /
                           static_cast<double>(cache_));
    } else {
      rewards.emplace_back(-1.0);
    }
  }
  return rewards;
}

std::vector<std::optional<double>> RepetitionPenalty::score(
    const std::vector<RewardSample>& samples) const {
  std::vector<std::optional<double>> rewards;
  for (const RewardSample& s : samples) {
    const std::vector<int64_t>& ids = s.completion_ids;
    if (ids.size() < n_) {
      rewards.emplace_back(0.0);
      continue;
    }
    // The n-grams by their first index, sorted by their ids; equal neighbours are repeats.
    const size_t count = ids.size() - n_ + 1;
    std::vector<size_t> starts(count);
    std::iota(starts.begin(), starts.end(), size_t{0});
    auto gram = [&](size_t i) { return ids.begin() + static_cast<std::ptrdiff_t>(i); };
    const auto n = static_cast<std::ptrdiff_t>(n_);
    std::sort(starts.begin(), starts.end(), [&](size_t a, size_t b) {
      return std::lexicographical_compare(gram(a), gram(a) + n, gram(b), gram(b) + n);
    });
    size_t unique = count == 0 ? 0 : 1;
    for (size_t k = 1; k < count; ++k) {
      if (!std::equal(gram(starts[k - 1]), gram(starts[k - 1]) + n, gram(starts[k]))) ++unique;
    }
    const double scaling = 1 - static_cast<double>(unique) / static_cast<double>(count);
    rewards.emplace_back(scaling != 0 ? scaling * max_penalty_ : 0.0);
  }
  return rewards;
}

std::vector<std::optional<double>> AccuracyReward::score(
    const std::vector<RewardSample>& samples) const {
  return accuracy(samples, completions_of(samples), entry_);
}

std::vector<std::optional<double>> ReasoningAccuracyReward::score(
    const std::vector<RewardSample>& samples) const {
  std::vector<std::optional<std::string>> texts;
  for (const RewardSample& s : samples) {
    std::optional<std::string> answer;
    for (const std::string& delimiter : delimiters_) {
      const size_t at = s.completion.rfind(delimiter);
      if (at != std::string::npos) {
        answer = s.completion.substr(at + delimiter.size());
        break;
      }
    }
    texts.push_back(std::move(answer));
  }
  return accuracy(samples, texts, entry_);
}

std::vector<std::optional<double>> CosineScaledReward::score(
    const std::vector<RewardSample>& samples) const {
  const std::vector<std::optional<double>> correct =
      accuracy(samples, completions_of(samples), entry_);
  std::vector<std::optional<double>> rewards;
  for (size_t i = 0; i < samples.size(); ++i) {
    if (!correct[i]) {
      rewards.emplace_back(std::nullopt);
      continue;
    }
    const double progress = std::min(
        static_cast<double>(samples[i].completion_ids.size()) / static_cast<double>(max_len_), 1.0);
    const double cosine = std::cos(progress * kPi);
    const bool right = *correct[i] != 0;
    const double min_value = right ? min_value_correct_ : max_value_wrong_;
    const double max_value = right ? max_value_correct_ : min_value_wrong_;
    // Python's order: min_value + ((0.5 * (max_value - min_value)) * (1.0 + cosine)).
    const double half_range = 0.5 * (max_value - min_value);
    const double scaled = half_range * (1.0 + cosine);
    rewards.emplace_back(min_value + scaled);
  }
  return rewards;
}

}  // namespace trainer::trl::builtin
