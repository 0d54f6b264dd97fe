// TRL 1.16's built-in reward functions (trl/rewards: think_format_reward, accuracy_reward,
// reasoning_accuracy_reward, get_cosine_scaled_reward, get_repetition_penalty_reward,
// get_soft_overlong_punishment) for `trainer grpo`, torch-free: each scores a batch of completions
// as TRL's does, None (nullopt) where TRL's returns None; named from a config entry as TRL's grpo
// script and a Python call name them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainer::trl {

// One completion as the reward functions see it.
struct RewardSample {
  std::string completion;               // its text (for a conversation: its assistant content)
  std::vector<int64_t> completion_ids;  // its token ids
  const nlohmann::ordered_json* row =
      nullptr;  // the data set's row: its other columns ("solution")
};

class BuiltinReward {
 public:
  virtual ~BuiltinReward() = default;
  // As TRL logs it (rewards/<name>/mean): the Python function's __name__ ("accuracy_reward",
  // "soft_overlong_punishment_reward", "repetition_penalty_reward", "cosine_scaled_reward").
  virtual const std::string& name() const = 0;
  // One reward per sample; nullopt is TRL's None (accuracy rewards: a solution math_verify finds
  // nothing in). InputError naming the column for a row without a text "solution" (the accuracy
  // rewards).
  virtual std::vector<std::optional<double>> score(
      const std::vector<RewardSample>& samples) const = 0;
};

// The built-ins by the names TRL's grpo script takes, in the order of the error messages.
const std::vector<std::string>& builtin_reward_names();

// Whether `spec` names a built-in (a string whose name, before any "(", is one; an object whose
// "name" is one).
bool is_builtin_reward(const nlohmann::ordered_json& spec);

// The reward `spec` names:
// - a string: a name ("think_format_reward"; "get_soft_overlong_punishment" alone is TRL's grpo
//   script's max_completion_len=1280, soft_punish_cache=256), or a Python call of one with
//   keyword or positional arguments: numbers, strings, True/False/None and lists of strings
//   ("get_soft_overlong_punishment(max_completion_len=512, soft_punish_cache=64)",
//   "reasoning_accuracy_reward(reasoning_delimiters=['</answer>'])");
// - an object: {"name": "...", and the parameters by name}.
// The parameters (TRL's defaults): get_soft_overlong_punishment(max_completion_len: int,
// soft_punish_cache: int); get_repetition_penalty_reward(ngram_size: int = 3, max_penalty: float
// = -1.0); get_cosine_scaled_reward(max_len: int, min_value_wrong = -1.0, max_value_wrong = -0.5,
// min_value_correct = 0.5, max_value_correct = 1.0); reasoning_accuracy_reward(
// reasoning_delimiters: list[str] | None = None, i.e. ["</think>"]); the others none.
// Throws InputError with one line naming the entry, the wrong value and what is allowed (the
// names, or the function's parameters).
std::unique_ptr<BuiltinReward> make_builtin_reward(const nlohmann::ordered_json& spec);

}  // namespace trainer::trl
