// The SVG of log_history's curves, read back as text: which panels and series it draws, how many
// vertices each curve has, the legend, what it leaves out (NaN, infinities, speed figures), a lone
// point, runs of different lengths, extreme values, escaping, and the same bytes every time.
#include <cmath>
#include <fstream>
#include <limits>
#include <regex>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "lib/report/curve.h"
#include "lib/report/plot.h"
#include "tests/test_util.h"

namespace trainer::report {
namespace plot_test {

using json = nlohmann::ordered_json;
using testing::TempDir;

// A log_history: training logs of `loss` at steps `every`, 2*every, ..., and an evaluation after
// each `eval_every` of them (with Transformers' speed figures beside the metrics).
json history(int logs, int every, int eval_every) {
  json out = json::array();
  for (int i = 1; i <= logs; ++i) {
    out.push_back({{"loss", 2.0 / i},
                   {"grad_norm", 1.5},
                   {"learning_rate", 1e-3},
                   {"epoch", i * 0.1},
                   {"step", i * every}});
    if (i % eval_every == 0) {
      out.push_back({{"eval_loss", 2.5 / i},
                     {"eval_accuracy", 1.0 - 1.0 / (i + 1)},
                     {"eval_runtime", 0.5},
                     {"eval_samples_per_second", 2000.0},
                     {"eval_steps_per_second", 30.0},
                     {"epoch", i * 0.1},
                     {"step", i * every}});
    }
  }
  out.push_back(
      {{"train_runtime", 9.0}, {"train_loss", 1.0}, {"epoch", 1.0}, {"step", logs * every}});
  return out;
}

PlotRun make_run(const std::string& label, const json& log_history) {
  return plot_run_from_log_history(label, log_history, label + "/trainer_state.json");
}

// The points of the polyline of `run`'s series `key` in the panel of `quantity`, as x, y pairs.
std::vector<std::pair<double, double>> curve(const std::string& svg, const std::string& quantity,
                                             const std::string& run, const std::string& key) {
  size_t panel = svg.find("<g class=\"panel\" data-quantity=\"" + quantity + "\"");
  if (panel == std::string::npos) return {};
  size_t end = svg.find("<g class=\"panel\"", panel + 1);
  std::string text = svg.substr(panel, end == std::string::npos ? std::string::npos : end - panel);
  std::smatch match;
  std::regex re("<polyline [^>]*data-run=\"" + run + "\" data-key=\"" + key +
                "\"[^>]* points=\"([^\"]*)\"/>");
  if (!std::regex_search(text, match, re)) return {};
  std::vector<std::pair<double, double>> points;
  std::istringstream in(match[1].str());
  std::string pair;
  while (in >> pair) {
    size_t comma = pair.find(',');
    points.emplace_back(std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1)));
  }
  return points;
}

TEST(Plot, OnePanelPerQuantityAndOneCurvePerRunAndSeries) {
  std::vector<PlotRun> runs = {make_run("long", history(6, 10, 3)),
                               make_run("short", history(4, 10, 2))};
  std::string svg = plot_svg(runs, "two runs");
  // The loss panel first, then the one metric; no panel for speed figures or the summary.
  EXPECT_EQ(testing::matches(svg, "<g class=\"panel\" data-quantity=\"([^\"]*)\""),
            (std::vector<std::string>{"loss", "eval_accuracy"}));
  EXPECT_EQ(testing::matches(svg, "class=\"legend-entry\" data-run=\"([^\"]*)\""),
            (std::vector<std::string>{"long", "short"}));
  EXPECT_EQ(testing::matches(svg, "class=\"legend-entry\" data-style=\"([^\"]*)\""),
            (std::vector<std::string>{"train", "eval"}));
  EXPECT_EQ(curve(svg, "loss", "long", "loss").size(), 6u);
  EXPECT_EQ(curve(svg, "loss", "long", "eval_loss").size(), 2u);
  EXPECT_EQ(curve(svg, "eval_accuracy", "long", "eval_accuracy").size(), 2u);
  EXPECT_EQ(curve(svg, "loss", "short", "loss").size(), 4u);
  EXPECT_EQ(curve(svg, "loss", "short", "eval_loss").size(), 2u);
  EXPECT_EQ(curve(svg, "eval_accuracy", "short", "eval_accuracy").size(), 2u);
  EXPECT_EQ(testing::count(svg, "<polyline "), 6u);
  EXPECT_EQ(testing::count(svg, "class=\"series train\""), 2u);
  EXPECT_EQ(testing::count(svg, "class=\"series eval\""), 4u);
  // A dot at each evaluation: 2 + 2 + 2 + 2, plus the eval style's sample in the legend.
  EXPECT_EQ(testing::count(svg, "<circle "), 9u);
  // One colour per run, on its legend entry and every curve of it.
  auto strokes = testing::matches(
      svg, "data-run=\"long\" data-key=\"[^\"]*\" fill=\"none\" stroke=\"([^\"]*)\"");
  ASSERT_EQ(strokes.size(), 3u);
  EXPECT_EQ(strokes[0], strokes[1]);
  EXPECT_EQ(strokes[0], strokes[2]);
  auto others = testing::matches(
      svg, "data-run=\"short\" data-key=\"[^\"]*\" fill=\"none\" stroke=\"([^\"]*)\"");
  ASSERT_EQ(others.size(), 3u);
  EXPECT_NE(others[0], strokes[0]);
  EXPECT_NE(svg.find("fill=\"" + strokes[0] + "\"/><text"), std::string::npos);
  // Axes: labels and ticks on each panel.
  EXPECT_EQ(testing::count(svg, "class=\"x-label\""), 2u);
  EXPECT_EQ(testing::count(svg, ">step</text>"), 2u);
  EXPECT_EQ(testing::count(svg, ">accuracy</text>"), 1u);
  EXPECT_GE(testing::count(svg, "text-anchor=\"end\" stroke=\"none\">"), 6u);  // y ticks' labels
  EXPECT_EQ(testing::count(svg, ">60</text>"), 2u);  // the last step, on x
  // The steps climb from left to right.
  auto points = curve(svg, "loss", "long", "loss");
  for (size_t i = 1; i < points.size(); ++i) EXPECT_GT(points[i].first, points[i - 1].first);
}

TEST(Plot, SameRunsGiveTheSameBytes) {
  std::vector<PlotRun> runs = {make_run("a", history(50, 5, 10)), make_run("b", history(7, 3, 2))};
  std::string first = plot_svg(runs, "t");
  std::vector<PlotRun> again = {make_run("a", history(50, 5, 10)), make_run("b", history(7, 3, 2))};
  EXPECT_EQ(plot_svg(again, "t"), first);
  EXPECT_EQ(plot_html("plot.svg", again, "t"), plot_html("plot.svg", runs, "t"));
}

TEST(Plot, NonFiniteAndNonNumericValuesAreLeftOut) {
  const double inf = std::numeric_limits<double>::infinity();
  json log = json::array({
      {{"loss", 1.0}, {"step", 1}},
      {{"loss", std::nan("")}, {"step", 2}},
      {{"loss", inf}, {"step", 3}},
      {{"loss", -inf}, {"step", 4}},
      {{"loss", nullptr}, {"step", 5}},
      {{"loss", "0.5"}, {"step", 6}},
      {{"loss", true}, {"step", 7}},
      {{"loss", 0.5}},                 // no step
      {{"loss", 0.5}, {"step", "8"}},  // a step that is not a number
      {{"loss", 0.5}, {"step", inf}},  // nor finite
      {{"loss", 0.25}, {"step", 9.0}},
      {{"eval_loss", std::nan("")}, {"eval_accuracy", 0.5}, {"step", 9}},
      "not an entry",
      {{"eval_runtime", 1.0}, {"eval_samples_per_second", 1.0}, {"step", 9}},
  });
  PlotRun run = make_run("r", log);
  ASSERT_EQ(run.series.size(), 2u);
  EXPECT_EQ(run.series[0].key, "loss");
  EXPECT_EQ(run.series[0].points,
            (std::vector<std::pair<double, double>>{{1.0, 1.0}, {9.0, 0.25}}));
  EXPECT_EQ(run.series[1].key, "eval_accuracy");
  std::string svg = plot_svg({run}, "t");
  EXPECT_EQ(curve(svg, "loss", "r", "loss").size(), 2u);
  EXPECT_EQ(testing::count(svg, "eval_runtime"), 0u);
  EXPECT_EQ(testing::count(svg, "nan"), 0u);
  EXPECT_EQ(testing::count(svg, "inf"), 0u);

  EXPECT_THROW(make_run("r", json::object()), InputError);
}

TEST(Plot, PythonsNanAndInfinityReadAsMissingValues) {
  // Python's json module writes them bare; the key that only looks like one stays a key.
  TempDir dir;
  std::ofstream(dir.file("trainer_state.json"))
      << R"({"log_history": [{"loss": NaN, "step": 1}, {"loss": 1.5, "step": 2},
            {"loss": Infinity, "step": 3}, {"loss": -Infinity, "step": 4},
            {"eval_NaN": 0.5, "note": "NaN, Infinity", "step": 4}], "x": [[[[[1]]]]]})";
  PlotRun run = read_plot_run(dir.path());
  ASSERT_EQ(run.series.size(), 2u);
  EXPECT_EQ(run.series[0].points, (std::vector<std::pair<double, double>>{{2.0, 1.5}}));
  EXPECT_EQ(run.series[1].key, "eval_NaN");
  EXPECT_EQ(run.label, folder_name(dir.path()));
  EXPECT_EQ(run.source, dir.path());
}

TEST(Plot, ANumberPastDoubleIsInvalidJsonNotACrash) {
  // fuzz/regressions/plot/number-overflow-*: nlohmann's out_of_range, not a parse_error.
  try {
    plot_run_from_state(R"({"log_history": [{"loss": 1e400, "step": 1}]})", "s.json", "r");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("s.json is not valid JSON: "), std::string::npos)
        << e.what();
  }
}

TEST(Plot, TheLegendNamesARunByItsRunName) {
  TempDir dir;
  std::ofstream(dir.file("trainer_state.json")) << R"({"log_history": [{"loss": 1, "step": 1}]})";
  std::ofstream(dir.file("training_args.json")) << R"({"run_name": "baseline"})";
  EXPECT_EQ(read_plot_run(dir.path()).label, "baseline");
  std::ofstream(dir.file("training_args.json")) << R"({"run_name": null})";
  EXPECT_EQ(read_plot_run(dir.path()).label, folder_name(dir.path()));
  std::ofstream(dir.file("training_args.json")) << "{not json";  // no reason to refuse the plot
  EXPECT_EQ(read_plot_run(dir.path()).label, folder_name(dir.path()));
  EXPECT_EQ(folder_name(dir.path() + "/"), folder_name(dir.path()));
  EXPECT_EQ(folder_name(dir.path() + "/."), folder_name(dir.path()));
}

TEST(Plot, ALonePointIsADotOnAnAxisAroundIt) {
  for (double step : {0.0, 32.0}) {
    for (double value : {0.0, 0.7, -3.0}) {
      PlotRun run = make_run("one", json::array({{{"eval_loss", value}, {"step", step}}}));
      std::string svg = plot_svg({run}, "t");
      auto points = curve(svg, "loss", "one", "eval_loss");
      ASSERT_EQ(points.size(), 1u) << step << " " << value;
      EXPECT_EQ(testing::count(svg, "<g class=\"markers\""), 1u);
      EXPECT_EQ(testing::count(svg, "nan"), 0u) << svg;
      EXPECT_GE(testing::count(svg, "text-anchor=\"middle\" stroke=\"none\">"), 2u);  // x ticks
      EXPECT_GE(testing::count(svg, "text-anchor=\"end\" stroke=\"none\">"), 2u);     // y ticks
      // Inside the plot area, not on its edge.
      std::smatch area;
      ASSERT_TRUE(std::regex_search(svg, area,
                                    std::regex("class=\"plot-area\" x=\"([0-9.]+)\" y=\"([0-9.]+)"
                                               "\" width=\"([0-9.]+)\" height=\"([0-9.]+)\"")));
      double top = std::stod(area[2]), height = std::stod(area[4]);
      EXPECT_GT(points[0].second, top);
      EXPECT_LT(points[0].second, top + height);
    }
  }
  // A training loss of one point is a dot too.
  std::string svg = plot_svg({make_run("one", json::array({{{"loss", 1.0}, {"step", 5}}}))}, "t");
  EXPECT_EQ(testing::count(svg, "<g class=\"markers\" data-run=\"one\" data-key=\"loss\""), 1u);
}

TEST(Plot, RunsOfDifferentLengthsShareTheStepAxis) {
  std::vector<PlotRun> runs = {make_run("long", history(10, 10, 5)),
                               make_run("short", history(5, 10, 5))};
  std::string svg = plot_svg(runs, "t");
  auto long_curve = curve(svg, "loss", "long", "loss");
  auto short_curve = curve(svg, "loss", "short", "loss");
  ASSERT_EQ(long_curve.size(), 10u);
  ASSERT_EQ(short_curve.size(), 5u);
  // Same steps at the same x; the short run ends halfway (step 50 of 0..100).
  for (size_t i = 0; i < short_curve.size(); ++i) {
    EXPECT_DOUBLE_EQ(short_curve[i].first, long_curve[i].first);
  }
  double x0 = long_curve[0].first - (long_curve[1].first - long_curve[0].first);  // step 0
  EXPECT_NEAR(short_curve.back().first - x0, (long_curve.back().first - x0) / 2, 0.3);
}

TEST(Plot, ExtremeValuesStayOnThePicture) {
  const double big = std::numeric_limits<double>::max();
  json log = json::array({{{"loss", -big}, {"step", 0}},
                          {{"loss", big}, {"step", 1e15}},
                          {{"eval_loss", 1e-300}, {"eval_tiny", 1.0}, {"step", 3}},
                          {{"eval_tiny", 1.0 + 1e-15}, {"step", 4}}});
  std::string svg = plot_svg({make_run("x", log)}, "t");
  EXPECT_EQ(testing::count(svg, "nan"), 0u);
  EXPECT_EQ(testing::count(svg, "inf"), 0u);
  int width = std::stoi(testing::matches(svg, "<svg [^>]*width=\"([0-9]+)\"")[0]);
  int height = std::stoi(testing::matches(svg, "<svg [^>]*height=\"([0-9]+)\"")[0]);
  for (const char* key : {"loss", "eval_loss"}) {
    for (const auto& [x, y] : curve(svg, "loss", "x", key)) {
      EXPECT_GE(x, 0);
      EXPECT_LE(x, width);
      EXPECT_GE(y, 0);
      EXPECT_LE(y, height);
    }
  }
  EXPECT_EQ(curve(svg, "eval_tiny", "x", "eval_tiny").size(), 2u);
  // A handful of ticks per axis, never thousands.
  EXPECT_LT(testing::count(svg, "stroke=\"none\">"), 60u);
}

TEST(Plot, LabelsAreEscapedAndValidUtf8) {
  json log = json::array({{{"loss", 1.0}, {"step", 1}}});
  std::string svg = plot_svg({make_run("a<b>&\"c'\xff\x01", log)}, "title & <more>");
  EXPECT_NE(svg.find("data-run=\"a&lt;b&gt;&amp;&quot;c&#39;\xEF\xBF\xBD\xEF\xBF\xBD\""),
            std::string::npos);
  EXPECT_NE(svg.find("<title>title &amp; &lt;more&gt;</title>"), std::string::npos);
  EXPECT_EQ(svg.find('\xff'), std::string::npos);
  EXPECT_EQ(svg.find('\x01'), std::string::npos);
  // A long name is cut in the legend (on a character's boundary) and whole in its tooltip.
  std::string name;
  for (int i = 0; i < 30; ++i) name += "\xC3\xA9t";  // "ét" x 30
  svg = plot_svg({make_run(name, log)}, "t");
  std::string cut;
  for (int i = 0; i < 19; ++i) cut += "\xC3\xA9t";
  cut += "\xC3\xA9";  // 39 characters and the ellipsis
  EXPECT_NE(svg.find(">" + cut + "\xE2\x80\xA6</text>"), std::string::npos);
  EXPECT_NE(svg.find("<title>" + name + "</title>"), std::string::npos);
}

TEST(Plot, NothingToPlotSaysSo) {
  PlotRun empty = make_run("e", json::array({{{"train_loss", 1.0}, {"step", 3}}}));
  EXPECT_FALSE(has_points(empty));
  std::string svg = plot_svg({empty}, "t");
  EXPECT_NE(svg.find("Nothing to plot"), std::string::npos);
  EXPECT_EQ(testing::count(svg, "<polyline"), 0u);
  EXPECT_EQ(testing::count(svg, "class=\"panel\""), 0u);
}

TEST(Plot, ThePageShowsTheSvgAtItsSize) {
  std::vector<PlotRun> runs = {make_run("a", history(5, 1, 5))};
  std::string svg = plot_svg(runs, "t");
  std::string html = plot_html("my plot#1.svg", runs, "t");
  EXPECT_NE(html.find("<img src=\"my%20plot%231.svg\" width=\"" +
                      testing::matches(svg, "<svg [^>]*width=\"([0-9]+)\"")[0] + "\" height=\"" +
                      testing::matches(svg, "<svg [^>]*height=\"([0-9]+)\"")[0] + "\""),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<li>a: a/trainer_state.json, up to step 5</li>"), std::string::npos) << html;
}

// TensorBoard's smoothing (tf-backend's smoothing in its scalar card): an EMA divided by
// 1 - w^n; non-finite values pass through; a constant series stays.
TEST(StepCurve, SmoothingIsTensorBoardsDebiasedMovingAverage) {
  const std::vector<double> values = {1.0, 3.0, NAN, 2.0};
  const std::vector<double> got = report::smooth(values, 0.6);
  // last: 0.4, then 0.6*0.4 + 0.4*3 = 1.44, then 0.6*1.44 + 0.4*2 = 1.664.
  EXPECT_DOUBLE_EQ(got[0], 0.4 / (1 - 0.6));
  EXPECT_DOUBLE_EQ(got[1], 1.44 / (1 - 0.6 * 0.6));
  EXPECT_TRUE(std::isnan(got[2]));
  EXPECT_DOUBLE_EQ(got[3], 1.664 / (1 - 0.6 * 0.6 * 0.6));
  EXPECT_EQ(report::smooth({2.0, 2.0, 2.0}, 0.9), (std::vector<double>{2.0, 2.0, 2.0}));
  EXPECT_EQ(report::smooth({1.0, 5.0}, 0.0), (std::vector<double>{1.0, 5.0}));
}

TEST(StepCurve, NpyRoundTripsAndDamageIsOneLine) {
  testing::TempDir dir;
  report::StepCurve curve;
  curve.append(1, 2.5, 1e-3, NAN);
  curve.append(2, 2.25, 9e-4, 0.75);
  curve.append(3, INFINITY, 8e-4, 0.5);
  const std::string bytes = report::step_curve_npy(curve);
  // NumPy's header for a [3, 4] float64 array, padded to a multiple of 64 bytes.
  EXPECT_EQ(bytes.substr(10, 59), "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }");
  EXPECT_EQ(bytes.size(), 128u + 3 * 4 * 8);
  std::ofstream(dir.file("c.npy"), std::ios::binary) << bytes;
  report::StepCurve back = report::read_step_curve(dir.file("c.npy"));
  EXPECT_EQ(back.step, curve.step);
  EXPECT_EQ(back.loss, curve.loss);
  EXPECT_EQ(back.learning_rate, curve.learning_rate);
  EXPECT_TRUE(std::isnan(back.grad_norm[0]));
  EXPECT_EQ(back.grad_norm[2], 0.5);
  back.keep_until(2);
  EXPECT_EQ(back.step, (std::vector<double>{1, 2}));
  std::ofstream(dir.file("short.npy"), std::ios::binary) << bytes.substr(0, bytes.size() - 8);
  EXPECT_EQ(testing::input_error_of([&] { report::read_step_curve(dir.file("short.npy")); }),
            dir.file("short.npy") +
                " is not a float64 .npy array of 4 columns: 88 bytes of data for 3 rows");
  std::ofstream(dir.file("text.npy")) << "step,loss\n";
  EXPECT_EQ(testing::input_error_of([&] { report::read_step_curve(dir.file("text.npy")); }),
            dir.file("text.npy") +
                " is not a float64 .npy array of 4 columns: no .npy version 1.0 header");
}

// With a per-step curve the loss panel holds the raw loss (faint) and the smoothed one, the eval
// loss stays, and the learning rate gets a panel of its own.
TEST(StepCurve, ThePlotDrawsRawAndSmoothedLossAndTheLearningRate) {
  report::PlotRun run = report::plot_run_from_log_history(
      "r",
      nlohmann::ordered_json::parse(R"([{"loss": 2.0, "step": 2}, {"eval_loss": 1.5, "step": 4}])"),
      "state");
  report::StepCurve curve;
  for (int step = 1; step <= 4; ++step) curve.append(step, 3.0 - step * 0.5, 0.1 * step, 1.0);
  report::add_step_curve(run, curve, 0.6);
  ASSERT_EQ(run.series.size(), 4u);
  EXPECT_EQ(run.series[0].key, "loss");
  EXPECT_TRUE(run.series[0].raw);
  EXPECT_EQ(run.series[0].points.size(), 4u);
  EXPECT_EQ(run.series[1].key, "loss");
  EXPECT_FALSE(run.series[1].raw);
  EXPECT_DOUBLE_EQ(run.series[1].points[1].second, report::smooth(curve.loss, 0.6)[1]);
  EXPECT_EQ(run.series[2].key, "eval_loss");
  EXPECT_EQ(run.series[3].key, "learning_rate");
  const std::string svg = report::plot_svg({run}, "t");
  EXPECT_NE(svg.find("<polyline class=\"series train raw\" data-run=\"r\" data-key=\"loss\" "
                     "fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1\" stroke-opacity=\"0.3\""),
            std::string::npos)
      << svg;
  EXPECT_NE(svg.find("<g class=\"panel\" data-quantity=\"learning_rate\">"), std::string::npos);
  EXPECT_NE(svg.find(">learning rate</text>"), std::string::npos);
}

}  // namespace plot_test
}  // namespace trainer::report
