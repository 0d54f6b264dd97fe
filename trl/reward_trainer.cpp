// TRL 1.16's RewardTrainer: its data as a Dataset and a source, its collator, and compute_loss
// with the metrics it logs.
#include "trl/reward_trainer.h"

#include <algorithm>

#include <fmt/format.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/base/warn.h"
#include "lib/models/hf_causal_lm.h"

namespace trainer::trl {
namespace {

using torch::Tensor;

class RewardSource : public TrlSource<RewardData, RewardSourceOptions, RewardDataset> {
 public:
  explicit RewardSource(RewardSourceOptions options) : TrlSource(std::move(options)) {}

  data::DataInfo info() override {
    // A reward model: one score a sequence.
    data::DataInfo info = TrlSource::info();
    info.task = data::TaskKind::kRegression;
    info.num_labels = 1;
    return info;
  }

  data::DataCollator collator() const override {
    return reward_collator(options_.pad_token_id, options_.pad_to_multiple_of);
  }

 protected:
  // The margins travel with the rows when the data has them.
  std::shared_ptr<const data::Dataset> make_dataset(RewardData& prepared) const override {
    return std::make_shared<RewardDataset>(std::move(prepared.rows), prepared.margins);
  }

  std::optional<int64_t> max_length() const override { return std::nullopt; }

  std::string cache_settings(const std::string&,
                             std::optional<int64_t> max_samples) const override {
    const RewardDataOptions& d = options_.data;
    return fmt::format("reward|{}|{}|{}|{}", d.max_length.value_or(-1),
                       d.eos_token.value_or("\x01none"), max_samples.value_or(-1),
                       options_.chat_template ? options_.chat_template->name() : "");
  }

  RewardData prepare(const std::string&, const std::string& path,
                     std::optional<int64_t> max_samples) const override {
    return prepare_reward_dataset(split_records(path, max_samples), *options_.tokenizer,
                                  options_.chat(), options_.data, path);
  }

  void report(const std::string& split, const std::string& path, const RewardData& data,
              bool from_cache) const override {
    fmt::print(
        "Reward {} data: {} {}{}{} preference pairs from {} -> {} pairs, {} tokens{}\n", split,
        data.examples, data.shape == DpoShape::kConversational ? "conversational" : "plain",
        data.implicit_prompt ? " (implicit prompt)" : "", data.margins ? " with margins" : "", path,
        data.rows.size(), data.tokens, from_cache ? " (from the node's cache)" : "");
    if (data.dropped > 0) {
      base::warn(
          "{} of the {} pairs have a side longer than max_length {} tokens and are dropped (as "
          "TRL's RewardTrainer does: it never cuts them)",
          data.dropped, data.examples, options_.data.max_length.value_or(0));
    }
  }
};

}  // namespace

data::Example RewardDataset::get(int64_t index) const {
  const RewardRow& row = rows_.at(static_cast<size_t>(index));
  std::vector<int64_t> ids(row.chosen_ids.begin(), row.chosen_ids.end());
  ids.insert(ids.end(), row.rejected_ids.begin(), row.rejected_ids.end());
  data::Example example{torch::tensor(ids, torch::kLong),
                        torch::tensor({static_cast<int64_t>(row.chosen_ids.size()),
                                       static_cast<int64_t>(row.rejected_ids.size())},
                                      torch::kLong)};
  if (margins_) example.extra = torch::tensor({row.margin}, torch::kDouble);
  return example;
}

data::DataCollator reward_collator(int64_t pad_token_id,
                                   std::optional<int64_t> pad_to_multiple_of) {
  return [=](const std::vector<data::Example>& examples) {
    const int64_t B = static_cast<int64_t>(examples.size());
    std::vector<Tensor> rows(2 * B);
    int64_t length = 0;
    for (int64_t i = 0; i < B; ++i) {
      const Tensor& input = examples[i].input;
      const int64_t c = examples[i].target[0].item<int64_t>();
      rows[i] = input.slice(0, 0, c);
      rows[B + i] = input.slice(0, c);
      length = std::max({length, rows[i].size(0), rows[B + i].size(0)});
    }
    if (pad_to_multiple_of && *pad_to_multiple_of > 0) {
      length = (length + *pad_to_multiple_of - 1) / *pad_to_multiple_of * *pad_to_multiple_of;
    }
    Tensor input_ids = torch::full({2 * B, length}, pad_token_id, torch::kLong);
    Tensor attention = torch::zeros({2 * B, length}, torch::kLong);
    for (int64_t k = 0; k < 2 * B; ++k) {
      const int64_t n = rows[k].size(0);
      input_ids[k].slice(0, 0, n).copy_(rows[k]);
      attention[k].slice(0, 0, n).fill_(1);
    }
    data::Batch batch;
    batch["input_ids"] = input_ids;
    batch["attention_mask"] = attention;
    if (B > 0 && examples[0].extra.defined()) {
      std::vector<Tensor> margins;
      for (const auto& e : examples) margins.push_back(e.extra);
      batch["margin"] = torch::cat(margins).to(torch::kFloat);
    }
    return batch;
  };
}

std::unique_ptr<data::DataSource> make_reward_source(RewardSourceOptions options) {
  return std::make_unique<RewardSource>(std::move(options));
}

Tensor reward_loss(const Tensor& chosen, const Tensor& rejected, const Tensor& margin,
                   std::optional<double> center_coefficient) {
  Tensor gap = chosen - rejected;
  if (margin.defined()) gap = gap - margin.to(gap.scalar_type());
  Tensor loss = -torch::nn::functional::logsigmoid(gap).mean();
  if (center_coefficient) loss = loss + *center_coefficient * (chosen + rejected).square().mean();
  return loss;
}

RewardTrainer::RewardTrainer(std::shared_ptr<models::Model> model, TrainingArguments args,
                             std::shared_ptr<const data::Dataset> train_dataset,
                             std::shared_ptr<const data::Dataset> eval_dataset,
                             data::DataCollator collator)
    : TrlTrainer(std::move(model), std::move(args), std::move(train_dataset),
                 std::move(eval_dataset), std::move(collator)) {
  auto* hf = models::as_hf_causal_lm(this->model());
  if (!hf || !hf->is_classifier() || hf->config().num_labels != 1) {
    throw InputError(fmt::format(
        "trainer reward: the model must be a sequence classifier with one label (num_labels=1: "
        "one reward a sequence); it is {}",
        !hf ? std::string("not a Hugging Face model")
        : !hf->is_classifier()
            ? "a causal language model"
            : fmt::format("a classifier of {} labels", hf->config().num_labels)));
  }
  if (this->args().disable_dropout()) disable_dropout(this->model());
}

void RewardTrainer::record_metrics(const Tensor& rewards, const data::Batch& inputs,
                                   bool training) {
  torch::NoGradGuard no_grad;
  const int64_t B = rewards.size(0) / 2;
  const Tensor chosen = rewards.slice(0, 0, B), rejected = rewards.slice(0, B);
  // The tokens of this micro-batch over every process, then the rewards of every process.
  Accelerator& acc = accelerator();
  Tensor all = rewards.to(torch::kFloat);
  if (acc.num_processes() > 1) all = acc.gather(all.to(acc.device()));
  const Tensor sums = process_sum(torch::stack({inputs.at("attention_mask").sum().to(torch::kFloat),
                                                chosen.gt(rejected).to(torch::kFloat).mean(),
                                                (chosen - rejected).to(torch::kFloat).mean()}));
  const double* v = sums.data_ptr<double>();
  const double processes = static_cast<double>(acc.num_processes());
  const double num_tokens =
      training ? count_train_tokens(v[0], /*count_on_after_resume=*/true) : train_tokens();
  metrics_.set(training, "num_tokens", num_tokens);
  metrics_.add(training, "min_reward", all.min().item<double>());
  metrics_.add(training, "mean_reward", all.mean().item<double>());
  metrics_.add(training, "max_reward", all.max().item<double>());
  metrics_.add(training, "accuracy", v[1] / processes);
  metrics_.add(training, "margin", v[2] / processes);
}

LossOutput RewardTrainer::compute_loss(models::Model& model, const data::Batch& inputs,
                                       bool return_outputs, const Tensor& num_items_in_batch) {
  data::Batch batch;
  batch["input_ids"] = inputs.at("input_ids");
  batch["attention_mask"] = inputs.at("attention_mask");
  const Tensor rewards = model.forward(batch).logits;  // [2B, 1]
  const Tensor flat = rewards.squeeze(-1);
  const int64_t B = flat.size(0) / 2;
  const Tensor loss = reward_loss(flat.slice(0, 0, B), flat.slice(0, B),
                                  inputs.contains("margin") ? inputs.at("margin") : Tensor(),
                                  args().center_rewards_coefficient());
  record_metrics(flat.detach(), inputs, model.is_training());
  (void)num_items_in_batch;
  return {loss, return_outputs ? rewards.detach() : Tensor()};
}

PredictionOutput RewardTrainer::prediction_step(models::Model& model, const data::Batch& inputs,
                                                bool prediction_loss_only) {
  torch::NoGradGuard no_grad;
  LossOutput result = compute_loss(model, inputs, !prediction_loss_only);
  PredictionOutput out;
  out.loss = result.loss.detach();
  out.logits = result.outputs;
  return out;
}

}  // namespace trainer::trl
