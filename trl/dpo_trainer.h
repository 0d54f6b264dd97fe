// TRL's DPOTrainer on the Trainer: the prepared preference pairs as a Dataset, TRL's
// DataCollatorForPreference (chosen and rejected rows in one batch), and the trainer whose
// compute_loss scores both completions in one forward, scores them again with the reference (a
// frozen copy, the model with its LoRA adapters off, or log-probabilities computed once before
// training), and takes TRL's losses and metrics from the summed completion log-probabilities.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/data/registry.h"
#include "trainer/trainer.h"
#include "trl/dpo_data.h"
#include "trl/trl_source.h"
#include "trl/trl_trainer.h"

namespace trainer::trl {

// The pairs of prepare_dpo_dataset: example i is prompt + chosen + rejected ids (int64) as input,
// their three lengths as target, and once set_reference ran, its reference log-probabilities
// (float64 [2], chosen then rejected) as extra.
class DpoDataset : public RowDataset<DpoRow> {
 public:
  using RowDataset::RowDataset;
  data::Example get(int64_t index) const override;
  // The reference log-probabilities of every pair, [size(), 2] float64.
  void set_reference(torch::Tensor logps) { reference_ = std::move(logps); }
  const torch::Tensor& reference() const { return reference_; }

 private:
  torch::Tensor reference_;
};

// TRL's DataCollatorForPreference: rows prompt+chosen for every pair, then prompt+rejected,
// each cut to max_length (keep_start: its first tokens; keep_end: its last), padded on the right
// with pad_token_id (to a multiple of pad_to_multiple_of): input_ids, attention_mask and
// completion_mask [2B, L]; ref_chosen_logps and ref_rejected_logps [B] when the examples carry
// them.
data::DataCollator dpo_collator(int64_t pad_token_id, std::optional<int64_t> max_length,
                                const std::string& truncation_mode,
                                std::optional<int64_t> pad_to_multiple_of);

// What `trainer dpo` trains on: train_file / validation_file, or dataset_name, as `trainer sft`
// finds them, prepared as TRL prepares preference data with the model's tokenizer and chat
// template.
struct DpoSourceOptions : TrlSourceOptions {
  DpoDataOptions data;
};
std::unique_ptr<data::DataSource> make_dpo_source(DpoSourceOptions options);
// (Its options from a DPOConfig: source_options<DpoSourceOptions>(args, ..., "dpo"): DPO's data
// take TRL's common options and nothing of their own.)

// The losses of TRL 1.16's DPOTrainer._compute_loss for one micro-batch, from the pairs'
// summed completion log-probabilities under the policy and the reference ([B] each): each
// loss_type's per-pair loss, averaged over the pairs, times its weight, summed. `chosen_tokens`
// and `rejected_tokens` ([B], the completions' lengths) are IPO's and sigmoid_norm's
// normalisers; `sft_loss` the mean negative log-probability of the chosen tokens (the "sft"
// loss); `weights` WPO's per-pair weights (undefined: none).
struct DpoLossInputs {
  torch::Tensor chosen_logps, rejected_logps, ref_chosen_logps, ref_rejected_logps;
  torch::Tensor chosen_tokens, rejected_tokens;
  torch::Tensor sft_loss;
  torch::Tensor weights;
};
torch::Tensor dpo_loss(const DpoLossInputs& in, const TrainingArguments& args);

class DPOTrainer : public TrlTrainer {
 public:
  // `ref_model`: the frozen reference (null: the model itself with its LoRA adapters off, or,
  // with precompute_ref_log_probs, the reference log-probabilities computed here, now, from the
  // model's starting weights, for the training and evaluation pairs). Dropout is turned off
  // (disable_dropout).
  DPOTrainer(std::shared_ptr<models::Model> model, TrainingArguments args,
             std::shared_ptr<const data::Dataset> train_dataset,
             std::shared_ptr<const data::Dataset> eval_dataset, data::DataCollator collator,
             std::shared_ptr<models::Model> ref_model);

  LossOutput compute_loss(models::Model& model, const data::Batch& inputs,
                          bool return_outputs = false,
                          const torch::Tensor& num_items_in_batch = {}) override;
  // TRL's: the loss whether or not the batch has labels (it never has).
  PredictionOutput prediction_step(models::Model& model, const data::Batch& inputs,
                                   bool prediction_loss_only) override;

 private:
  // The summed completion log-probabilities of a batch's rows under `model` ([2B]: chosen
  // rows, then rejected), with the token scores behind them.
  struct Scored {
    torch::Tensor logps;
    models::TokenScores scores;
    torch::Tensor aux_loss;  // the policy's router load-balancing loss (router_aux_loss_coef)
  };
  Scored score(models::Model& model, const data::Batch& inputs, bool weighting,
               bool router_aux_loss = false);
  // TRL's metrics of the micro-batch (`shift_mask`: its completion tokens that are predicted),
  // recorded for the next log.
  void record_metrics(const DpoLossInputs& in, const Scored& policy, const data::Batch& inputs,
                      const torch::Tensor& shift_mask, bool training);
  // The reference's summed log-probabilities of the batch's rows, without gradients.
  torch::Tensor reference_logps(models::Model& model, const data::Batch& inputs);
  // precompute_ref_log_probs: every pair of `dataset` scored by the reference, each process a
  // share, the results summed across processes.
  void precompute(models::Model& model, const std::shared_ptr<const data::Dataset>& dataset,
                  int64_t batch_size);

  data::DataCollator collator_;
};

}  // namespace trainer::trl
