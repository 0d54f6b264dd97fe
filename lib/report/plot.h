// Pictures of a run: the curves of trainer_state.json's log_history (training loss, evaluation
// loss and each evaluation metric against the global step), or of the per-step loss curve where a
// run kept one (curve.h), drawn as a hand-written SVG, one panel per quantity with several runs
// overlaid, and a small HTML page around it. Torch-free and
// deterministic: the same runs give the same bytes.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainer::report {

// One quantity of one run: (global step, value) pairs with finite values, ordered by step.
struct PlotSeries {
  std::string key;  // "loss" (training), "eval_loss", "eval_accuracy", "learning_rate", ...
  std::vector<std::pair<double, double>> points;
  bool raw = false;  // the per-step values under their smoothed curve: drawn faint and thin
};

// A run's curves, under its name in the legend.
struct PlotRun {
  std::string label;
  std::string source;              // the folder (or file) it was read from, for the page
  std::vector<PlotSeries> series;  // "loss" first when present, then as log_history has them
};

// The curves of `log_history` (a JSON array of log entries): each entry's "loss" and "eval_loss" /
// "eval_<metric>" at its "step". Values that are not finite numbers (NaN is written as null),
// entries without a numeric step and the speed figures (eval_runtime, eval_*_per_second, ...) are
// left out. Throws InputError "<source>: ..." when log_history is not an array.
PlotRun plot_run_from_log_history(const std::string& label,
                                  const nlohmann::ordered_json& log_history,
                                  const std::string& source);

// True when `run` holds at least one point.
bool has_points(const PlotRun& run);

// The name of the folder `dir` (resolved, so that "." and "run/" are named too).
std::string folder_name(const std::string& dir);

// The curves of a trainer_state.json's text, read from `path` (Python's NaN and Infinity read as
// null). Throws InputError, one line naming `path`: not valid JSON, not an object, no log_history,
// or nothing to plot in it.
PlotRun plot_run_from_state(const std::string& text, const std::string& path,
                            const std::string& label);

// TensorBoard's default smoothing weight, for the per-step loss curve.
inline constexpr double kDefaultSmoothing = 0.6;

// Reads output_dir/trainer_state.json (plot_run_from_state), named in the legend by
// training_args.json's run_name when set, else by the folder's name, and output_dir's
// loss_curve.npy where there is one (its per-step loss smoothed with `smoothing`, see curve.h).
// Throws InputError, one line naming the folder or the file: missing, not a folder, no
// trainer_state.json, a damaged loss_curve.npy, or as plot_run_from_state.
PlotRun read_plot_run(const std::string& output_dir, double smoothing = kDefaultSmoothing);

// The SVG: a title, a legend naming each run (by its colour) and the line styles (training solid,
// evaluation dashed with a dot at each point), then one panel per quantity: "loss" (training and
// evaluation loss), then each evaluation metric, with axes, ticks and labels. A run without
// points is left out; with no points at all, a picture saying that nothing was logged.
std::string plot_svg(const std::vector<PlotRun>& runs, const std::string& title);

// An HTML page showing `svg_file` (a path relative to the page) at the size plot_svg gives
// `runs`, at the top left of the page, and naming the runs' sources under it.
std::string plot_html(const std::string& svg_file, const std::vector<PlotRun>& runs,
                      const std::string& title);

// `trainer plot`: reads each output_dir (read_plot_run; a folder given twice is an InputError)
// and writes the SVG and the HTML page beside it. `output` names them: "" for plot.svg and
// plot.html in the current folder; an existing folder for plot.svg and plot.html in it; a path
// ending in .svg or .html for that file and the other beside it with the other ending; any other
// path gets both endings added. Returns the paths written, SVG first.
std::pair<std::string, std::string> write_plot(const std::vector<std::string>& output_dirs,
                                               const std::string& output,
                                               double smoothing = kDefaultSmoothing);

}  // namespace trainer::report
