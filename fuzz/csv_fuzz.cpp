// libFuzzer target for the CSV reader and the table's conversion to numbers
// (lib/data/csv_table.cpp): only trainer::InputError may leave them, a table has as many cells as
// rows times columns, and the splits it makes hold every row once with finite features.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "lib/data/csv_table.h"
#include "lib/base/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  trainer::data::CsvTable table;
  try {
    table = trainer::data::parse_csv(text, "fuzz.csv");
  } catch (const trainer::InputError&) {
    return 0;
  }
  if (table.header.empty() || table.cells.size() != table.lines.size() * table.header.size())
    abort();
  for (size_t i = 1; i < table.lines.size(); ++i) {
    if (table.lines[i] <= table.lines[i - 1]) abort();
  }
  for (bool regression : {false, true}) {
    trainer::data::TabularOptions options;
    options.label = table.header.back();
    options.regression = regression;
    options.validation_fraction = 0.25;
    options.seed = size;
    try {
      trainer::data::TabularData tab = trainer::data::make_tabular(table, options, "fuzz.csv");
      if (tab.train.size + tab.eval.size != table.rows() || tab.train.size < 1) abort();
      const int64_t f = tab.num_features();
      for (const auto* split : {&tab.train, &tab.eval}) {
        if (static_cast<int64_t>(split->x.size()) != split->size * f) abort();
        for (float v : split->x) {
          if (!std::isfinite(v)) abort();
        }
        for (int64_t c : split->classes) {
          if (c < 0 || c >= tab.num_labels()) abort();
        }
      }
    } catch (const trainer::InputError&) {
    }
  }
  return 0;
}
