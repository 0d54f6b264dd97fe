// TRL's RewardTrainer on the Trainer: the prepared preference pairs as a Dataset, TRL's
// DataCollatorForPreference of reward models (chosen rows then rejected rows, right-padded, the
// margins), and the trainer whose compute_loss scores both sides in one forward of a sequence
// classifier with one label and takes the Bradley-Terry loss and TRL's metrics.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "lib/data/dataset.h"
#include "lib/data/registry.h"
#include "trainer/trainer.h"
#include "trl/reward_data.h"
#include "trl/trl_source.h"
#include "trl/trl_trainer.h"

namespace trainer::trl {

// The pairs of prepare_reward_dataset: example i is chosen + rejected ids (int64) as input, their
// two lengths as target, and its margin (float64 [1]) as extra when the data has margins.
class RewardDataset : public RowDataset<RewardRow> {
 public:
  RewardDataset(std::vector<RewardRow> rows, bool margins)
      : RowDataset(std::move(rows)), margins_(margins) {}
  explicit RewardDataset(std::vector<RewardRow> rows) : RewardDataset(std::move(rows), false) {}
  data::Example get(int64_t index) const override;

 private:
  bool margins_;
};

// TRL's DataCollatorForPreference (reward_trainer.py): input_ids and attention_mask [2B, L], rows
// chosen for every pair then rejected, padded on the right with pad_token_id (to a multiple of
// pad_to_multiple_of); margin [B] float32 when the examples carry margins.
data::DataCollator reward_collator(int64_t pad_token_id, std::optional<int64_t> pad_to_multiple_of);

// What `trainer reward` trains on, found as `trainer dpo` finds its files.
struct RewardSourceOptions : TrlSourceOptions {
  RewardDataOptions data;
};
std::unique_ptr<data::DataSource> make_reward_source(RewardSourceOptions options);

// TRL 1.16's RewardTrainer loss of one micro-batch: the pairs' rewards `chosen` and `rejected`
// ([B]), mean softplus(-(chosen - rejected - margin)) (`margin` undefined: 0), plus
// `center_coefficient` times mean((chosen + rejected)^2) when given.
torch::Tensor reward_loss(const torch::Tensor& chosen, const torch::Tensor& rejected,
                          const torch::Tensor& margin, std::optional<double> center_coefficient);

class RewardTrainer : public TrlTrainer {
 public:
  // `model`: a sequence classifier with one label (TRL's AutoModelForSequenceClassification with
  // num_labels=1), whose pad_token_id the collator pads with. Dropout off with disable_dropout.
  RewardTrainer(std::shared_ptr<models::Model> model, TrainingArguments args,
                std::shared_ptr<const data::Dataset> train_dataset,
                std::shared_ptr<const data::Dataset> eval_dataset, data::DataCollator collator);

  LossOutput compute_loss(models::Model& model, const data::Batch& inputs,
                          bool return_outputs = false,
                          const torch::Tensor& num_items_in_batch = {}) override;
  // Transformers' prediction_step for a trainer that returns its loss (can_return_loss): the
  // loss, and the pairs' rewards [2B, 1] as the outputs.
  PredictionOutput prediction_step(models::Model& model, const data::Batch& inputs,
                                   bool prediction_loss_only) override;

 private:
  // TRL's metrics of the micro-batch (num_tokens, min/mean/max_reward, accuracy, margin).
  void record_metrics(const torch::Tensor& rewards, const data::Batch& inputs, bool training);
};

}  // namespace trainer::trl
