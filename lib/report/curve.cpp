// The per-step training curve: its .npy file and its smoothing for the plot.
#include "lib/report/curve.h"

#include <cmath>

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/io/npy.h"

namespace trainer::report {

namespace {

constexpr int64_t kColumns = 4;  // step, loss, learning_rate, grad_norm

}  // namespace

void StepCurve::append(double at, double step_loss, double lr, double norm) {
  step.push_back(at);
  loss.push_back(step_loss);
  learning_rate.push_back(lr);
  grad_norm.push_back(norm);
}

void StepCurve::keep_until(double last_step) {
  size_t keep = 0;
  while (keep < step.size() && step[keep] <= last_step) ++keep;
  for (auto* column : {&step, &loss, &learning_rate, &grad_norm}) column->resize(keep);
}

std::string step_curve_npy(const StepCurve& curve) {
  std::vector<double> values;
  values.reserve(curve.size() * kColumns);
  for (size_t i = 0; i < curve.size(); ++i) {
    values.insert(values.end(),
                  {curve.step[i], curve.loss[i], curve.learning_rate[i], curve.grad_norm[i]});
  }
  return io::npy_bytes("<f8", {static_cast<int64_t>(curve.size()), kColumns}, values.data(),
                       values.size() * sizeof(double));
}

StepCurve read_step_curve(const std::string& path) {
  const io::NpyMatrix matrix = io::read_npy_f8_matrix(
      base::read_file(path, size_t{1} << 30, "", /*allow_pipes=*/false), kColumns, path);
  StepCurve curve;
  for (int64_t r = 0; r < matrix.rows; ++r) {
    const double* row = matrix.values.data() + r * kColumns;
    if (!std::isfinite(row[0]) || (r > 0 && row[0] <= curve.step.back())) {
      throw InputError(
          fmt::format("{}: row {} has step {}, not after the row before it", path, r, row[0]));
    }
    curve.append(row[0], row[1], row[2], row[3]);
  }
  return curve;
}

std::vector<double> smooth(const std::vector<double>& values, double weight) {
  std::vector<double> out(values.size());
  bool constant = true;
  for (double v : values) constant = constant && v == values.front();
  double last = 0;
  int64_t count = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    if (constant || !std::isfinite(v)) {
      out[i] = v;
      continue;
    }
    last = last * weight + (1 - weight) * v;
    ++count;
    const double debias = weight == 1 ? 1 : 1 - std::pow(weight, static_cast<double>(count));
    out[i] = last / debias;
  }
  return out;
}

void add_step_curve(PlotRun& run, const StepCurve& curve, double smoothing) {
  if (curve.size() == 0) return;
  PlotSeries raw{"loss", {}, /*raw=*/true}, smoothed{"loss", {}}, lr{"learning_rate", {}};
  const std::vector<double> smooth_loss = smooth(curve.loss, smoothing);
  for (size_t i = 0; i < curve.size(); ++i) {
    if (std::isfinite(curve.loss[i])) {
      raw.points.emplace_back(curve.step[i], curve.loss[i]);
      smoothed.points.emplace_back(curve.step[i], smooth_loss[i]);
    }
    if (std::isfinite(curve.learning_rate[i])) {
      lr.points.emplace_back(curve.step[i], curve.learning_rate[i]);
    }
  }
  std::vector<PlotSeries> series = {std::move(raw), std::move(smoothed)};
  for (PlotSeries& kept : run.series) {
    if (kept.key != "loss") series.push_back(std::move(kept));
  }
  series.push_back(std::move(lr));
  run.series = std::move(series);
}

}  // namespace trainer::report
