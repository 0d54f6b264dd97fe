// Reward models as reward functions (trl/reward_model.h): TRL 1.16's scores of the same prompts
// and completions in one batch (tests/reference/scripts/reward_model_scores.py): conversations
// through the reward model's template (with chat_template_kwargs), plain texts joined, its eos as
// the padding when the tokenizer has none (a completion ending in it scored before it); the
// metric's name; a folder that is not a reward model refused in one line.
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "tests/test_util.h"
#include "trl/reward_model.h"

namespace trainer::trl {
namespace {

using json = nlohmann::ordered_json;

TEST(RewardModel, ScoresAsTrlsCalculateRewards) {
  const std::string dir = testing::reference_dir("reward_model_scores");
  const std::string models = testing::reference_dir("reward_fixtures");
  ASSERT_FALSE(dir.empty());
  const json cases = json::parse(std::ifstream(dir + "/scores.json"));
  for (const auto& [name, c] : cases.items()) {
    const json kwargs =
        c["chat_template_kwargs"].is_null() ? json::object() : c["chat_template_kwargs"];
    auto scorer = load_reward_model(models + "/" + c["model"].get<std::string>(), kwargs);
    EXPECT_EQ(scorer->name(), c["name"].get<std::string>());
    std::vector<RewardRequest> requests;
    for (const auto& pair : c["pairs"]) {
      RewardRequest r;
      r.prompt = pair["prompt"];
      r.completion = pair["completion"];
      r.completion_text = pair["completion"].is_string()
                              ? pair["completion"].get<std::string>()
                              : pair["completion"][0]["content"].get<std::string>();
      r.where = name;
      requests.push_back(std::move(r));
    }
    const auto scores = scorer->score(requests);
    ASSERT_EQ(scores.size(), c["scores"].size()) << name;
    for (size_t i = 0; i < scores.size(); ++i) {
      ASSERT_TRUE(scores[i].has_value()) << name << " " << i;
      EXPECT_NEAR(*scores[i], c["scores"][i].get<double>(), 1e-5) << name << " row " << i;
    }
  }
}

TEST(RewardModel, AFolderThatIsNoRewardModelIsOneLine) {
  auto error_of = [](const std::string& folder) {
    try {
      load_reward_model(folder, json::object());
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string causal = testing::sft_fixtures_dir() + "/qwen3";
  EXPECT_EQ(error_of(causal),
            "argument reward_funcs: " + causal +
                " is not a sequence classifier (architectures: Qwen3ForCausalLM); a reward model "
                "is a sequence classifier of one label (...ForSequenceClassification, num_labels "
                "1: trainer reward makes one)");
  const std::string three = testing::reference_dir("seq_cls") + "/llama";
  EXPECT_EQ(error_of(three), "argument reward_funcs: " + three +
                                 " is a classifier of 3 labels; a reward model is a sequence "
                                 "classifier of one label (...ForSequenceClassification, "
                                 "num_labels 1: trainer reward makes one)");
  // Without a loader (outside grpo and rloo), a model folder is named as such.
  try {
    RewardFunctions functions(json::array({three}), 30);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "argument reward_funcs: \"" + three +
                                         "\" is a model folder, which only trainer grpo and "
                                         "trainer rloo score with");
  }
}

}  // namespace
}  // namespace trainer::trl
