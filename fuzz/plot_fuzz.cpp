// libFuzzer target for trainer_state.json as `trainer plot` reads it (report::plot_run_from_state):
// only trainer::InputError may come out, and what it reads must draw (plot_svg, plot_html) with
// finite coordinates only.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "lib/base/errors.h"
#include "lib/report/plot.h"

namespace {

// Every number in the SVG's coordinate attributes (text never holds a bare quote, so the
// attributes cannot be faked by a key of the input).
void check_coordinates(const std::string& svg) {
  for (const char* name : {" x=\"", " y=\"", " x1=\"", " x2=\"", " y1=\"", " y2=\"", " cx=\"",
                           " cy=\"", " width=\"", " height=\"", " points=\""}) {
    const std::string attribute = name;
    for (size_t at = svg.find(attribute); at != std::string::npos; at = svg.find(attribute, at)) {
      at += attribute.size();
      const size_t end = svg.find('"', at);
      std::string value = svg.substr(at, end - at);
      for (char& c : value) c = c == ',' ? ' ' : c;
      const char* p = value.c_str();
      while (*p) {
        char* next = nullptr;
        double number = std::strtod(p, &next);
        if (next == p || !std::isfinite(number)) {
          std::fprintf(stderr, "%s holds %s\n", name, value.c_str());
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
