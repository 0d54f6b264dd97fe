// Tabular data from a CSV file, torch-free: an RFC 4180 reader, and the table as numbers (chosen
// feature and label columns, a seeded train/validation split, standardisation fitted on train).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainer::data {

// A CSV file's cells. What is read: RFC 4180 text (UTF-8, an optional byte-order mark), one
// record a line ended by CRLF, LF or a lone CR; fields separated by commas; a field in double
// quotes may hold commas, line breaks and doubled quotes (""); a quote inside an unquoted field
// is kept as it is. Blank lines are skipped. The first record is the header.
struct CsvTable {
  std::vector<std::string> header;  // column names, none empty, none twice
  std::vector<std::string> cells;   // the rows' fields, row-major: rows() x header.size()
  std::vector<int64_t> lines;       // the line on which each row starts (the header's is 1 or more)
  int64_t rows() const { return static_cast<int64_t>(lines.size()); }
  const std::string& cell(int64_t row, int64_t column) const {
    return cells[row * header.size() + column];
  }
};

// Parses `text` as CSV; `name` (the file) starts each error. Throws InputError, one line with the
// line number, for: an empty text or one of blank lines only, a quoted field never closed, text
// after a closing quote, a record whose field count differs from the header's, a header field
// that is empty or appears twice, and a header whose fields are all numbers (a file without its
// header line).
CsvTable parse_csv(const std::string& text, const std::string& name);

// parse_csv() of the file at `path`. Throws InputError when it cannot be read.
CsvTable read_csv(const std::string& path);

// What to make of a CSV table (dataset_config of dataset_name "csv").
struct TabularOptions {
  std::string path;                   // the CSV file
  std::vector<std::string> features;  // feature columns; empty: every column but the label
  std::string label = "label";        // the target column
  bool regression = false;            // false: classification
  double validation_fraction = 0.2;   // in [0, 1): the share of rows held out for evaluation
  uint64_t seed = 42;                 // the split's seed
};

// One split of a table, as numbers.
struct TabularSplit {
  int64_t size = 0;
  std::vector<float> x;          // [size, features], standardised
  std::vector<int64_t> classes;  // classification: class ids [size]
  std::vector<float> targets;    // regression: targets [size]
  std::vector<int64_t> lines;    // the file's line of each row
};

// A table split in two and standardised.
struct TabularData {
  std::vector<std::string> features;  // feature column names, in the order of x's columns
  std::vector<std::string> classes;   // classification: class id i is classes[i]
  std::vector<double> mean, std;      // per feature, over the training rows
  TabularSplit train, eval;
  int64_t num_features() const { return static_cast<int64_t>(features.size()); }
  // Classification: the number of classes; regression: 1.
  int64_t num_labels() const { return classes.empty() ? 1 : static_cast<int64_t>(classes.size()); }
};

// The table as numbers, with these rules:
// - Features are numbers (C locale, as strtod reads them; blanks and tabs around a value are
//   ignored); an empty, non-numeric or non-finite value is an error naming the line and column.
// - Classification: labels (blanks around them ignored) are class names. When every label is an
//   integer (a number with no fractional part, "2" or "2.0"), the classes are the distinct values
//   in numeric order; otherwise the distinct strings in byte order ("setosa" 0, "versicolor" 1,
//   "virginica" 2). Numeric labels with fractions are an error that points to regression, and so
//   is a single class.
// - Regression: the label is a float target, read as features are.
// - Split: the rows are shuffled by a Fisher-Yates pass driven by SplitMix64(seed) (the same on
//   every machine); the first round(validation_fraction * rows) shuffled rows (at least 1 when
//   the fraction is positive) are the eval split, the rest the train split, both in that shuffled
//   order. At least one training row must remain.
// - Standardisation: each feature's mean and population standard deviation (as scikit-learn's
//   StandardScaler) over the training rows' values as float32, summed in double; both splits
//   become (x - mean) / std, or x - mean for a constant column (std 0). An eval value too far
//   out for float32 after that is an error.
// Throws InputError for an unknown column (naming the nearest one, and saying that the header
// line may be missing when the first line holds numbers), a label also listed as a feature, a
// column listed twice, no feature columns, no rows, and bad values as above.
TabularData make_tabular(const CsvTable& table, const TabularOptions& options,
                         const std::string& name);

// make_tabular(read_csv(options.path), options, options.path).
TabularData load_tabular(const TabularOptions& options);

}  // namespace trainer::data
