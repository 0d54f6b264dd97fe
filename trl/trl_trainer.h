// What every TRL trainer is on the Trainer (SFTTrainer, DPOTrainer and the next ones): TRL's
// metric bookkeeping (each metric's values since the last log, train and eval, logged as their
// means), the training tokens counted across the processes, the router load-balancing loss of a
// mixture of experts (router_aux_loss_coef), how a reference model is held (a frozen copy, or
// the model with its LoRA adapters off), the per-token log-probabilities a completion is scored
// by, and TRL's disable_dropout. A trainer adds its compute_loss and what else is its own.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "lib/models/lora.h"
#include "trainer/trainer.h"

namespace trainer::trl {

// TRL's self._metrics[mode]: each metric's values since the last log, in the order first
// recorded.
class TrlMetrics {
 public:
  // Appends a value (`training`: the train metrics, else eval's).
  void add(bool training, const std::string& name, double value);
  // Replaces the values with one (a running total, as TRL's num_tokens).
  void set(bool training, const std::string& name, double value);
  // The means of the metrics that have values into `logs` ("<prefix>_" before each name when
  // `prefix` is given: an evaluation's), then cleared.
  void log(nlohmann::ordered_json& logs, const std::string& prefix);

 private:
  using Values = std::vector<std::pair<std::string, std::vector<double>>>;
  std::vector<double>& values(bool training, const std::string& name);
  Values train_, eval_;
};

// TRL's disable_dropout_in_model: every dropout 0, LoRA's too.
void disable_dropout(models::Model& model);

// TRL's router_aux_loss_coef (SFTConfig, DPOConfig): the weight of a mixture of experts' router
// load-balancing loss, the model config's own when the argument is null (0 for a dense model);
// enabled for a mixture of experts whose weight is not 0. A weight given for a dense model is an
// InputError, as TRL raises one. With `write_config` (SFTTrainer), the model's config takes it as
// TRL writes it back: output_router_logits on when enabled, off otherwise, and the weight.
struct RouterAuxLoss {
  bool enabled = false;
  double coef = 0.0;
};
RouterAuxLoss resolve_router_aux_loss(const TrainingArguments& args, models::Model& model,
                                      bool write_config);

class TrlTrainer : public Trainer {
 public:
  using Trainer::Trainer;
  // TRL's MoE load-balancing loss: the trainer adds it to its loss times its weight, and logs it
  // as aux_loss.
  void set_router_aux_loss(RouterAuxLoss aux) { aux_ = aux; }

 protected:
  // TRL's log(): the means since the last log of each metric, "eval_" prefixed in an evaluation.
  void add_logged_metrics(nlohmann::ordered_json& logs, const std::string& prefix) override {
    metrics_.log(logs, prefix);
  }
  // The reference model: `ref` frozen (eval mode, no gradients, dropout off when
  // `no_dropout`), on the device under the run's autocast, never wrapped for training; null: the
  // policy with its LoRA adapters off.
  void set_reference_model(std::shared_ptr<models::Model> ref, bool no_dropout);
  const std::shared_ptr<models::Model>& reference_model() const { return ref_model_; }
  // `f` run on the reference, without gradients: the frozen copy when there is one, else `policy`
  // with its adapters off (PEFT's reference: its base, as training started).
  template <typename F>
  auto with_reference(models::Model& policy, F&& f) {
    torch::NoGradGuard no_grad;
    if (ref_model_) return f(*ref_model_);
    AdaptersOff off(policy);
    return f(policy);
  }
  // The model's scores of `batch`'s label tokens (its per-token log-probabilities, and the
  // statistics asked for by the batch's flags), with token_scores on. InputError when the model
  // does not score its tokens (not a Hugging Face causal language model).
  models::ModelOutput score_tokens(models::Model& model, data::Batch batch);

  // `sums` (any float tensor) summed over the processes, on the CPU in float64.
  torch::Tensor process_sum(const torch::Tensor& sums);
  // A scalar's mean over the processes.
  double process_mean(const torch::Tensor& value);
  // The training tokens so far after `batch_tokens` more (on every process alike); with
  // `count_on_after_resume`, a resumed run first takes its checkpoint's last logged num_tokens.
  double count_train_tokens(double batch_tokens, bool count_on_after_resume);
  double train_tokens() const { return total_train_tokens_; }

  TrlMetrics metrics_;
  RouterAuxLoss aux_;

 private:
  // While alive, the LoRA adapters of a model (if it has any) are off.
  class AdaptersOff {
   public:
    explicit AdaptersOff(models::Model& model);
    ~AdaptersOff();
    AdaptersOff(const AdaptersOff&) = delete;
    AdaptersOff& operator=(const AdaptersOff&) = delete;

   private:
    models::PeftModel* peft_;
  };

  std::shared_ptr<models::Model> ref_model_;
  double total_train_tokens_ = 0;
  bool tokens_restored_ = false;
};

}  // namespace trainer::trl
