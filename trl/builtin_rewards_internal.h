// TRL's built-in reward classes (trl/builtin_rewards.cpp), for the entries that make them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trl/builtin_rewards.h"

namespace trainer::trl::builtin {

// think_format_reward: re.match(r"^<think>(?!.*<think>)(.*?)</think>.*$", content, re.DOTALL |
// re.MULTILINE): the text opens with <think>, holds no other <think>, and a </think> after it.
class ThinkFormatReward : public BuiltinReward {
 public:
  const std::string& name() const override { return name_; }
  std::vector<std::optional<double>> score(const std::vector<RewardSample>& samples) const override;

 private:
  std::string name_ = "think_format_reward";
};

// get_soft_overlong_punishment: DAPO's length penalty over the completion's token count.
class SoftOverlongPunishment : public BuiltinReward {
 public:
  SoftOverlongPunishment(int64_t max_completion_len, int64_t soft_punish_cache)
      : max_(max_completion_len), cache_(soft_punish_cache) {}
  const std::string& name() const override { return name_; }
  std::vector<std::optional<double>> score(const std::vector<RewardSample>& samples) const override;

 private:
  std::string name_ = "soft_overlong_punishment_reward";
  int64_t max_, cache_;
};

// get_repetition_penalty_reward: (1 - unique n-grams / n-grams) * max_penalty over the
// completion's token ids (TRL 1.16 counts token n-grams, not words).
class RepetitionPenalty : public BuiltinReward {
 public:
  RepetitionPenalty(int64_t ngram_size, double max_penalty)
      : n_(static_cast<size_t>(ngram_size)), max_penalty_(max_penalty) {}
  const std::string& name() const override { return name_; }
  std::vector<std::optional<double>> score(const std::vector<RewardSample>& samples) const override;

 private:
  std::string name_ = "repetition_penalty_reward";
  size_t n_;
  double max_penalty_;
};

// accuracy_reward: 1.0 where math_verify finds the completion's answer equal to the row's
// "solution", 0.0 where not, None where it finds nothing in the solution; `entry` the entry that
// named it, for messages.
class AccuracyReward : public BuiltinReward {
 public:
  explicit AccuracyReward(std::string entry) : entry_(std::move(entry)) {}
  const std::string& name() const override { return name_; }
  std::vector<std::optional<double>> score(const std::vector<RewardSample>& samples) const override;

 private:
  std::string name_ = "accuracy_reward";
  std::string entry_;
};

// reasoning_accuracy_reward: the answer after the last occurrence of the first delimiter found
// (in the list's order); 0.0 where none is.
class ReasoningAccuracyReward : public BuiltinReward {
 public:
  ReasoningAccuracyReward(std::vector<std::string> delimiters, std::string entry)
      : delimiters_(std::move(delimiters)), entry_(std::move(entry)) {}
  const std::string& name() const override { return name_; }
  std::vector<std::optional<double>> score(const std::vector<RewardSample>& samples) const override;

 private:
  std::string name_ = "reasoning_accuracy_reward";
  std::vector<std::string> delimiters_;
  std::string entry_;
};

// get_cosine_scaled_reward: accuracy_reward's correctness scaled by the completion's token count
// on a cosine from the short bound to the long one (the bounds swapped for a wrong answer).
class CosineScaledReward : public BuiltinReward {
 public:
  CosineScaledReward(std::string entry, int64_t max_len, double min_value_wrong,
                     double max_value_wrong, double min_value_correct, double max_value_correct)
      : entry_(std::move(entry)),
        max_len_(max_len),
        min_value_wrong_(min_value_wrong),
        max_value_wrong_(max_value_wrong),
        min_value_correct_(min_value_correct),
        max_value_correct_(max_value_correct) {}
  const std::string& name() const override { return name_; }
  std::vector<std::optional<double>> score(const std::vector<RewardSample>& samples) const override;

 private:
  std::string name_ = "cosine_scaled_reward";
  std::string entry_;
  int64_t max_len_;
  double min_value_wrong_, max_value_wrong_, min_value_correct_, max_value_correct_;
};

}  // namespace trainer::trl::builtin
