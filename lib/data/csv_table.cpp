// CSV files as tables of numbers: the RFC 4180 reader, column selection, labels, the seeded split
// and the standardisation fitted on the training rows.
#include "lib/data/csv_table.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/text.h"
#include "lib/base/warn.h"
#include "lib/data/text_files.h"

namespace trainer::data {
namespace {

// The number `text` holds in full (blanks around it ignored), or nullopt.
std::optional<double> number(const std::string& text) {
  std::string t = base::trimmed(text);
  if (t.empty()) return std::nullopt;
  const char* begin = t.data() + (t[0] == '+' ? 1 : 0);  // from_chars takes no '+', strtod does
  if (begin != t.data() && (t.size() == 1 || t[1] == '-' || t[1] == '+')) return std::nullopt;
  double value = 0;
  auto [end, error] = std::from_chars(begin, t.data() + t.size(), value);
  if (error != std::errc() || end != t.data() + t.size()) return std::nullopt;
  return value;
}

// SplitMix64: the split's random stream, the same on every machine and standard library.
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) by rejection (no modulo bias).
  uint64_t below(uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t r;
    do r = next();
    while (r >= limit);
    return r % n;
  }
};

class Parser {
 public:
  Parser(const std::string& text, const std::string& name) : text_(text), name_(name) {
    if (text_.compare(0, 3, "\xEF\xBB\xBF") == 0) pos_ = 3;  // UTF-8 byte-order mark
  }

  // The next record's fields, or false at the end of the text. Blank lines are skipped.
  bool next(std::vector<std::string>& fields, int64_t& line) {
    while (pos_ < text_.size() && (text_[pos_] == '\n' || text_[pos_] == '\r')) end_of_line();
    if (pos_ >= text_.size()) return false;
    fields.clear();
    line = line_;
    while (true) {
      fields.push_back(field());
      if (pos_ >= text_.size()) return true;
      char c = text_[pos_];
      if (c == ',') {
        ++pos_;
        if (pos_ >= text_.size()) {  // a trailing comma: one more, empty field
          fields.emplace_back();
          return true;
        }
        continue;
      }
      end_of_line();  // field() stops only at a comma, a line end or the end
      return true;
    }
  }

 private:
  void end_of_line() {
    if (text_[pos_] == '\r' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '\n') ++pos_;
    ++pos_;
    ++line_;
  }

  std::string field() {
    std::string value;
    if (pos_ < text_.size() && text_[pos_] == '"') {
      int64_t opened = line_;
      ++pos_;
      while (true) {
        if (pos_ >= text_.size()) {
          throw InputError(fmt::format(
              "{} line {}: a quoted field opened on this line is never closed", name_, opened));
        }
        char c = text_[pos_++];
        if (c == '"') {
          if (pos_ < text_.size() && text_[pos_] == '"') {
            value += '"';
            ++pos_;
            continue;
          }
          break;
        }
        if (c == '\n' || (c == '\r' && !(pos_ < text_.size() && text_[pos_] == '\n'))) ++line_;
        value += c;
      }
      if (pos_ < text_.size() && text_[pos_] != ',' && text_[pos_] != '\n' && text_[pos_] != '\r') {
        throw InputError(
            fmt::format("{} line {}: '{}' after a closing quote (a quoted field ends at its quote; "
                        "write a quote inside one as \"\")",
                        name_, line_, base::shown_text(text_.substr(pos_, 1))));
      }
      return value;
    }
    size_t end = text_.find_first_of(",\r\n", pos_);
    if (end == std::string::npos) end = text_.size();
    value = text_.substr(pos_, end - pos_);
    pos_ = end;
    return value;
  }

  const std::string& text_;
  const std::string& name_;
  size_t pos_ = 0;
  int64_t line_ = 1;
};

// The column names for an error line: each as base::shown_text(), the first 20 of them.
std::string columns(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 20; ++i)
    out += (i ? ", " : "") + base::shown_text(names[i]);
  if (names.size() > 20) out += fmt::format(", ... ({} in all)", names.size());
  return out;
}

// The index of column `column` (named by dataset_config `option`); InputError naming the nearest.
int64_t column_index(const CsvTable& table, const std::string& column, const std::string& option,
                     const std::string& name) {
  auto it = std::find(table.header.begin(), table.header.end(), column);
  if (it != table.header.end()) return it - table.header.begin();
  std::string near = base::nearest(column, table.header);
  // A header with numbers in it is likely the first row of a file without a header line.
  bool numbers = std::any_of(table.header.begin(), table.header.end(),
                             [](const std::string& h) { return number(h).has_value(); });
  throw InputError(fmt::format(
      "{} has no column '{}' (dataset_config {}{}; columns: {}){}", name, base::shown_text(column),
      option, near.empty() ? "" : fmt::format("; did you mean '{}'?", near), columns(table.header),
      numbers ? ": its first line looks like data; the file needs a header line naming its columns"
              : ""));
}

float feature_value(const CsvTable& table, int64_t row, int64_t column, const std::string& name) {
  const std::string& text = table.cell(row, column);
  std::optional<double> value = number(text);
  std::string where =
      fmt::format("{} line {}: column '{}'", name, table.lines[row], table.header[column]);
  if (base::trimmed(text).empty()) throw InputError(where + " is empty, not a number");
  if (!value)
    throw InputError(fmt::format("{} is '{}', not a number", where, base::shown_text(text)));
  float f = static_cast<float>(*value);
  if (!std::isfinite(f)) {
    throw InputError(
        fmt::format("{} is '{}', not a finite float32 number", where, base::shown_text(text)));
  }
  return f;
}

}  // namespace

CsvTable parse_csv(const std::string& text, const std::string& name) {
  Parser parser(text, name);
  CsvTable table;
  std::vector<std::string> fields;
  int64_t line = 0;
  if (!parser.next(fields, line)) {
    throw InputError(
        fmt::format("{} is empty (a CSV file starts with a header line naming its columns)", name));
  }
  table.header = fields;
  std::map<std::string, size_t> seen;
  bool all_numbers = true;
  for (size_t i = 0; i < fields.size(); ++i) {
    const std::string& column = fields[i];
    if (base::trimmed(column).empty()) {
      throw InputError(fmt::format("{} line {}: header column {} has no name", name, line, i + 1));
    }
    if (!seen.emplace(column, i).second) {
      throw InputError(fmt::format("{} line {}: header names column '{}' twice (columns {} and {})",
                                   name, line, base::shown_text(column), seen[column] + 1, i + 1));
    }
    all_numbers = all_numbers && number(column).has_value();
  }
  if (all_numbers) {
    throw InputError(fmt::format(
        "{} line {}: the first line holds numbers ('{}', ...), not column names: the file needs a "
        "header line naming its columns",
        name, line, base::shown_text(fields[0])));
  }
  while (parser.next(fields, line)) {
    if (fields.size() != table.header.size()) {
      throw InputError(fmt::format("{} line {}: {} field{}, but the header names {} columns", name,
                                   line, fields.size(), fields.size() == 1 ? "" : "s",
                                   table.header.size()));
    }
    for (auto& field : fields) table.cells.push_back(std::move(field));
    table.lines.push_back(line);
  }
  return table;
}

CsvTable read_csv(const std::string& path) {
  const std::string text = base::read_file(path, SIZE_MAX, "CSV file ", /*allow_pipes=*/false);
  // Text in another encoding, or a binary file, is named as such rather than misread as rows (a
  // NUL byte in a label would make a class of its own).
  refuse_wide_text(text, "CSV file " + path, path);
  if (!is_utf8_text(text)) {
    throw InputError(fmt::format(
        "CSV file {} is not UTF-8 text (invalid UTF-8 or a NUL byte); save it as UTF-8", path));
  }
  return parse_csv(text, path);
}

namespace {

// The feature columns: options.features by name, or every column but the label.
std::vector<int64_t> feature_columns(const CsvTable& table, const TabularOptions& options,
                                     int64_t label, const std::string& name) {
  std::vector<int64_t> features;
  if (options.features.empty()) {
    for (int64_t i = 0; i < static_cast<int64_t>(table.header.size()); ++i) {
      if (i != label) features.push_back(i);
    }
  } else {
    for (const auto& column : options.features) {
      int64_t index = column_index(table, column, "features", name);
      if (index == label) {
        throw InputError(fmt::format(
            "dataset_config features lists '{}', the label column (a model must not see its "
            "target)",
            base::shown_text(column)));
      }
      if (std::find(features.begin(), features.end(), index) != features.end()) {
        throw InputError(
            fmt::format("dataset_config features lists '{}' twice", base::shown_text(column)));
      }
      features.push_back(index);
    }
  }
  if (features.empty()) {
    throw InputError(fmt::format("{} has no feature column: its only column is the label '{}'",
                                 name, table.header[label]));
  }
  return features;
}

// Class ids of the label column, in the sorted order of its distinct values (numeric order when
// every value is an integer); the class names go to `data.classes`.
std::vector<int64_t> class_ids(const CsvTable& table, int64_t label, const std::string& name,
                               TabularData& data) {
  const int64_t n = table.rows();
  std::vector<std::string> values(n);
  bool all_numbers = true, all_integers = true;
  std::string fractional;
  for (int64_t r = 0; r < n; ++r) {
    values[r] = base::trimmed(table.cell(r, label));
    if (values[r].empty()) {
      throw InputError(fmt::format("{} line {}: label column '{}' is empty", name, table.lines[r],
                                   table.header[label]));
    }
    std::optional<double> v = number(values[r]);
    all_numbers = all_numbers && v && std::isfinite(*v);
    if (all_numbers && std::floor(*v) != *v) {
      all_integers = false;
      if (fractional.empty()) fractional = values[r];
    }
  }
  std::vector<std::string> distinct(values);
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  if (all_numbers && !all_integers) {
    throw InputError(fmt::format(
        "{}: label column '{}' holds numbers with fractions ('{}'), not classes (for a numeric "
        "target set dataset_config task to \"regression\")",
        name, table.header[label], base::shown_text(fractional)));
  }
  std::map<std::string, int64_t> id;
  if (all_numbers) {
    // Numeric order of the distinct values; "2" and "2.0" are one class.
    std::map<double, std::vector<std::string>> by_value;
    for (const auto& v : distinct) by_value[*number(v)].push_back(v);
    for (const auto& [value, spellings] : by_value) {
      for (const auto& s : spellings) id[s] = static_cast<int64_t>(data.classes.size());
      data.classes.push_back(spellings.front());
    }
  } else {
    for (const auto& v : distinct) {
      id[v] = static_cast<int64_t>(data.classes.size());
      data.classes.push_back(v);
    }
  }
  if (data.classes.size() < 2) {
    throw InputError(fmt::format(
        "{}: label column '{}' holds one class only ('{}'); classification needs two or more", name,
        table.header[label], base::shown_text(data.classes.front())));
  }
  std::vector<int64_t> classes(n);
  for (int64_t r = 0; r < n; ++r) classes[r] = id[values[r]];
  return classes;
}

// The split: a seeded shuffle, the first round(validation_fraction x rows) rows for evaluation,
// each split's features (row-major, `f` a row) and labels.
void split_rows(const CsvTable& table, const TabularOptions& options, const std::string& name,
                const std::vector<float>& x, int64_t f, const std::vector<int64_t>& classes,
                const std::vector<float>& targets, TabularData& data) {
  const int64_t n = table.rows();
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  SplitMix64 rng{options.seed};
  for (int64_t i = n - 1; i > 0; --i) {
    std::swap(order[i], order[rng.below(static_cast<uint64_t>(i) + 1)]);
  }
  int64_t n_eval = static_cast<int64_t>(std::llround(options.validation_fraction * n));
  if (options.validation_fraction > 0 && n_eval == 0) n_eval = 1;
  if (n - n_eval < 1) {
    throw InputError(fmt::format("{} has {} row{}: validation_fraction {} leaves no training row",
                                 name, n, n == 1 ? "" : "s", options.validation_fraction));
  }
  auto fill = [&](TabularSplit& split, int64_t begin, int64_t end) {
    split.size = end - begin;
    for (int64_t i = begin; i < end; ++i) {
      int64_t r = order[i];
      split.x.insert(split.x.end(), x.begin() + r * f, x.begin() + (r + 1) * f);
      split.lines.push_back(table.lines[r]);
      if (options.regression) {
        split.targets.push_back(targets[r]);
      } else {
        split.classes.push_back(classes[r]);
      }
    }
  };
  fill(data.eval, 0, n_eval);
  fill(data.train, n_eval, n);
  if (options.regression) return;
  // A class the training rows never show is still a class (the model scores it, accuracy counts
  // it), but the model cannot learn it: say so, and go on (a small file's split may do this).
  std::vector<bool> trained(data.classes.size(), false);
  for (int64_t id : data.train.classes) trained[id] = true;
  std::vector<std::string> unseen;
  for (int64_t id : data.eval.classes) {
    if (trained[id]) continue;
    trained[id] = true;  // named once
    unseen.push_back(base::shown_text(data.classes[id]));
  }
  const size_t named = std::min<size_t>(unseen.size(), 10);
  if (unseen.size() > named) {
    const size_t more = unseen.size() - named;
    unseen.resize(named);
    unseen.push_back(fmt::format("and {} more", more));
  }
  // Every process reads the table; the first says it (lib/data sees RANK as torchrun sets it).
  const char* rank = std::getenv("RANK");
  if (!unseen.empty() && (rank == nullptr || std::string(rank) == "0")) {
    base::warn(
        "{}: class{} {} of label column '{}' appear{} only in the validation split; the "
        "model never trains on {}",
        name, unseen.size() == 1 ? "" : "es", fmt::join(unseen, ", "),
        table.header[column_index(table, options.label, "label", name)],
        unseen.size() == 1 ? "s" : "", unseen.size() == 1 ? "it" : "them");
  }
}

// Standardisation of each feature with the training rows' mean and population standard
// deviation (a constant column only centred); an eval value too far for float32 is an error.
void standardise(const std::string& name, int64_t f, TabularData& data) {
  const int64_t n_train = data.train.size;
  data.mean.assign(f, 0.0);
  data.std.assign(f, 0.0);
  for (int64_t r = 0; r < n_train; ++r) {
    for (int64_t j = 0; j < f; ++j) data.mean[j] += data.train.x[r * f + j];
  }
  for (int64_t j = 0; j < f; ++j) data.mean[j] /= static_cast<double>(n_train);
  for (int64_t r = 0; r < n_train; ++r) {
    for (int64_t j = 0; j < f; ++j) {
      double d = data.train.x[r * f + j] - data.mean[j];
      data.std[j] += d * d;
    }
  }
  for (int64_t j = 0; j < f; ++j) {
    // A constant column: exactly centred (a mean rounded in double would leave +-1 after scaling).
    bool constant = true;
    for (int64_t r = 1; r < n_train && constant; ++r) {
      constant = data.train.x[r * f + j] == data.train.x[j];
    }
    if (constant) {
      data.mean[j] = data.train.x[j];
      data.std[j] = 0.0;
    } else {
      data.std[j] = std::sqrt(data.std[j] / n_train);
    }
  }
  for (TabularSplit* split : {&data.train, &data.eval}) {
    for (int64_t r = 0; r < split->size; ++r) {
      for (int64_t j = 0; j < f; ++j) {
        double v = split->x[r * f + j] - data.mean[j];
        if (data.std[j] > 0) v /= data.std[j];
        if (!std::isfinite(static_cast<float>(v))) {  // an eval value far outside the training's
          throw InputError(fmt::format(
              "{} line {}: column '{}' is {} training standard deviations ({}) from the training "
              "mean ({}): too far for float32",
              name, split->lines[r], data.features[j], v, data.std[j], data.mean[j]));
        }
        split->x[r * f + j] = static_cast<float>(v);
      }
    }
  }
}

}  // namespace

TabularData make_tabular(const CsvTable& table, const TabularOptions& options,
                         const std::string& name) {
  if (!(options.validation_fraction >= 0.0 && options.validation_fraction < 1.0)) {
    throw InputError(fmt::format("dataset_config validation_fraction is {}, not in [0, 1)",
                                 options.validation_fraction));
  }
  const int64_t label = column_index(table, options.label, "label", name);
  const std::vector<int64_t> features = feature_columns(table, options, label, name);
  const int64_t n = table.rows(), f = static_cast<int64_t>(features.size());
  if (n == 0) throw InputError(fmt::format("{} has a header line but no rows", name));

  TabularData data;
  for (int64_t index : features) data.features.push_back(table.header[index]);
  // All values, row-major in file order, then labels.
  std::vector<float> x(n * f);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < f; ++j) x[r * f + j] = feature_value(table, r, features[j], name);
  }
  std::vector<int64_t> classes;
  std::vector<float> targets;
  if (options.regression) {
    targets.resize(n);
    for (int64_t r = 0; r < n; ++r) targets[r] = feature_value(table, r, label, name);
  } else {
    classes = class_ids(table, label, name, data);
  }
  split_rows(table, options, name, x, f, classes, targets, data);
  standardise(name, f, data);
  return data;
}

TabularData load_tabular(const TabularOptions& options) {
  if (options.path.empty()) {
    throw InputError(
        "dataset_config path is missing: dataset_name csv reads the CSV file it names");
  }
  return make_tabular(read_csv(options.path), options, options.path);
}

}  // namespace trainer::data
