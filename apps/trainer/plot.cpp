// `trainer plot`: the curves of runs' trainer_state.json files as an SVG and an HTML page.
#include <fmt/format.h>

#include "apps/trainer/commands.h"
#include "lib/report/plot.h"

namespace trainer::cli {

int plot_command(const std::vector<std::string>& output_dirs, const std::string& output,
                 double smoothing) {
  auto [svg, html] = report::write_plot(output_dirs, output, smoothing);
  fmt::print("Wrote {} and {}\n", svg, html);
  return 0;
}

}  // namespace trainer::cli
