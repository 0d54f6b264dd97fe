// Reading runs for the plot: trainer_state.json's log_history as curves (Python's NaN read as
// null), the run's name, and `trainer plot`'s choice of output files.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"
#include "lib/report/curve.h"
#include "lib/report/plot.h"

namespace trainer::report {
namespace {

using json = nlohmann::ordered_json;

// Transformers' speed_metrics and friends: figures of the machine, not of the model.
bool is_speed_figure(const std::string& key) {
  for (const char* end : {"_runtime", "_per_second", "_compilation_time", "_preparation_time"}) {
    if (base::ends_with(key, end)) return true;
  }
  return key == "eval_samples";
}

bool is_plotted(const std::string& key) {
  return key == "loss" || (key.rfind("eval_", 0) == 0 && key.size() > 5 && !is_speed_figure(key));
}

// Python's json module writes non-finite floats as NaN, Infinity and -Infinity, which JSON
// lacks (Transformers' trainer_state.json holds them after a diverged step): null instead,
// outside strings.
std::string python_constants_as_null(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    out += c;
    if (in_string) {
      if (c == '\\' && i + 1 < text.size()) {
        out += text[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    in_string = c == '"';
    for (const std::string word : {"-Infinity", "Infinity", "NaN"}) {
      if (text.compare(i, word.size(), word) == 0) {
        out.back() = 'n';
        out += "ull";
        i += word.size() - 1;
        break;
      }
    }
  }
  return out;
}

// trainer_state.json, keeping only log_history and, in its entries, only plain values (nothing
// else is plotted, and nothing deep is built).
json parse_state(const std::string& text, const std::string& path) {
  auto parse = [](const std::string& source) {
    return json::parse(source, [](int depth, json::parse_event_t event, json& parsed) {
      if (depth == 1 && event == json::parse_event_t::key) return parsed == "log_history";
      return depth < 3 || (event != json::parse_event_t::object_start &&
                           event != json::parse_event_t::array_start);
    });
  };
  base::check_json_depth(text, path);
  try {
    return parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for 1e400
    try {
      return parse(python_constants_as_null(text));
    } catch (const json::exception&) {
      throw InputError(fmt::format("{} is not valid JSON: {}", path, base::json_error_text(e)));
    }
  }
}

// The run's name in the legend: training_args.json's run_name when there is one (a missing or
// unreadable file is no reason to refuse the plot), else the folder's name.
std::string run_label(const std::string& output_dir) {
  try {
    json args = base::read_json(base::join_path(output_dir, "training_args.json"));
    if (args.is_object() && args.contains("run_name") && args["run_name"].is_string() &&
        !args["run_name"].get<std::string>().empty()) {
      return args["run_name"].get<std::string>();
    }
  } catch (const InputError&) {
  }
  return folder_name(output_dir);
}

std::string resolved(const std::string& path) {
  char* real = ::realpath(path.c_str(), nullptr);
  if (!real) return path;
  std::string out = real;
  std::free(real);
  return out;
}

}  // namespace

PlotRun plot_run_from_log_history(const std::string& label, const json& log_history,
                                  const std::string& source) {
  if (!log_history.is_array()) {
    throw InputError(fmt::format("{}: log_history is {}, not a list of log entries", source,
                                 log_history.type_name()));
  }
  PlotRun run{label, source, {}};
  std::map<std::string, size_t> index;
  for (const json& entry : log_history) {
    if (!entry.is_object()) continue;
    auto step = entry.find("step");
    if (step == entry.end() || !step->is_number() || !std::isfinite(step->get<double>())) continue;
    for (const auto& [key, value] : entry.items()) {
      if (!is_plotted(key) || !value.is_number() || !std::isfinite(value.get<double>())) continue;
      auto [at, added] = index.emplace(key, run.series.size());
      if (added) run.series.push_back({key, {}});
      run.series[at->second].points.emplace_back(step->get<double>(), value.get<double>());
    }
  }
  // Training loss first, then evaluation loss, then the metrics as they came.
  auto rank = [](const PlotSeries& s) {
    return s.key == "loss" ? 0 : s.key == "eval_loss" ? 1 : 2;
  };
  std::stable_sort(run.series.begin(), run.series.end(),
                   [&](const PlotSeries& a, const PlotSeries& b) { return rank(a) < rank(b); });
  for (PlotSeries& series : run.series) {
    std::stable_sort(series.points.begin(), series.points.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  return run;
}

bool has_points(const PlotRun& run) {
  return std::any_of(run.series.begin(), run.series.end(),
                     [](const PlotSeries& s) { return !s.points.empty(); });
}

std::string folder_name(const std::string& dir) {
  std::string path = resolved(dir);
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  size_t slash = path.rfind('/');
  return slash == std::string::npos || path.size() == 1 ? path : path.substr(slash + 1);
}

PlotRun plot_run_from_state(const std::string& text, const std::string& path,
                            const std::string& label) {
  json state = parse_state(text, path);
  if (!state.is_object()) {
    throw InputError(fmt::format("{} holds {}, not a JSON object", path, state.type_name()));
  }
  auto history = state.find("log_history");
  if (history == state.end()) throw InputError(fmt::format("{} holds no log_history", path));
  PlotRun run = plot_run_from_log_history(label, *history, path);
  if (!has_points(run)) {
    throw InputError(fmt::format(
        "{}: nothing to plot: log_history holds no finite \"loss\" or \"eval_*\" value at a step "
        "(train with logging_steps below the run's steps, or evaluate)",
        path));
  }
  return run;
}

PlotRun read_plot_run(const std::string& output_dir, double smoothing) {
  struct stat info {};
  if (::stat(output_dir.c_str(), &info) != 0) {
    throw InputError(fmt::format("{}: {} (give the output_dir of a training run)",
                                 output_dir.empty() ? "\"\"" : output_dir,
                                 errno == ENOENT ? "no such folder" : std::strerror(errno)));
  }
  if (!S_ISDIR(info.st_mode)) {
    throw InputError(
        fmt::format("{} is not a folder (give the output_dir of a training run, which holds "
                    "trainer_state.json)",
                    output_dir));
  }
  const std::string path = base::join_path(output_dir, "trainer_state.json");
  if (::access(path.c_str(), F_OK) != 0) {
    if (errno != ENOENT) {  // a symlink loop, a forbidden folder: not a missing file
      throw InputError(fmt::format("{} cannot be read: {}", path, std::strerror(errno)));
    }
    throw InputError(
        fmt::format("{} does not exist (no training run has finished in {}; trainer plot reads it)",
                    path, output_dir));
  }
  PlotRun run = plot_run_from_state(base::read_file(path, SIZE_MAX, "", /*allow_pipes=*/false),
                                    path, run_label(output_dir));
  run.source = output_dir;
  // The per-step curve where the run kept one (runs from before it are drawn from log_history).
  const std::string curve = base::join_path(output_dir, kStepCurveFile);
  if (::access(curve.c_str(), F_OK) == 0) add_step_curve(run, read_step_curve(curve), smoothing);
  return run;
}

std::pair<std::string, std::string> write_plot(const std::vector<std::string>& output_dirs,
                                               const std::string& output, double smoothing) {
  if (output_dirs.empty()) throw InputError("trainer plot needs at least one OUTPUT_DIR");
  std::string svg_path = "plot.svg", html_path = "plot.html";
  struct stat info {};
  // An existing folder, or a path ending in '/' (a folder to make), gets plot.svg and plot.html.
  if (!output.empty() &&
      (output.back() == '/' || (::stat(output.c_str(), &info) == 0 && S_ISDIR(info.st_mode)))) {
    svg_path = base::join_path(output, svg_path);
    html_path = base::join_path(output, html_path);
  } else if (base::ends_with(output, ".svg")) {
    svg_path = output;
    html_path = output.substr(0, output.size() - 4) + ".html";
  } else if (base::ends_with(output, ".html")) {
    svg_path = output.substr(0, output.size() - 5) + ".svg";
    html_path = output;
  } else if (!output.empty()) {
    svg_path = output + ".svg";
    html_path = output + ".html";
  }
  // An unusable destination is the user's to fix, found before any run is read.
  base::check_writable_dir(base::parent_dir(svg_path), fmt::format("plot output -o {}:", svg_path));
  for (const std::string& path : {svg_path, html_path}) {
    if (base::is_directory(path)) {
      throw InputError(fmt::format("plot output -o: {} is a directory, not a file", path));
    }
  }
  std::vector<PlotRun> runs;
  std::vector<std::string> real;
  for (const std::string& dir : output_dirs) {
    runs.push_back(read_plot_run(dir, smoothing));
    real.push_back(resolved(dir));
    for (size_t i = 0; i + 1 < real.size(); ++i) {
      if (real[i] == real.back()) {
        throw InputError(fmt::format("{} is given twice{}; give each run once", dir,
                                     output_dirs[i] == dir ? "" : " (as " + output_dirs[i] + ")"));
      }
    }
  }
  // Runs of the same name are told apart by their folders as given.
  std::map<std::string, int> uses;
  for (const PlotRun& run : runs) ++uses[run.label];
  for (PlotRun& run : runs) {
    if (uses[run.label] > 1) run.label = run.source;
  }

  std::vector<std::string> labels;
  for (const PlotRun& run : runs) labels.push_back(run.label);
  const std::string title = fmt::format("Training curves: {}", fmt::join(labels, ", "));
  base::write_file_atomic(svg_path, plot_svg(runs, title));
  base::write_file_atomic(html_path, plot_html(base::base_name(svg_path), runs, title));
  return {svg_path, html_path};
}

}  // namespace trainer::report
