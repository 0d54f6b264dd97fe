// A reward model as one of GRPO's and RLOO's reward_funcs: a sequence classifier's folder of one
// label (`trainer reward`'s output, or a Hub reward model) scoring each prompt + completion as
// TRL 1.16's GRPOTrainer._calculate_rewards does: conversations rendered by the reward model's
// own chat template (with the run's chat_template_kwargs), texts joined, tokenized without
// special tokens, right-padded with its pad token (its eos when it has none), the score at each
// row's last token that is not padding.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "trl/rewards.h"

namespace trainer::trl {

// The reward model of `folder` on the CPU, in float32 (TRL's dtype for a reward model named by
// path). Throws InputError, one line naming the folder, for a folder that is not a sequence
// classifier, one of more than one label, one without a tokenizer, or conversations without a
// chat template (said when the first conversation comes).
std::unique_ptr<RewardScorer> load_reward_model(const std::string& folder,
                                                const nlohmann::ordered_json& chat_template_kwargs);

}  // namespace trainer::trl
