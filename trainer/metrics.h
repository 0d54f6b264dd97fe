// What compute_metrics takes and gives (Transformers' EvalPrediction and a dict of floats), and
// the metrics of each task.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <torch/types.h>

#include "lib/data/dataset.h"
#include "trainer/trainer_state.h"

namespace trainer {

// What compute_metrics receives: every eval prediction (model outputs) and label, concatenated;
// with eval_do_concat_batches false, one tensor per batch in the *_batches lists instead (the
// concatenated ones then undefined). With batch_eval_metrics, one batch's at a time.
struct EvalPrediction {
  torch::Tensor predictions;
  torch::Tensor label_ids;
  // include_for_metrics "inputs": the model's main input ("input_ids", else "x"); "loss": each
  // example's batch loss (the loss of its batch, repeated over the batch's rows). Undefined
  // otherwise.
  // (Members past label_ids are initialised here so that EvalPrediction{predictions, label_ids}
  // leaves them to their defaults without GCC's -Wmissing-field-initializers.)
  torch::Tensor inputs{};
  torch::Tensor losses{};
  std::vector<torch::Tensor> prediction_batches{}, label_id_batches{}, input_batches{},
      loss_batches{};
  // batch_eval_metrics: false after each batch but the last, true after the last, when the
  // summary over every batch is returned (what earlier calls return is not used). nullopt: one
  // call with the whole set.
  std::optional<bool> compute_result{};

  // predictions (label_ids, ...), or with eval_do_concat_batches false its batches concatenated.
  torch::Tensor all_predictions() const;
  torch::Tensor all_label_ids() const;
};

using ComputeMetrics = std::function<Metrics(const EvalPrediction&)>;

// {"accuracy": fraction of argmax(predictions, 1) == label_ids}.
Metrics compute_accuracy(const EvalPrediction& prediction);
// {"rmse": root mean squared error, "mae": mean absolute error} of predictions (reshaped as the
// labels) against label_ids.
Metrics compute_regression_metrics(const EvalPrediction& prediction);
// The compute_metrics of a task: accuracy for classification, rmse and mae for regression, none
// for causal_lm (whose evaluation reports the loss and perplexity). Each also works batchwise
// (batch_eval_metrics): running sums over the batches, the result when compute_result is true,
// equal to the whole set's.
ComputeMetrics metrics_for_task(data::TaskKind task);
// The names an evaluation with metrics_for_task(task) reports, without the "eval_" prefix: loss,
// the task's metrics (perplexity for causal_lm), runtime, samples_per_second, steps_per_second.
std::vector<std::string> metric_names_for_task(data::TaskKind task);

}  // namespace trainer
