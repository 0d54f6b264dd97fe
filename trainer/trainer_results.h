// What the Trainer's steps and runs return: compute_loss's LossOutput, prediction_step's
// PredictionOutput, predict()'s PredictionResult and train()'s TrainOutput.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "trainer/metrics.h"

namespace trainer {

// compute_loss's result: the loss, and the model's outputs when asked for them.
struct LossOutput {
  torch::Tensor loss;
  torch::Tensor outputs;
};

// prediction_step's result for one batch: the loss (when the batch has labels), and unless only
// the loss was asked for, the model's outputs and the labels.
struct PredictionOutput {
  torch::Tensor loss;
  torch::Tensor logits;
  torch::Tensor labels;
};

// Trainer::predict's result, as Transformers' PredictionOutput: the model's outputs for every
// example in order, the labels when the data has them, and the metrics ("test_loss",
// "test_accuracy", ... with the default prefix).
// With prediction_loss_only, only the metrics. With eval_do_concat_batches false, the outputs and
// labels one tensor per batch in the *_batches lists (predictions and label_ids undefined).
struct PredictionResult {
  torch::Tensor predictions;
  torch::Tensor label_ids;  // undefined when the batches have no labels
  Metrics metrics;
  std::vector<torch::Tensor> prediction_batches, label_id_batches;
};

struct TrainOutput {
  int64_t global_step = 0;
  double training_loss = 0;  // mean loss over all optimization steps
  Metrics metrics;           // train_runtime, train_samples_per_second, ..., train_loss, epoch
};

}  // namespace trainer
