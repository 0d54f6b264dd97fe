// TRL's SFTTrainer's compute_loss on LibTorch: the model's loss (cross-entropy or DFT), the MoE
// router loss, and the statistics TRL logs beside it (entropy, mean_token_accuracy, num_tokens).
#include "trl/sft_trainer.h"

namespace trainer::trl {

using torch::Tensor;

LossOutput SFTTrainer::compute_loss(models::Model& model, const data::Batch& inputs,
                                    bool return_outputs, const torch::Tensor& num_items_in_batch) {
  data::Batch batch = inputs;
  batch.token_stats = true;
  batch.router_aux_loss = aux_.enabled;
  batch.dft_loss = args().loss_type().front() == "dft";
  batch.label_smoothing = args().label_smoothing_factor();
  if (num_items_in_batch.defined() && !batch.num_items_in_batch.defined()) {
    batch.num_items_in_batch = num_items_in_batch;
  }
  // TRL divides by the label tokens clamped to at least 1: a batch with none (rows of a single
  // token) is a loss of 0, not 0 / 0.
  if (batch.num_items_in_batch.defined()) {
    batch.num_items_in_batch = batch.num_items_in_batch.clamp_min(1);
  } else {
    batch.num_items_in_batch = inputs.at("labels").slice(1, 1).ne(-100).sum().clamp_min(1);
  }
  models::ModelOutput out = model.forward(batch);
  const bool training = model.is_training();
  Tensor loss = out.loss;
  const bool aux = aux_.enabled && out.aux_loss.defined();
  if (aux && !(batch.label_smoothing > 0 && !batch.dft_loss)) {
    // TRL: the weighted router loss after the loss's scaling by the processes (which the
    // Trainer's training_step does here, hence the division), over the accumulation steps when
    // num_items_in_batch counts the window's tokens. The label smoother's path adds none.
    double scale = aux_.coef;
    if (num_items_in_batch.defined()) {
      scale /= static_cast<double>(current_gradient_accumulation_steps());
      const int64_t processes = accelerator().num_processes();
      if (training && processes > 1 && args().average_tokens_across_devices())
        scale /= static_cast<double>(processes);
    }
    loss = loss + scale * out.aux_loss;
  }
  // entropy sum, argmax hits, label tokens, and the batch's tokens, over the processes.
  Tensor tokens;
  if (inputs.contains("attention_mask")) {
    tokens = inputs.at("attention_mask").sum().to(torch::kFloat);
  } else {
    tokens =
        torch::scalar_tensor(static_cast<double>(inputs.at("input_ids").size(1)), torch::kFloat);
  }
  Tensor stats =
      out.token_stats.defined() ? out.token_stats.detach() : torch::zeros({3}, torch::kFloat);
  const Tensor all =
      process_sum(torch::cat({stats.to(torch::kFloat).cpu(), tokens.cpu().reshape({1})}));
  const double entropy = all[0].item<double>(), correct = all[1].item<double>(),
               count = all[2].item<double>();
  metrics_.add(training, "entropy", count > 0 ? entropy / count : 0.0);
  metrics_.add(training, "mean_token_accuracy", count > 0 ? correct / count : 0.0);
  metrics_.set(training, "num_tokens",
               training ? count_train_tokens(all[3].item<double>(), false) : train_tokens());
  if (aux) metrics_.add(training, "aux_loss", process_mean(out.aux_loss));
  return {loss, return_outputs ? out.logits : Tensor()};
}

}  // namespace trainer::trl
