// A run's per-step training curve: each optimization step's loss (the mean over processes),
// learning rate and gradient norm, kept apart from log_history (which holds what logging_steps
// lets through) and saved as loss_curve.npy; and TensorBoard's smoothing of it for the plot.
#pragma once

#include <string>
#include <vector>

#include "lib/report/plot.h"

namespace trainer::report {

// The curve's file in output_dir and in each checkpoint.
inline constexpr const char* kStepCurveFile = "loss_curve.npy";

// One row per optimization step, in step order. grad_norm is NaN where it was not computed
// (max_grad_norm 0); a step whose loss was not finite keeps that value.
struct StepCurve {
  std::vector<double> step, loss, learning_rate, grad_norm;

  size_t size() const { return step.size(); }
  void append(double at, double step_loss, double lr, double norm);
  // Drops the rows after `last_step` (a checkpoint's curve may run past its step when it is read
  // by a run that resumes from an earlier one).
  void keep_until(double last_step);
};

// The curve as a float64 .npy array of shape [steps, 4]: columns step, loss, learning_rate,
// grad_norm (numpy.load(path)[:, 1] is the loss).
std::string step_curve_npy(const StepCurve& curve);

// Reads a file step_curve_npy wrote. Throws InputError naming `path` when it cannot be read or is
// not such an array.
StepCurve read_step_curve(const std::string& path);

// TensorBoard's scalar smoothing: an exponential moving average with weight `weight` in [0, 1),
// debiased (divided by 1 - weight^n after n finite values) so that the first points are not pulled
// towards zero. Non-finite values pass through and do not enter the average; a constant series
// stays as it is.
std::vector<double> smooth(const std::vector<double>& values, double weight);

// Draws `curve` in `run`: its "loss" series becomes the per-step loss, raw (faint) and smoothed
// with `smoothing` over it, and a "learning_rate" series joins in its own panel. The evaluation
// series stay as they were.
void add_step_curve(PlotRun& run, const StepCurve& curve, double smoothing);

}  // namespace trainer::report
