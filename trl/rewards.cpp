// GRPO's reward functions: the built-ins and the programs of reward_funcs, scored in turn.
#include "trl/rewards.h"

#include <sstream>

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/json_text.h"
#include "trl/builtin_rewards.h"
#include "trl/reward_program.h"

namespace trainer::trl {

std::string reward_program_name(const std::string& command) {
  std::istringstream words(command);
  std::string word, first, with_extension;
  while (words >> word) {
    if (first.empty()) first = word;
    const std::string base =
        word.substr(word.find_last_of('/') == std::string::npos ? 0 : word.find_last_of('/') + 1);
    const auto dot = base.find_last_of('.');
    if (dot != std::string::npos && dot > 0 && dot + 1 < base.size()) with_extension = base;
  }
  if (!with_extension.empty()) return with_extension.substr(0, with_extension.find_last_of('.'));
  const auto slash = first.find_last_of('/');
  return slash == std::string::npos ? first : first.substr(slash + 1);
}

RewardFunctions::RewardFunctions(const nlohmann::ordered_json& specs, double timeout_seconds,
                                 const RewardModelLoader& load_model) {
  nlohmann::ordered_json list = specs;
  if (list.is_string() || list.is_object()) list = nlohmann::ordered_json::array({list});
  if (!list.is_array() || list.empty()) {
    throw InputError(fmt::format(
        "argument reward_funcs: {} (give a list of rewards: TRL's built-ins by name, e.g. "
        "think_format_reward, exec:COMMAND programs, or reward model folders)",
        list.is_array() ? "no reward functions" : base::shown(specs)));
  }
  for (const auto& entry : list) {
    Function f;
    if (entry.is_string() && entry.get<std::string>().rfind("exec:", 0) == 0) {
      const std::string command = entry.get<std::string>().substr(5);
      if (command.find_first_not_of(" \t") == std::string::npos) {
        throw InputError(
            "argument reward_funcs: \"exec:\" names no command (give exec:COMMAND, run through "
            "/bin/sh in the working directory)");
      }
      f.program = std::make_unique<RewardProgram>(command, timeout_seconds);
      names_.push_back(reward_program_name(command));
    } else if (entry.is_string() && base::is_directory(entry.get<std::string>()) &&
               base::exists(base::join_path(entry.get<std::string>(), "config.json"))) {
      if (!load_model) {
        throw InputError(fmt::format(
            "argument reward_funcs: {} is a model folder, which only trainer grpo and trainer "
            "rloo score with",
            base::shown(entry)));
      }
      f.model = load_model(entry.get<std::string>());
      names_.push_back(f.model->name());
    } else {
      f.builtin = make_builtin_reward(entry);
      names_.push_back(f.builtin->name());
    }
    functions_.push_back(std::move(f));
  }
}

RewardFunctions::~RewardFunctions() = default;
RewardFunctions::RewardFunctions(RewardFunctions&&) noexcept = default;

std::vector<std::vector<std::optional<double>>> RewardFunctions::score(
    const std::vector<RewardRequest>& requests) {
  std::vector<std::vector<std::optional<double>>> out(
      requests.size(), std::vector<std::optional<double>>(functions_.size()));
  for (size_t f = 0; f < functions_.size(); ++f) {
    std::vector<std::optional<double>> scores;
    if (functions_[f].model) {
      scores = functions_[f].model->score(requests);
    } else if (functions_[f].builtin) {
      std::vector<RewardSample> samples;
      samples.reserve(requests.size());
      for (const auto& r : requests)
        samples.push_back({r.completion_text, r.completion_ids, &r.row});
      scores = functions_[f].builtin->score(samples);
    } else {
      std::vector<nlohmann::ordered_json> lines;
      std::vector<std::string> where;
      for (const auto& r : requests) {
        nlohmann::ordered_json line = nlohmann::ordered_json::object();
        line["prompt"] = r.prompt;
        line["completion"] = r.completion;
        line["completion_ids"] = r.completion_ids;
        if (r.row.is_object()) {
          for (const auto& [key, value] : r.row.items()) {
            if (key != "prompt" && key != "completion" && key != "completion_ids")
              line[key] = value;
          }
        }
        line["trainer_state"] = {{"global_step", r.global_step}};
        lines.push_back(std::move(line));
        where.push_back(r.where);
      }
      scores = functions_[f].program->score(lines, where);
    }
    for (size_t i = 0; i < requests.size() && i < scores.size(); ++i) out[i][f] = scores[i];
  }
  return out;
}

}  // namespace trainer::trl
