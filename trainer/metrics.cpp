// compute_metrics of the tasks: accuracy for classification, RMSE and MAE for regression, over
// the whole set or batchwise (batch_eval_metrics: running sums, the result on the last batch).
#include "trainer/metrics.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include <torch/torch.h>

namespace trainer {
namespace {

torch::Tensor whole(const torch::Tensor& tensor, const std::vector<torch::Tensor>& batches) {
  if (tensor.defined() || batches.empty()) return tensor;
  return torch::cat(batches);
}

// Correct predictions and examples (classification).
std::pair<double, double> accuracy_counts(const EvalPrediction& prediction) {
  torch::Tensor labels = prediction.all_label_ids();
  torch::Tensor predicted = prediction.all_predictions().argmax(1);
  return {predicted.eq(labels).sum().item<double>(), static_cast<double>(labels.numel())};
}

// Sums of squared and absolute errors, and the count (regression).
struct ErrorSums {
  double squared = 0, absolute = 0, count = 0;
};
ErrorSums error_sums(const EvalPrediction& prediction) {
  torch::Tensor labels = prediction.all_label_ids().to(torch::kDouble);
  torch::Tensor error =
      prediction.all_predictions().to(torch::kDouble).reshape(labels.sizes()) - labels;
  return {error.square().sum().item<double>(), error.abs().sum().item<double>(),
          static_cast<double>(labels.numel())};
}

}  // namespace

torch::Tensor EvalPrediction::all_predictions() const {
  return whole(predictions, prediction_batches);
}
torch::Tensor EvalPrediction::all_label_ids() const { return whole(label_ids, label_id_batches); }

Metrics compute_accuracy(const EvalPrediction& prediction) {
  auto [correct, total] = accuracy_counts(prediction);
  return {{"accuracy", correct / std::max(1.0, total)}};
}

Metrics compute_regression_metrics(const EvalPrediction& prediction) {
  const ErrorSums sums = error_sums(prediction);
  const double n = std::max(1.0, sums.count);
  return {{"rmse", std::sqrt(sums.squared / n)}, {"mae", sums.absolute / n}};
}

ComputeMetrics metrics_for_task(data::TaskKind task) {
  switch (task) {
    case data::TaskKind::kClassification: {
      auto sums = std::make_shared<std::pair<double, double>>();
      return [sums](const EvalPrediction& prediction) -> Metrics {
        if (!prediction.compute_result) return compute_accuracy(prediction);
        auto [correct, total] = accuracy_counts(prediction);
        sums->first += correct;
        sums->second += total;
        if (!*prediction.compute_result) return {};
        Metrics result{{"accuracy", sums->first / std::max(1.0, sums->second)}};
        *sums = {};
        return result;
      };
    }
    case data::TaskKind::kRegression: {
      auto sums = std::make_shared<ErrorSums>();
      return [sums](const EvalPrediction& prediction) -> Metrics {
        if (!prediction.compute_result) return compute_regression_metrics(prediction);
        const ErrorSums batch = error_sums(prediction);
        sums->squared += batch.squared;
        sums->absolute += batch.absolute;
        sums->count += batch.count;
        if (!*prediction.compute_result) return {};
        const double n = std::max(1.0, sums->count);
        Metrics result{{"rmse", std::sqrt(sums->squared / n)}, {"mae", sums->absolute / n}};
        *sums = {};
        return result;
      };
    }
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
