// GRPO's reward functions as `reward_funcs` lists them: TRL's built-ins by name
// (trl/builtin_rewards.h), `exec:COMMAND` programs (trl/reward_program.h) and reward models
// (a classifier's folder, scored by a RewardScorer the caller loads: trl/reward_model.h), each
// scoring every completion of a generation (nullopt: TRL's None), named as TRL logs them
// (rewards/<name>/mean). Torch-free.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainer::trl {

class BuiltinReward;
class RewardProgram;

// One completion to score, with what TRL's reward functions receive.
struct RewardRequest {
  nlohmann::ordered_json prompt;      // the row's prompt (a text or a conversation)
  nlohmann::ordered_json completion;  // a text, or [{"role": "assistant", "content": text}]
  std::string completion_text;
  std::vector<int64_t> completion_ids;  // the EOS included, as TRL hands them over
  nlohmann::ordered_json row;           // the data row (its other columns: "solution", ...)
  int64_t global_step = 0;              // trainer_state's
  std::string where;                    // "data.jsonl row 3", for messages
};

// A reward function scored outside this file (a reward model, on LibTorch).
class RewardScorer {
 public:
  virtual ~RewardScorer() = default;
  // The name TRL logs it under (a model folder's last component).
  virtual const std::string& name() const = 0;
  virtual std::vector<std::optional<double>> score(const std::vector<RewardRequest>& requests) = 0;
};
// Loads the reward model of a folder (InputError, one line, for a folder that is not one).
using RewardModelLoader = std::function<std::unique_ptr<RewardScorer>(const std::string& folder)>;

class RewardFunctions {
 public:
  // `specs`: a list of entries (or one entry): a built-in's name or call, a JSON object naming
  // one, "exec:COMMAND", or a model folder's path (a folder holding config.json: loaded by
  // `load_model`). Programs start here, once, each reading JSON lines (kept alive until
  // destruction); `timeout_seconds` bounds each of their answers. InputError (one line naming the
  // entry) for an empty list, an unknown name, bad arguments, an empty command, or a model
  // folder without a loader.
  RewardFunctions(const nlohmann::ordered_json& specs, double timeout_seconds,
                  const RewardModelLoader& load_model = {});
  ~RewardFunctions();
  RewardFunctions(RewardFunctions&&) noexcept;

  // Each function's name as TRL logs it: a built-in's Python __name__
  // (soft_overlong_punishment_reward, ...), a program's file stem ("exec:python3 length.py" ->
  // length) or first word.
  const std::vector<std::string>& names() const { return names_; }
  size_t size() const { return names_.size(); }

  // scores[i][f]: function f's reward of request i. A program's failure is a
  // RewardProgramError naming it and the row; a built-in's missing column an InputError.
  std::vector<std::vector<std::optional<double>>> score(const std::vector<RewardRequest>& requests);

 private:
  struct Function {
    std::unique_ptr<BuiltinReward> builtin;
    std::unique_ptr<RewardProgram> program;
    std::unique_ptr<RewardScorer> model;
  };
  std::vector<Function> functions_;
  std::vector<std::string> names_;
};

// The name a program's metrics go by: the stem of the last word with a file extension, else the
// first word's base name ("python3 rewards/length.py --n 3" -> "length", "./score" -> "score").
std::string reward_program_name(const std::string& command);

}  // namespace trainer::trl
