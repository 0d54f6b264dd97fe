// The plot's pictures: runs' curves as a hand-written SVG (panels, axes with round ticks, a
// legend) and an HTML page around it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <map>

#include <fmt/format.h>

#include "lib/base/text.h"
#include "lib/base/utf8.h"
#include "lib/report/plot.h"

namespace trainer::report {
namespace {

using json = nlohmann::ordered_json;

// Matplotlib's tab10 without its grey, which the axes would be mistaken for.
const char* const kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                "#8c564b", "#e377c2", "#bcbd22", "#17becf"};
constexpr size_t kNumColours = sizeof(kColours) / sizeof(kColours[0]);

// Sizes in pixels. A panel is its plot area and, around it, its title, ticks and axis labels.
constexpr int kMargin = 16;
constexpr int kTitleHeight = 30;
constexpr int kLegendRowHeight = 20;
constexpr int kPanelWidth = 480;
constexpr int kPanelHeight = 300;
constexpr int kAreaLeft = 70;  // room for the y ticks' labels and the y axis label
constexpr int kAreaRight = 16;
constexpr int kAreaTop = 30;        // the panel's title
constexpr int kAreaBottom = 46;     // the x ticks' labels and the x axis label
constexpr double kCharWidth = 7.0;  // an estimate for 12 px sans-serif, to lay out the legend
constexpr size_t kMaxLabelChars = 40;
constexpr size_t kMaxMarkers = 200;  // evaluation series with more points get no dots

constexpr const char* kLossPanel = "loss";

// The panel a series is drawn in: training and evaluation loss together, each metric alone.
std::string panel_of(const std::string& key) { return key == "eval_loss" ? kLossPanel : key; }

// Evaluation series are dashed; the training loss and the learning rate solid.
bool is_eval(const std::string& key) { return base::starts_with(key, "eval_"); }

// `text` as valid UTF-8 without the control characters XML forbids: each byte that does not
// start a well-formed sequence, and each such character, becomes U+FFFD.
std::string valid_text(const std::string& text) {
  static const std::string kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t length = base::utf8_sequence_length(text, i);
    const unsigned char c = static_cast<unsigned char>(text[i]);
    bool ok = length > 0;
    if (ok && length == 1 && c < 0x20 && c != '\t' && c != '\n' && c != '\r') ok = false;
    // U+FFFE and U+FFFF are not characters XML allows.
    if (ok && length == 3 && c == 0xEF && static_cast<unsigned char>(text[i + 1]) == 0xBF &&
        static_cast<unsigned char>(text[i + 2]) >= 0xBE)
      ok = false;
    if (!ok) {
      out += kReplacement;
      ++i;
      continue;
    }
    out.append(text, i, length);
    i += length;
  }
  return out;
}

// Character data or an attribute value for XML and HTML.
std::string escape(const std::string& text) {
  std::string out;
  for (char c : valid_text(text)) {
    const char* entity = c == '&'    ? "&amp;"
                         : c == '<'  ? "&lt;"
                         : c == '>'  ? "&gt;"
                         : c == '"'  ? "&quot;"
                         : c == '\'' ? "&#39;"
                                     : nullptr;
    if (entity) {
      out += entity;
    } else {
      out += c;
    }
  }
  return out;
}

size_t code_points(const std::string& utf8) {
  return static_cast<size_t>(std::count_if(utf8.begin(), utf8.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

// A legend label of at most kMaxLabelChars characters (valid UTF-8), the last an ellipsis where it
// is cut.
std::string short_label(const std::string& label) {
  std::string text = valid_text(label);
  if (code_points(text) <= kMaxLabelChars) return text;
  size_t kept = 0, at = 0;
  for (; at < text.size(); ++at) {
    if ((static_cast<unsigned char>(text[at]) & 0xC0) != 0x80 && kept++ == kMaxLabelChars - 1) {
      break;
    }
  }
  return text.substr(0, at) + "\xE2\x80\xA6";
}

// A relative path as a URL: every byte but unreserved ones and '/' percent-encoded.
std::string url_path(const std::string& path) {
  std::string out;
  for (char c : path) {
    auto b = static_cast<unsigned char>(c);
    if (std::isalnum(b) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
      out += c;
    } else {
      out += fmt::format("%{:02X}", b);
    }
  }
  return out;
}

// An axis: its range and the round values it ticks, 1, 2 or 5 times a power of ten apart. Long
// double, so that the width of a range between huge finite values does not overflow.
struct Axis {
  long double lo = 0, hi = 1;
  std::vector<long double> ticks;
  int decimals = 0;  // of the tick labels

  long double fraction(long double value) const { return (value - lo) / (hi - lo); }

  std::string label(long double value) const {
    if (value == 0) value = 0;  // no "-0"
    // Up to 4 decimals as they are ("0.0025"); smaller steps as "5e-05", which fits beside the
    // axis.
    if (decimals <= 4 && std::fabs(value) < 1e7L) {
      return fmt::format("{:.{}f}", static_cast<double>(value), decimals);
    }
    return fmt::format("{:.3g}", value);  // long double: a tick past DBL_MAX is no "inf"
  }
};

Axis make_axis(long double lo, long double hi, bool from_zero) {
  if (from_zero) lo = std::min(lo, 0.0L);
  const bool nonnegative = lo >= 0;
  if (hi - lo <= std::max(std::fabs(lo), std::fabs(hi)) * 1e-9L) {  // one value, or nearly
    long double pad = std::max(std::fabs(lo) * 0.1L, 1e-3L);
    if (lo == 0 && hi == 0) pad = 1;
    lo -= pad;
    hi += pad;
    if (from_zero && nonnegative) lo = std::max(lo, 0.0L);
  }
  Axis axis;
  long double raw = (hi - lo) / 5;
  int exponent = static_cast<int>(std::floor(std::log10(raw)));
  long double magnitude = std::pow(10.0L, exponent);
  long double norm = raw / magnitude;
  int multiple = norm < 1.5L ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10;
  if (multiple == 10) ++exponent;
  long double step = (multiple == 10 ? 1 : multiple) * std::pow(10.0L, exponent);
  axis.decimals = std::max(0, -exponent);
  axis.lo = std::floor(lo / step) * step;
  axis.hi = std::ceil(hi / step) * step;
  long double count = std::round((axis.hi - axis.lo) / step);
  for (long double i = 0; i <= count && i <= 20; ++i) axis.ticks.push_back(axis.lo + i * step);
  if (!(axis.hi > axis.lo)) {  // past long double's precision: the data's own range
    axis.lo = lo;
    axis.hi = hi;
    axis.ticks = {lo, hi};
  }
  return axis;
}

// What is drawn, and where: the runs with points, their panels and the legend.
struct LegendEntry {
  std::string label;  // short_label of the run, or the style's name
  std::string full;   // the whole label (its tooltip)
  int run = -1;       // index into Layout::runs, or -1 for a line style
  std::string style;  // "train" or "eval" for a line style
  double x = 0, y = 0;
};

struct Panel {
  std::string quantity;                                   // kLossPanel or an eval metric
  std::vector<std::pair<int, const PlotSeries*>> series;  // run index, series
  double x = 0, y = 0;                                    // top left corner of the panel
};

struct Layout {
  std::vector<const PlotRun*> runs;
  std::vector<Panel> panels;
  std::vector<LegendEntry> legend;
  int width = 0, height = 0;
};

Layout lay_out(const std::vector<PlotRun>& runs) {
  Layout layout;
  std::map<std::string, size_t> panel_index;
  bool any_train = false, any_eval = false;
  for (const PlotRun& run : runs) {
    if (!has_points(run)) continue;
    int index = static_cast<int>(layout.runs.size());
    layout.runs.push_back(&run);
    for (const PlotSeries& series : run.series) {
      if (series.points.empty()) continue;
      std::string quantity = panel_of(series.key);
      if (quantity == kLossPanel && !panel_index.count(kLossPanel)) {
        // Loss comes first, whichever run brings it.
        layout.panels.insert(layout.panels.begin(), Panel{kLossPanel, {}});
        for (auto& [name, at] : panel_index) ++at;
        panel_index[kLossPanel] = 0;
      } else if (!panel_index.count(quantity)) {
        panel_index[quantity] = layout.panels.size();
        layout.panels.push_back(Panel{quantity, {}});
      }
      layout.panels[panel_index[quantity]].series.emplace_back(index, &series);
      (is_eval(series.key) ? any_eval : any_train) = true;
    }
  }
  const int columns = layout.panels.size() > 1 ? 2 : 1;
  const int rows = static_cast<int>((layout.panels.size() + columns - 1) / columns);
  layout.width = 2 * kMargin + columns * kPanelWidth;
  // The legend: one entry per run, then the line styles; entries flow into rows.
  for (size_t i = 0; i < layout.runs.size(); ++i) {
    const std::string& label = layout.runs[i]->label;
    layout.legend.push_back({short_label(label), valid_text(label), static_cast<int>(i), ""});
  }
  if (any_train) layout.legend.push_back({"train", "training loss", -1, "train"});
  if (any_eval) layout.legend.push_back({"eval", "evaluation", -1, "eval"});
  double x = kMargin, y = kMargin + kTitleHeight;
  for (LegendEntry& entry : layout.legend) {
    double entry_width = 30 + kCharWidth * static_cast<double>(code_points(entry.label)) + 20;
    if (x > kMargin && x + entry_width > layout.width - kMargin) {
      x = kMargin;
      y += kLegendRowHeight;
    }
    entry.x = x;
    entry.y = y;
    x += entry_width;
  }
  const double panels_top = y + kLegendRowHeight;
  for (size_t i = 0; i < layout.panels.size(); ++i) {
    layout.panels[i].x = kMargin + static_cast<double>(i % columns) * kPanelWidth;
    layout.panels[i].y = panels_top + static_cast<double>(i / columns) * kPanelHeight;
  }
  layout.height =
      layout.panels.empty() ? 120 : static_cast<int>(panels_top) + rows * kPanelHeight + kMargin;
  return layout;
}

using Out = std::back_insert_iterator<std::string>;

std::string colour(int run) { return kColours[static_cast<size_t>(run) % kNumColours]; }

// A line style's sample in the legend: 24 px of line, dashed with a dot for evaluation.
void draw_sample(Out out, double x, double y, const std::string& stroke, bool eval) {
  fmt::format_to(out,
                 "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" "
                 "stroke-width=\"2\"{}/>",
                 x, y, x + 24, y, stroke, eval ? " stroke-dasharray=\"6 4\"" : "");
  if (eval) {
    fmt::format_to(out, "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>", x + 12, y,
                   stroke);
  }
}

void draw_legend(Out out, const Layout& layout) {
  fmt::format_to(out, "<g class=\"legend\">\n");
  for (const LegendEntry& entry : layout.legend) {
    double mid = entry.y + 10;
    if (entry.run >= 0) {
      fmt::format_to(out, "<g class=\"legend-entry\" data-run=\"{}\"><title>{}</title>",
                     escape(entry.full), escape(entry.full));
      fmt::format_to(out, "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"24\" height=\"4\" fill=\"{}\"/>",
                     entry.x, mid - 2, colour(entry.run));
    } else {
      fmt::format_to(out, "<g class=\"legend-entry\" data-style=\"{}\"><title>{}</title>",
                     entry.style, escape(entry.full));
      draw_sample(out, entry.x, mid, "#555555", entry.style == "eval");
    }
    fmt::format_to(out, "<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text></g>\n", entry.x + 30, mid + 4,
                   escape(entry.label));
  }
  fmt::format_to(out, "</g>\n");
}

using Point = std::pair<double, double>;

// One tick of an axis: its grid line from the axis across the plot area, its mark outside the
// area and its label.
void draw_tick(Out out, Point on_axis, Point across, Point mark, Point text, const char* anchor,
               const std::string& label) {
  fmt::format_to(
      out,
      "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>"
      "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#444444\"/>"
      "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"{}\" stroke=\"none\">{}</text>\n",
      on_axis.first, on_axis.second, across.first, across.second, on_axis.first, on_axis.second,
      mark.first, mark.second, text.first, text.second, anchor, label);
}

// Where a panel's plot area lies and how its axes map steps and values into it.
struct PanelScale {
  double x0 = 0, y0 = 0, w = 0, h = 0;  // the plot area
  Axis x_axis, y_axis;

  double px(long double step) const { return x0 + static_cast<double>(x_axis.fraction(step)) * w; }
  double py(long double value) const {
    return y0 + h - static_cast<double>(y_axis.fraction(value)) * h;
  }
};

// The plot area of `panel` and axes around its series' points: steps from 0, values as they are.
PanelScale panel_scale(const Panel& panel) {
  PanelScale scale;
  scale.x0 = panel.x + kAreaLeft;
  scale.y0 = panel.y + kAreaTop;
  scale.w = kPanelWidth - kAreaLeft - kAreaRight;
  scale.h = kPanelHeight - kAreaTop - kAreaBottom;
  long double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const auto& [run, series] : panel.series) {
    for (const auto& [step, value] : series->points) {
      x_lo = std::min<long double>(x_lo, step);
      x_hi = std::max<long double>(x_hi, step);
      y_lo = std::min<long double>(y_lo, value);
      y_hi = std::max<long double>(y_hi, value);
    }
  }
  scale.x_axis = make_axis(x_lo, x_hi, /*from_zero=*/true);
  scale.y_axis = make_axis(y_lo, y_hi, /*from_zero=*/false);
  return scale;
}

// The panel's title ("train and eval loss", "learning rate", "eval_accuracy") and its y axis'
// name ("loss", "learning rate", "accuracy").
std::string panel_title(const Panel& panel) {
  if (panel.quantity == kLossPanel) {
    bool train = false, eval = false;
    for (const auto& [run, series] : panel.series) (series->key == "loss" ? train : eval) = true;
    return train && eval ? "train and eval loss" : train ? "train loss" : "eval loss";
  }
  if (panel.quantity == "learning_rate") return "learning rate";
  return panel.quantity;
}

std::string y_axis_name(const Panel& panel) {
  return panel.quantity == kLossPanel        ? std::string("loss")
         : panel.quantity == "learning_rate" ? std::string("learning rate")
                                             : panel.quantity.substr(5);
}

// The panel's title, its plot area with the ticks and their grid lines, the axes' labels and
// the area's border.
void draw_frame(Out out, const Panel& panel, const PanelScale& s) {
  fmt::format_to(out,
                 "<text class=\"panel-title\" x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"13\" "
                 "font-weight=\"bold\">{}</text>\n",
                 s.x0, panel.y + 18, escape(panel_title(panel)));
  fmt::format_to(out,
                 "<rect class=\"plot-area\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
                 "height=\"{:.1f}\" fill=\"#ffffff\"/>\n",
                 s.x0, s.y0, s.w, s.h);
  fmt::format_to(out, "<g class=\"ticks\" stroke=\"#e6e6e6\">\n");
  for (long double tick : s.x_axis.ticks) {
    const double x = s.px(tick);
    draw_tick(out, {x, s.y0 + s.h}, {x, s.y0}, {x, s.y0 + s.h + 5}, {x, s.y0 + s.h + 18}, "middle",
              s.x_axis.label(tick));
  }
  for (long double tick : s.y_axis.ticks) {
    const double y = s.py(tick);
    draw_tick(out, {s.x0, y}, {s.x0 + s.w, y}, {s.x0 - 5, y}, {s.x0 - 8, y + 4}, "end",
              s.y_axis.label(tick));
  }
  fmt::format_to(out, "</g>\n");
  fmt::format_to(out,
                 "<text class=\"x-label\" x=\"{:.1f}\" y=\"{:.1f}\" "
                 "text-anchor=\"middle\">step</text>\n",
                 s.x0 + s.w / 2, s.y0 + s.h + 38);
  fmt::format_to(out,
                 "<text class=\"y-label\" transform=\"translate({:.1f} {:.1f}) rotate(-90)\" "
                 "text-anchor=\"middle\">{}</text>\n",
                 panel.x + 14, s.y0 + s.h / 2, escape(y_axis_name(panel)));
  fmt::format_to(out,
                 "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
                 "fill=\"none\" stroke=\"#444444\"/>\n",
                 s.x0, s.y0, s.w, s.h);
}

// One curve: training solid, evaluation dashed with a dot at each point; a lone point is a dot.
// A per-step loss is faint and thin under its smoothed curve.
void draw_series(Out out, const Layout& layout, const PanelScale& s, int run,
                 const PlotSeries& series) {
  const bool eval = is_eval(series.key);
  const std::string& label = layout.runs[static_cast<size_t>(run)]->label;
  fmt::format_to(out,
                 "<polyline class=\"series {}{}\" data-run=\"{}\" data-key=\"{}\" fill=\"none\" "
                 "stroke=\"{}\" stroke-width=\"{}\" stroke-linejoin=\"round\"{} points=\"",
                 eval ? "eval" : "train", series.raw ? " raw" : "", escape(label),
                 escape(series.key), colour(run), series.raw ? "1\" stroke-opacity=\"0.3" : "2",
                 eval ? " stroke-dasharray=\"6 4\"" : "");
  for (size_t i = 0; i < series.points.size(); ++i) {
    fmt::format_to(out, "{}{:.1f},{:.1f}", i ? " " : "", s.px(series.points[i].first),
                   s.py(series.points[i].second));
  }
  fmt::format_to(out, "\"/>\n");
  if ((eval && series.points.size() <= kMaxMarkers) || series.points.size() == 1) {
    fmt::format_to(out, "<g class=\"markers\" data-run=\"{}\" data-key=\"{}\" fill=\"{}\">",
                   escape(label), escape(series.key), colour(run));
    for (const auto& [step, value] : series.points) {
      fmt::format_to(out, "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\"/>", s.px(step), s.py(value));
    }
    fmt::format_to(out, "</g>\n");
  }
}

void draw_panel(Out out, const Layout& layout, const Panel& panel) {
  const PanelScale scale = panel_scale(panel);
  fmt::format_to(out, "<g class=\"panel\" data-quantity=\"{}\">\n", escape(panel.quantity));
  draw_frame(out, panel, scale);
  for (const auto& [run, series] : panel.series) draw_series(out, layout, scale, run, *series);
  fmt::format_to(out, "</g>\n");
}

}  // namespace

std::string plot_svg(const std::vector<PlotRun>& runs, const std::string& title) {
  const Layout layout = lay_out(runs);
  std::string svg;
  Out out(svg);
  fmt::format_to(out,
                 "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
                 "viewBox=\"0 0 {0} {1}\" font-family=\"DejaVu Sans, Arial, sans-serif\" "
                 "font-size=\"12\" fill=\"#222222\">\n"
                 "<title>{2}</title>\n"
                 "<rect width=\"{0}\" height=\"{1}\" fill=\"#ffffff\"/>\n"
                 "<text class=\"title\" x=\"{3}\" y=\"{4}\" font-size=\"15\" "
                 "font-weight=\"bold\">{2}</text>\n",
                 layout.width, layout.height, escape(title), kMargin, kMargin + 16);
  if (layout.panels.empty()) {
    fmt::format_to(out,
                   "<text class=\"nothing\" x=\"{}\" y=\"{}\">Nothing to plot: no training loss "
                   "and no evaluation was logged.</text>\n",
                   kMargin, kMargin + kTitleHeight + 20);
  } else {
    draw_legend(out, layout);
    for (const Panel& panel : layout.panels) draw_panel(out, layout, panel);
  }
  svg += "</svg>\n";
  return svg;
}

std::string plot_html(const std::string& svg_file, const std::vector<PlotRun>& runs,
                      const std::string& title) {
  const Layout layout = lay_out(runs);
  std::string html;
  Out out(html);
  fmt::format_to(out,
                 "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                 "<title>{}</title>\n"
                 "<style>body {{ margin: 0; background: #ffffff; color: #222222; font: 13px "
                 "sans-serif; }} img {{ display: block; }} ul {{ margin: 8px 16px; padding-left: "
                 "16px; }}</style>\n</head>\n<body>\n"
                 "<img src=\"{}\" width=\"{}\" height=\"{}\" alt=\"{}\">\n<ul>\n",
                 escape(title), escape(url_path(svg_file)), layout.width, layout.height,
                 escape(title));
  for (const PlotRun* run : layout.runs) {
    double last_step = 0;
    for (const PlotSeries& series : run->series) {
      for (const auto& point : series.points) last_step = std::max(last_step, point.first);
    }
    fmt::format_to(out, "<li>{}: {}, up to step {}</li>\n", escape(run->label), escape(run->source),
                   last_step);
  }
  fmt::format_to(out, "</ul>\n</body>\n</html>\n");
  return html;
}

}  // namespace trainer::report
