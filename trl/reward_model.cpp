// Reward models as reward functions: the folder read as a classifier, each completion scored
// as TRL's _calculate_rewards scores it.
#include "trl/reward_model.h"

#include <algorithm>

#include <fmt/format.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/models/hf_pretrained.h"
#include "lib/tokenizers/chat_template.h"
#include "lib/tokenizers/tokenizer.h"
#include "trl/records.h"

namespace trainer::trl {
namespace {

class RewardModelScorer : public RewardScorer {
 public:
  RewardModelScorer(const std::string& folder, nlohmann::ordered_json kwargs)
      : folder_(folder), kwargs_(std::move(kwargs)) {
    std::string path = folder;
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    name_ = path.substr(path.find_last_of('/') + 1);
    const models::HfConfig config = models::read_hf_config(folder);
    if (!config.sequence_classification || config.num_labels != 1) {
      throw InputError(fmt::format(
          "argument reward_funcs: {} is {}; a reward model is a sequence classifier of one label "
          "(...ForSequenceClassification, num_labels 1: trainer reward makes one)",
          folder,
          config.sequence_classification
              ? fmt::format("a classifier of {} labels", config.num_labels)
              : fmt::format("not a sequence classifier (architectures: {})",
                            models::hf_architecture(config))));
    }
    if (!base::exists(base::join_path(folder, "tokenizer.json"))) {
      throw InputError(fmt::format(
          "argument reward_funcs: the reward model {} has no tokenizer.json (TRL loads its "
          "tokenizer from the same folder)",
          folder));
    }
    tokenizer_ = std::make_unique<tokenizers::Tokenizer>(tokenizers::Tokenizer::load(folder));
    chat_ = tokenizers::ChatTemplate::from_dir(folder);
    // TRL: the tokenizer's pad token, else its eos; the model pools at the last non-pad token.
    const auto pad =
        tokenizer_->pad_token_id() ? tokenizer_->pad_token_id() : tokenizer_->eos_token_id();
    if (!pad) {
      throw InputError(fmt::format(
          "argument reward_funcs: the reward model {}'s tokenizer has neither a pad_token nor an "
          "eos_token to pad with",
          folder));
    }
    models::HfConfig padded = config;
    padded.pad_token_id = *pad;
    padded.json["pad_token_id"] = *pad;
    pad_ = *pad;
    model_ = models::load_hf_model(folder, padded, "float32");
    model_->eval();
  }

  const std::string& name() const override { return name_; }

  std::vector<std::optional<double>> score(const std::vector<RewardRequest>& requests) override {
    const auto n = static_cast<int64_t>(requests.size());
    std::vector<std::vector<int32_t>> rows;
    size_t longest = 0;
    for (const RewardRequest& r : requests) {
      rows.push_back(ids_of(r));
      longest = std::max(longest, rows.back().size());
    }
    std::vector<std::optional<double>> out;
    if (n == 0) return out;
    torch::Tensor ids = torch::full({n, static_cast<int64_t>(longest)}, pad_, torch::kLong);
    torch::Tensor mask = torch::zeros_like(ids);
    for (int64_t i = 0; i < n; ++i) {
      const auto& row = rows[static_cast<size_t>(i)];
      const auto len = static_cast<int64_t>(row.size());
      ids[i].slice(0, 0, len).copy_(torch::tensor(std::vector<int64_t>(row.begin(), row.end())));
      mask[i].slice(0, 0, len).fill_(1);
    }
    torch::NoGradGuard no_grad;
    const torch::Tensor scores =
        model_->classifier_logits(ids, mask).select(1, 0).to(torch::kDouble);
    for (int64_t i = 0; i < n; ++i) out.emplace_back(scores[i].item<double>());
    return out;
  }

 private:
  // TRL's texts: a conversation (prompt + completion) through the reward model's template, or
  // the prompt and the completion joined; tokenized without special tokens.
  std::vector<int32_t> ids_of(const RewardRequest& r) const {
    if (r.prompt.is_array()) {
      if (!chat_) {
        throw InputError(
            fmt::format("argument reward_funcs: the reward model {} has no chat template for the "
                        "conversational prompts ({})",
                        folder_, r.where));
      }
      nlohmann::ordered_json messages = r.prompt;
      for (const auto& message : r.completion) messages.push_back(message);
      records::TemplateInputs inputs;
      if (kwargs_.is_object()) inputs.kwargs = kwargs_;
      return records::chat_ids(*chat_, *tokenizer_, messages, inputs, false, nullptr, r.where);
    }
    const std::string prompt = r.prompt.is_string() ? r.prompt.get<std::string>() : "";
    return tokenizer_->encode(prompt + r.completion_text, /*add_special_tokens=*/false);
  }

  std::string folder_, name_;
  nlohmann::ordered_json kwargs_;
  std::unique_ptr<tokenizers::Tokenizer> tokenizer_;
  std::optional<tokenizers::ChatTemplate> chat_;
  std::shared_ptr<models::HfCausalLM> model_;
  int64_t pad_ = 0;
};

}  // namespace

std::unique_ptr<RewardScorer> load_reward_model(
    const std::string& folder, const nlohmann::ordered_json& chat_template_kwargs) {
  return std::make_unique<RewardModelScorer>(folder, chat_template_kwargs);
}

}  // namespace trainer::trl
