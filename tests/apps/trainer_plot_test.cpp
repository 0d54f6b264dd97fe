// `trainer plot` and loss.svg through the real binary: the files it writes and where, the legend's
// names, bad input as one line and exit code 2, the loss.svg of a finished `trainer train` (and
// its warning when it cannot be written), and the page in a real browser: Debian's chromium,
// headless, loads it with no console message, and its screenshot shows each run's colour inside
// each panel's plot area.
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>
#include <zlib.h>
#include <nlohmann/json.hpp>

#include "lib/report/curve.h"
#include "tests/test_util.h"

namespace trainer {
namespace trainer_plot_test {

using testing::run;
using testing::slurp;
using testing::TempDir;

const std::string& kTrainer = testing::kTrainerBin;

// output_dir/trainer_state.json with `logs` training losses (every 10 steps) and an evaluation
// every 5 of them; `scale` makes the runs differ.
void write_run(const std::string& dir, int logs, double scale) {
  nlohmann::json history = nlohmann::json::array();
  for (int i = 1; i <= logs; ++i) {
    history.push_back({{"loss", scale * 2.0 / i + 0.1}, {"epoch", i * 0.1}, {"step", i * 10}});
    if (i % 5 == 0) {
      history.push_back({{"eval_loss", scale * 2.2 / i + 0.2},
                         {"eval_accuracy", 0.9 - 0.5 * scale / i},
                         {"eval_runtime", 0.4},
                         {"step", i * 10}});
    }
  }
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/trainer_state.json")
      << nlohmann::json{{"global_step", logs * 10}, {"log_history", history}}.dump(2);
}

TEST(TrainerPlot, WritesTheSvgAndThePageWhereAsked) {
  TempDir dir;
  write_run(dir.file("a"), 20, 1.0);
  write_run(dir.file("b"), 12, 0.7);
  std::ofstream(dir.file("b/training_args.json")) << R"({"run_name": "smaller lr"})";
  auto result = run("cd " + dir.path() + " && " + kTrainer + " plot a b/");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "Wrote plot.svg and plot.html\n");
  EXPECT_EQ(result.err, "");
  std::string svg = slurp(dir.file("plot.svg"));
  EXPECT_EQ(testing::matches(svg, "class=\"legend-entry\" data-run=\"([^\"]*)\""),
            (std::vector<std::string>{"a", "smaller lr"}));
  EXPECT_EQ(testing::matches(svg, "<g class=\"panel\" data-quantity=\"([^\"]*)\""),
            (std::vector<std::string>{"loss", "eval_accuracy"}));
  EXPECT_NE(slurp(dir.file("plot.html")).find("<img src=\"plot.svg\""), std::string::npos);

  // -o: FILE.svg, FILE.html, a FILE without either ending, a folder, a new folder.
  std::filesystem::create_directories(dir.file("pictures"));
  const std::pair<std::string, std::vector<std::string>> outputs[] = {
      {"out/x.svg", {"out/x.svg", "out/x.html"}},
      {"page.html", {"page.svg", "page.html"}},
      {"curves", {"curves.svg", "curves.html"}},
      {"pictures", {"pictures/plot.svg", "pictures/plot.html"}},
      {"new/", {"new/plot.svg", "new/plot.html"}}};  // a folder to make
  for (const auto& [output, files] : outputs) {
    result = run("cd " + dir.path() + " && " + kTrainer + " plot a b -o " + output);
    ASSERT_EQ(result.exit_code, 0) << output << ": " << result.err;
    EXPECT_EQ(result.out, "Wrote " + files[0] + " and " + files[1] + "\n");
    EXPECT_EQ(slurp(dir.file(files[0])), svg) << output;  // the same bytes
    std::string src = files[0].substr(files[0].rfind('/') + 1);
    EXPECT_NE(slurp(dir.file(files[1])).find("<img src=\"" + src + "\""), std::string::npos);
  }

  // Two runs of one name are told apart by their folders.
  write_run(dir.file("x/run"), 5, 1.0);
  write_run(dir.file("y/run"), 5, 1.0);
  result = run("cd " + dir.path() + " && " + kTrainer + " plot x/run y/run");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(
      testing::matches(slurp(dir.file("plot.svg")), "class=\"legend-entry\" data-run=\"([^\"]*)\""),
      (std::vector<std::string>{"x/run", "y/run"}));
}

TEST(TrainerPlot, BadInputIsOneLineNamingTheFileAndExitTwo) {
  TempDir dir;
  std::string d = dir.path();
  write_run(dir.file("good"), 5, 1.0);
  std::ofstream(dir.file("file")) << "x";
  std::filesystem::create_directories(dir.file("empty"));
  auto state = [&](const std::string& name, const std::string& text) {
    std::filesystem::create_directories(dir.file(name));
    std::ofstream(dir.file(name + "/trainer_state.json")) << text;
    return dir.file(name);
  };
  struct Row {
    std::string args;
    std::vector<std::string> words;  // each in the one line on stderr
  };
  const Row rows[] = {
      {d + "/missing", {d + "/missing: no such folder"}},
      {dir.file("file"), {d + "/file is not a folder"}},
      {dir.file("empty"), {d + "/empty/trainer_state.json does not exist"}},
      {state("corrupt", "{\"log_history\": [{\"loss\": 1,"),
       {d + "/corrupt/trainer_state.json is not valid JSON"}},
      {state("array", "[1, 2]"), {d + "/array/trainer_state.json holds array, not a JSON object"}},
      {state("no_history", "{\"global_step\": 3}"),
       {d + "/no_history/trainer_state.json holds no log_history"}},
      {state("history_object", "{\"log_history\": {\"loss\": 1}}"),
       {d + "/history_object/trainer_state.json: log_history is object, not a list"}},
      {state("nothing", "{\"log_history\": [{\"train_loss\": 1.0, \"step\": 3}]}"),
       {d + "/nothing/trainer_state.json: nothing to plot"}},
      {state("nan_only", "{\"log_history\": [{\"loss\": NaN, \"step\": 3}]}"),
       {d + "/nan_only/trainer_state.json: nothing to plot"}},
      {dir.file("good") + " " + dir.file("good/"),
       {d + "/good/ is given twice (as " + d + "/good); give each run once"}},
      {"", {"trainer plot needs OUTPUT_DIR"}},
      {dir.file("good") + " -o", {"trainer plot: option -o needs a value"}},
      {dir.file("good") + " -o a -o b", {"trainer plot: option -o is given twice"}},
      {dir.file("good") + " -o ''", {"trainer plot: option -o: the value is empty"}},
      {dir.file("good") + " --colour red", {"--colour"}},
  };
  for (const Row& row : rows) {
    auto result = run("cd " + d + " && " + kTrainer + " plot " + row.args);
    EXPECT_EQ(result.exit_code, 2) << row.args << ": " << result.err;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
    EXPECT_EQ(result.err.rfind("trainer: error: ", 0), 0u) << result.err;
    for (const std::string& word : row.words) {
      EXPECT_NE(result.err.find(word), std::string::npos) << row.args << ": " << result.err;
    }
    EXPECT_EQ(result.out, "");
    EXPECT_FALSE(std::filesystem::exists(dir.file("plot.svg"))) << row.args;
  }
}

TEST(TrainerPlot, HelpNamesTheCommand) {
  auto result = run(kTrainer + " --help");
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_NE(result.out.find("trainer plot OUTPUT_DIR [OUTPUT_DIR ...] [-o FILE]"),
            std::string::npos)
      << result.out;
  result = run(kTrainer + " plot --help");
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_NE(result.out.find("-o,--output FILE"), std::string::npos) << result.out;
}

// A training run on a small random data set: 64 examples in batches of 16 for 4 steps.
std::string short_train(const std::string& data, const std::string& out) {
  return kTrainer + " train --dataset_dir " + data + " --output_dir " + out +
         " --per_device_train_batch_size 16 --max_steps 4 --disable_tqdm true --save_strategy no";
}

TEST(TrainerPlot, TrainingWritesLossSvgOrWarns) {
  TempDir dir;
  testing::write_mnist_dir(dir.file("data"), 64, 32, false);
  auto result = run(short_train(dir.file("data"), dir.file("run")) +
                    " --logging_steps 1 --eval_strategy steps --eval_steps 2");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  std::string svg = slurp(dir.file("run/loss.svg"));
  auto points = [&](const std::string& key) {
    std::smatch match;
    std::regex re("data-run=\"run\" data-key=\"" + key + "\"[^>]* points=\"([^\"]*)\"");
    if (!std::regex_search(svg, match, re)) return -1L;
    std::string text = match[1];
    return static_cast<long>(std::count(text.begin(), text.end(), ','));
  };
  EXPECT_EQ(points("loss"), 4);
  EXPECT_EQ(points("eval_loss"), 2);
  EXPECT_EQ(points("eval_accuracy"), 2);
  // trainer plot draws the same from trainer_state.json.
  result = run("cd " + dir.path() + " && " + kTrainer + " plot run");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(slurp(dir.file("plot.svg")), svg);

  // Where loss.svg cannot be written, the run still succeeds, with one warning line.
  std::filesystem::create_directories(dir.file("blocked/loss.svg/inside"));
  result = run(short_train(dir.file("data"), dir.file("blocked")) + " --overwrite_output_dir");
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(
      result.err.rfind("trainer: warning: " + dir.file("blocked/loss.svg") + " not written: ", 0),
      0u)
      << result.err;
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  EXPECT_TRUE(std::filesystem::exists(dir.file("blocked/trainer_state.json")));
}

// A PNG's pixels as RGB: what chromium's screenshots hold (8 bits, RGB or RGBA, not interlaced).
struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;
  const uint8_t* at(int x, int y) const { return &rgb[(static_cast<size_t>(y) * width + x) * 3]; }
};

Image decode_png(const std::string& bytes) {
  auto u32 = [&](size_t at) {
    return static_cast<uint32_t>(
        static_cast<uint8_t>(bytes[at]) << 24 | static_cast<uint8_t>(bytes[at + 1]) << 16 |
        static_cast<uint8_t>(bytes[at + 2]) << 8 | static_cast<uint8_t>(bytes[at + 3]));
  };
  if (bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) throw std::runtime_error("not a PNG");
  Image image;
  int channels = 0;
  std::string data;
  for (size_t at = 8; at + 8 <= bytes.size();) {
    uint32_t length = u32(at);
    std::string type = bytes.substr(at + 4, 4);
    if (type == "IHDR") {
      image.width = static_cast<int>(u32(at + 8));
      image.height = static_cast<int>(u32(at + 12));
      int depth = bytes[at + 16], colour = bytes[at + 17], interlace = bytes[at + 20];
      if (depth != 8 || (colour != 2 && colour != 6) || interlace != 0) {
        throw std::runtime_error("PNG not 8-bit RGB(A), not interlaced");
      }
      channels = colour == 2 ? 3 : 4;
    } else if (type == "IDAT") {
      data += bytes.substr(at + 8, length);
    }
    at += 12 + length;
  }
  const size_t stride = static_cast<size_t>(image.width) * channels;
  std::vector<uint8_t> raw((stride + 1) * image.height);
  uLongf size = raw.size();
  if (uncompress(raw.data(), &size, reinterpret_cast<const Bytef*>(data.data()), data.size()) !=
          Z_OK ||
      size != raw.size()) {
    throw std::runtime_error("PNG data does not inflate to its size");
  }
  std::vector<uint8_t> pixels(stride * image.height);
  for (int y = 0; y < image.height; ++y) {
    const uint8_t filter = raw[y * (stride + 1)];
    const uint8_t* in = &raw[y * (stride + 1) + 1];
    uint8_t* row = &pixels[y * stride];
    const uint8_t* up = y > 0 ? &pixels[(y - 1) * stride] : nullptr;
    for (size_t i = 0; i < stride; ++i) {
      int a = i >= static_cast<size_t>(channels) ? row[i - channels] : 0;
      int b = up ? up[i] : 0;
      int c = up && i >= static_cast<size_t>(channels) ? up[i - channels] : 0;
      int predicted = 0;
      switch (filter) {
        case 1:
          predicted = a;
          break;
        case 2:
          predicted = b;
          break;
        case 3:
          predicted = (a + b) / 2;
          break;
        case 4: {
          int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
          predicted = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
          break;
        }
        default:
          predicted = 0;
      }
      row[i] = static_cast<uint8_t>(in[i] + predicted);
    }
  }
  image.rgb.resize(static_cast<size_t>(image.width) * image.height * 3);
  for (size_t p = 0; p < static_cast<size_t>(image.width) * image.height; ++p) {
    for (int k = 0; k < 3; ++k) image.rgb[p * 3 + k] = pixels[p * channels + k];
  }
  return image;
}

TEST(TrainerPlot, ChromiumShowsEveryCurveWithNoConsoleMessage) {
  std::string chromium = run("command -v chromium").out;
  if (chromium.empty()) {
    GTEST_SKIP() << "chromium is not installed (scripts/setup installs Debian's chromium): the "
                    "browser check of trainer plot's page did not run";
  }
  chromium.pop_back();  // its newline
  TempDir dir;
  write_run(dir.file("a"), 20, 1.0);
  write_run(dir.file("b"), 12, 0.6);
  write_run(dir.file("c"), 30, 1.5);
  // A run with a per-step curve (300 noisy steps) and no evaluation: its colour appears in the
  // loss panel only through its curves, the smoothed one drawn at full colour.
  report::StepCurve curve;
  for (int step = 1; step <= 300; ++step) {
    curve.append(step, 1.2 / (1 + step / 50.0) + 0.3 * ((step * 7919) % 13 - 6) / 6.0, 1e-3, 1.0);
  }
  std::filesystem::create_directories(dir.file("d"));
  std::ofstream(dir.file("d/trainer_state.json"))
      << R"({"global_step": 300, "log_history": [{"loss": 1.0, "step": 100}]})";
  std::ofstream(dir.file("d/loss_curve.npy"), std::ios::binary) << report::step_curve_npy(curve);
  auto result = run(kTrainer + " plot " + dir.file("a") + " " + dir.file("b") + " " +
                    dir.file("c") + " " + dir.file("d") + " -o " + dir.file("page/plot"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::string svg = slurp(dir.file("page/plot.svg"));
  int width = std::stoi(testing::matches(svg, "<svg [^>]*width=\"([0-9]+)\"")[0]);
  int height = std::stoi(testing::matches(svg, "<svg [^>]*height=\"([0-9]+)\"")[0]);

  const double start = testing::now_seconds();
  // A browser that hangs fails the test in a minute rather than holding ctest.
  result = run("timeout 60 " + chromium +
               " --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run "
               "--force-device-scale-factor=1 --enable-logging=stderr --v=0 --user-data-dir=" +
               dir.file("profile") + " --window-size=" + std::to_string(width) + "," +
               std::to_string(height + 100) + " --screenshot=" + dir.file("shot.png") + " file://" +
               dir.file("page/plot.html"));
  const double seconds = testing::now_seconds() - start;
  RecordProperty("chromium_seconds", std::to_string(seconds));
  std::printf("chromium took %.1f s\n", seconds);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  // Every console message (an error, a warning, a log) is a line of its own with "CONSOLE".
  EXPECT_EQ(result.err.find(":CONSOLE"), std::string::npos) << result.err;
  Image shot = decode_png(slurp(dir.file("shot.png")));
  ASSERT_GE(shot.width, width);
  ASSERT_GE(shot.height, height);

  // In each panel's plot area (the page shows the SVG at its top left, 1:1), pixels of the colour
  // of each curve drawn there.
  const std::regex area_re(
      "class=\"plot-area\" x=\"([0-9.]+)\" y=\"([0-9.]+)\" width=\"([0-9.]+)\" "
      "height=\"([0-9.]+)\"");
  int panels = 0;
  for (size_t at = svg.find("<g class=\"panel\""); at != std::string::npos; ++panels) {
    const size_t next = svg.find("<g class=\"panel\"", at + 1);
    const std::string panel =
        svg.substr(at, next == std::string::npos ? std::string::npos : next - at);
    at = next;
    std::smatch area;
    ASSERT_TRUE(std::regex_search(panel, area, area_re));
    const int x0 = static_cast<int>(std::stod(area[1])), y0 = static_cast<int>(std::stod(area[2]));
    const int x1 = x0 + static_cast<int>(std::stod(area[3]));
    const int y1 = y0 + static_cast<int>(std::stod(area[4]));
    auto colours = testing::matches(panel, "<polyline [^>]*stroke=\"#([0-9a-f]{6})\"");
    ASSERT_FALSE(colours.empty());
    for (const std::string& hex : colours) {
      const int want[3] = {std::stoi(hex.substr(0, 2), nullptr, 16),
                           std::stoi(hex.substr(2, 2), nullptr, 16),
                           std::stoi(hex.substr(4, 2), nullptr, 16)};
      int near = 0;
      for (int y = y0 + 1; y < y1; ++y) {
        for (int x = x0 + 1; x < x1; ++x) {
          const uint8_t* p = shot.at(x, y);
          bool close = true;
          for (int k = 0; k < 3; ++k) close = close && std::abs(p[k] - want[k]) <= 24;
          near += close;
        }
      }
      EXPECT_GE(near, 30) << panel.substr(0, 60) << ": too few pixels of #" << hex;
    }
  }
  EXPECT_EQ(panels, 3);  // loss, eval_accuracy, learning_rate
  EXPECT_LT(seconds, 30);

  // The smoothed curve of run d shows along the whole step axis: in each tenth of the loss panel's
  // width its steps cover, pixels of its colour.
  const size_t loss_panel = svg.find("<g class=\"panel\" data-quantity=\"loss\"");
  ASSERT_NE(loss_panel, std::string::npos);
  const std::string panel = svg.substr(loss_panel, svg.find("</g>\n</g>", loss_panel) - loss_panel);
  std::smatch smoothed;
  ASSERT_TRUE(std::regex_search(
      panel, smoothed,
      std::regex("<polyline class=\"series train\" data-run=\"d\" data-key=\"loss\" "
                 "[^>]*stroke=\"#([0-9a-f]{6})\" stroke-width=\"2\"[^>]* points=\"([^\"]*)\"")));
  EXPECT_NE(panel.find("class=\"series train raw\" data-run=\"d\""), std::string::npos);
  const std::string hex = smoothed[1];
  const int want[3] = {std::stoi(hex.substr(0, 2), nullptr, 16),
                       std::stoi(hex.substr(2, 2), nullptr, 16),
                       std::stoi(hex.substr(4, 2), nullptr, 16)};
  std::vector<std::pair<double, double>> points;
  std::istringstream pairs(smoothed[2].str());
  for (std::string pair; pairs >> pair;) {
    points.emplace_back(std::stod(pair.substr(0, pair.find(','))),
                        std::stod(pair.substr(pair.find(',') + 1)));
  }
  ASSERT_EQ(points.size(), 300u);
  std::smatch loss_area;
  ASSERT_TRUE(std::regex_search(panel, loss_area, area_re));
  const int top = static_cast<int>(std::stod(loss_area[2]));
  const int bottom = top + static_cast<int>(std::stod(loss_area[4]));
  const double left = points.front().first, right = points.back().first;
  for (int tenth = 0; tenth < 10; ++tenth) {
    const int x_begin = static_cast<int>(left + (right - left) * tenth / 10);
    const int x_end = static_cast<int>(left + (right - left) * (tenth + 1) / 10);
    int near = 0;
    for (int x = x_begin; x < x_end; ++x) {
      for (int y = top + 1; y < bottom; ++y) {
        const uint8_t* p = shot.at(x, y);
        bool close = true;
        for (int k = 0; k < 3; ++k) close = close && std::abs(p[k] - want[k]) <= 24;
        near += close;
      }
    }
    EXPECT_GE(near, 5) << "tenth " << tenth << " of the step axis lacks the smoothed curve";
  }
}

}  // namespace trainer_plot_test
}  // namespace trainer
