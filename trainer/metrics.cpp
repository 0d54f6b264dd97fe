// compute_metrics of the tasks: accuracy for classification, RMSE and MAE for regression.
#include "trainer/metrics.h"

#include <algorithm>

namespace trainer {

Metrics compute_accuracy(const EvalPrediction& prediction) {
  torch::Tensor predicted = prediction.predictions.argmax(1);
  double correct = predicted.eq(prediction.label_ids).sum().item<double>();
  return {{"accuracy",
           correct / static_cast<double>(std::max<int64_t>(1, prediction.label_ids.numel()))}};
}

Metrics compute_regression_metrics(const EvalPrediction& prediction) {
  torch::Tensor labels = prediction.label_ids.to(torch::kDouble);
  torch::Tensor error = prediction.predictions.to(torch::kDouble).reshape(labels.sizes()) - labels;
  return {{"rmse", error.square().mean().sqrt().item<double>()},
          {"mae", error.abs().mean().item<double>()}};
}

ComputeMetrics metrics_for_task(data::TaskKind task) {
  switch (task) {
    case data::TaskKind::kClassification:
      return compute_accuracy;
    case data::TaskKind::kRegression:
      return compute_regression_metrics;
    case data::TaskKind::kCausalLM:
      return nullptr;
  }
  return nullptr;
}

std::vector<std::string> metric_names_for_task(data::TaskKind task) {
  std::vector<std::string> names = {"loss"};
  switch (task) {
    case data::TaskKind::kClassification:
      names.push_back("accuracy");
      break;
    case data::TaskKind::kRegression:
      names.insert(names.end(), {"rmse", "mae"});
      break;
    case data::TaskKind::kCausalLM:
      names.push_back("perplexity");
      break;
  }
  names.insert(names.end(), {"runtime", "samples_per_second", "steps_per_second"});
  return names;
}

}  // namespace trainer
