// What compute_metrics takes and gives (Transformers' EvalPrediction and a dict of floats), and
// the metrics of each task.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <torch/types.h>

#include "lib/data/dataset.h"
#include "trainer/trainer_state.h"

namespace trainer {

// What compute_metrics receives: every eval prediction (model outputs) and label, concatenated.
struct EvalPrediction {
  torch::Tensor predictions;
  torch::Tensor label_ids;
};

using ComputeMetrics = std::function<Metrics(const EvalPrediction&)>;

// {"accuracy": fraction of argmax(predictions, 1) == label_ids}.
Metrics compute_accuracy(const EvalPrediction& prediction);
// {"rmse": root mean squared error, "mae": mean absolute error} of predictions (reshaped as the
// labels) against label_ids.
Metrics compute_regression_metrics(const EvalPrediction& prediction);
// The compute_metrics of a task: accuracy for classification, rmse and mae for regression, none
// for causal_lm (whose evaluation reports the loss and perplexity).
ComputeMetrics metrics_for_task(data::TaskKind task);
// The names an evaluation with metrics_for_task(task) reports, without the "eval_" prefix: loss,
// the task's metrics (perplexity for causal_lm), runtime, samples_per_second, steps_per_second.
std::vector<std::string> metric_names_for_task(data::TaskKind task);

}  // namespace trainer
