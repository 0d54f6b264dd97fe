// libFuzzer target for trainer_state.json as `trainer plot` reads it (report::plot_run_from_state):
// only trainer::InputError may come out, and what it reads must draw (plot_svg, plot_html) with
// finite coordinates only.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "lib/base/errors.h"
#include "lib/report/plot.h"

namespace {

// Every number in the SVG's coordinate attributes. The SVG is read tag by tag, attribute by
// attribute (values never hold a bare quote, nor text a '<'), so that an input's key that spells
// an attribute (`"eval_ x=": 1`) is read as the attribute value or text it is.
void check_coordinates(const std::string& svg) {
  static const std::set<std::string> kCoordinates = {"x",  "y",  "x1", "x2",    "y1",     "y2",
                                                     "cx", "cy", "r",  "width", "height", "points"};
  for (size_t at = svg.find('<'); at != std::string::npos; at = svg.find('<', at)) {
    ++at;
    if (at < svg.size() && (svg[at] == '/' || svg[at] == '?')) continue;
    at = svg.find_first_of(" />", at);  // past the tag's name
    while (at < svg.size() && svg[at] == ' ') {
      const size_t name_at = at + 1;
      const size_t equals = svg.find('=', name_at);
      if (equals == std::string::npos || equals + 1 >= svg.size() || svg[equals + 1] != '"') {
        std::fprintf(stderr, "a malformed attribute at %zu\n", at);
        abort();
      }
      const size_t end = svg.find('"', equals + 2);
      if (end == std::string::npos) {
        std::fprintf(stderr, "an unterminated attribute at %zu\n", at);
        abort();
      }
      const std::string name = svg.substr(name_at, equals - name_at);
      at = end + 1;
      if (!kCoordinates.count(name)) continue;
      std::string value = svg.substr(equals + 2, end - equals - 2);
      for (char& c : value) c = c == ',' ? ' ' : c;
      const char* p = value.c_str();
      while (*p) {
        char* next = nullptr;
        double number = std::strtod(p, &next);
        if (next == p || !std::isfinite(number)) {
          std::fprintf(stderr, "%s holds %s\n", name.c_str(), value.c_str());
          abort();
        }
        p = next;
        while (*p == ' ') ++p;
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  trainer::report::PlotRun run;
  try {
    run = trainer::report::plot_run_from_state(text, "fuzz/trainer_state.json", "fuzz");
  } catch (const trainer::InputError&) {
    return 0;
  }
  check_coordinates(trainer::report::plot_svg({run, run}, "fuzz"));
  trainer::report::plot_html("plot.svg", {run}, "fuzz");
  return 0;
}
