// run_glue.py's data without a task name: files typed, text columns and labels chosen, rows cut.
#include "lib/data/text_classification_data.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/base/errors.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"
#include "lib/data/csv_table.h"
#include "lib/data/lm_files.h"
#include "lib/tokenizers/tokenizer.h"

namespace trainer::data {

namespace {

using Json = nlohmann::ordered_json;

const char kLabel[] = "label";

// The file's extension, after the last '.' of its name ("" when none).
std::string extension_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  return path.substr(dot + 1);
}

// The column names for messages: 'a', 'b'.
std::string listed(const std::vector<std::string>& names) {
  std::vector<std::string> quoted;
  for (const auto& name : names) quoted.push_back("'" + base::shown_text(name) + "'");
  return fmt::format("{}", fmt::join(quoted, ", "));
}

// `text` without the blanks around it.
std::string trimmed(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \t") - begin + 1);
}

// A CSV cell as pandas reads a number: an integer, or a finite float; nothing otherwise.
std::optional<double> csv_number(const std::string& cell, bool& integer) {
  const std::string text = trimmed(cell);
  if (text.empty()) return std::nullopt;
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  const long long whole = std::strtoll(begin, &end, 10);
  if (errno == 0 && *end == '\0') {
    integer = true;
    return static_cast<double>(whole);
  }
  errno = 0;
  const double value = std::strtod(begin, &end);
  if (*end != '\0' || errno != 0 || !std::isfinite(value)) return std::nullopt;
  integer = false;
  return value;
}

// A row's labels and texts, before the label column is typed.
struct RawRows {
  std::vector<std::string> columns;
  std::vector<std::vector<Json>> cells;  // per row, per column (null where missing)
  std::vector<std::string> where;
  bool csv = false;
};

RawRows read_csv_rows(const std::string& path) {
  const CsvTable table = read_csv(path);
  RawRows rows;
  rows.csv = true;
  rows.columns = table.header;
  for (int64_t r = 0; r < table.rows(); ++r) {
    std::vector<Json> row;
    for (size_t c = 0; c < table.header.size(); ++c) row.emplace_back(table.cell(r, c));
    rows.cells.push_back(std::move(row));
    rows.where.push_back(fmt::format("line {}", table.lines[r]));
  }
  return rows;
}

RawRows read_json_rows(const std::string& path) {
  const std::vector<JsonRecord> records = read_json_records(path);
  RawRows rows;
  for (const JsonRecord& record : records) {
    for (const auto& [key, value] : record.value.items()) {
      if (std::find(rows.columns.begin(), rows.columns.end(), key) == rows.columns.end()) {
        rows.columns.push_back(key);
      }
    }
  }
  for (const JsonRecord& record : records) {
    std::vector<Json> row;
    for (const std::string& column : rows.columns) {
      row.push_back(record.value.contains(column) ? record.value[column] : Json());
    }
    rows.cells.push_back(std::move(row));
    rows.where.push_back(record.where);
  }
  return rows;
}

// What a label cell is: kInteger, kFloat or kString (its value in `value`); throws for a cell
// that is no label.
LabelKind label_of(const Json& cell, bool csv, double& value, const std::string& where) {
  if (csv) {
    const std::string& text = cell.get_ref<const std::string&>();
    if (trimmed(text).empty()) throw InputError(fmt::format("{}: the label is empty", where));
    bool integer = false;
    const auto number = csv_number(text, integer);
    if (!number) return LabelKind::kString;
    value = *number;
    return integer ? LabelKind::kInteger : LabelKind::kFloat;
  }
  if (cell.is_number_integer()) {
    value = static_cast<double>(cell.get<int64_t>());
    return LabelKind::kInteger;
  }
  if (cell.is_number_float()) {
    value = cell.get<double>();
    return LabelKind::kFloat;
  }
  if (cell.is_string() && !cell.get_ref<const std::string&>().empty()) return LabelKind::kString;
  throw InputError(fmt::format(
      "{}: the label is {} (a class name, an integer class, or a float target for a regression)",
      where, cell.is_string() ? "empty" : base::shown(cell)));
}

// The label column typed as `datasets` types it (a CSV column by pandas' rules: strings unless
// every cell is a number).
void type_labels(const RawRows& rows, size_t column, LabeledTexts& out) {
  std::vector<LabelKind> kinds;
  for (size_t r = 0; r < rows.cells.size(); ++r) {
    const std::string where = fmt::format("{} {}", out.path, rows.where[r]);
    double value = 0;
    kinds.push_back(label_of(rows.cells[r][column], rows.csv, value, where));
    out.values.push_back(value);
    const bool integer = kinds.back() == LabelKind::kInteger;
    out.labels.push_back(integer ? std::to_string(static_cast<int64_t>(value))
                         : rows.cells[r][column].is_string()
                             ? rows.cells[r][column].get<std::string>()
                             : base::shown(rows.cells[r][column]));
    if (!rows.csv && r > 0 &&
        (kinds[0] == LabelKind::kString) != (kinds[r] == LabelKind::kString)) {
      throw InputError(fmt::format(
          "{}: the label is {}, but {}'s is {} (a label column holds names or numbers, not both)",
          where, base::shown(rows.cells[r][column]), rows.where[0],
          base::shown(rows.cells[0][column])));
    }
  }
  const auto has = [&](LabelKind k) { return std::count(kinds.begin(), kinds.end(), k) > 0; };
  out.kind = has(LabelKind::kString)  ? LabelKind::kString
             : has(LabelKind::kFloat) ? LabelKind::kFloat
                                      : LabelKind::kInteger;
  // A CSV column of names keeps its numbers as they were written ("01" is not "1").
  if (out.kind == LabelKind::kString && rows.csv) {
    for (size_t r = 0; r < rows.cells.size(); ++r) {
      out.labels[r] = rows.cells[r][column].get<std::string>();
    }
  }
}

// A row's text in `column`: a string that is not empty.
std::string text_of(const RawRows& rows, size_t r, size_t column, const std::string& path) {
  const Json& cell = rows.cells[r][column];
  const std::string where = fmt::format("{} {}", path, rows.where[r]);
  if (!cell.is_string()) {
    throw InputError(fmt::format("{}: '{}' is {}, not a text", where,
                                 base::shown_text(rows.columns[column]), base::shown(cell)));
  }
  if (cell.get_ref<const std::string&>().empty()) {
    throw InputError(fmt::format("{}: '{}' is an empty text (every row needs its text)", where,
                                 base::shown_text(rows.columns[column])));
  }
  return cell.get<std::string>();
}

size_t column_index(const RawRows& rows, const std::string& name, const std::string& path,
                    const std::string& why) {
  const auto it = std::find(rows.columns.begin(), rows.columns.end(), name);
  if (it == rows.columns.end()) {
    throw InputError(fmt::format("{} has no '{}' column ({}; its columns: {})", path,
                                 base::shown_text(name), why, listed(rows.columns)));
  }
  return static_cast<size_t>(it - rows.columns.begin());
}

}  // namespace

std::pair<std::string, std::string> text_columns(const std::vector<std::string>& columns,
                                                 const std::string& path) {
  std::vector<std::string> texts;
  for (const std::string& c : columns) {
    if (c != kLabel) texts.push_back(c);
  }
  const auto has = [&](const char* name) {
    return std::find(texts.begin(), texts.end(), name) != texts.end();
  };
  if (has("sentence1") && has("sentence2")) return {"sentence1", "sentence2"};
  if (texts.size() >= 2) return {texts[0], texts[1]};
  if (texts.size() == 1) return {texts[0], ""};
  throw InputError(fmt::format(
      "{} has no text column (its columns: {}): text classification reads the text from the "
      "columns beside 'label' (sentence1 and sentence2, else the first one or two)",
      path, listed(columns)));
}

LabeledTexts read_labeled_texts(const std::string& path,
                                const std::pair<std::string, std::string>& keys) {
  const std::string extension = extension_of(path);
  if (extension != "csv" && extension != "json" && extension != "jsonl") {
    throw InputError(fmt::format(
        "data file '{}' {}; text classification reads .csv, .json or .jsonl (JSON Lines) files",
        path,
        extension.empty() ? std::string("has no extension")
                          : fmt::format("has the extension '.{}'", extension)));
  }
  const RawRows rows = extension == "csv" ? read_csv_rows(path) : read_json_rows(path);
  LabeledTexts out;
  out.path = path;
  out.columns = rows.columns;
  const size_t label = column_index(rows, kLabel, path, "text classification's labels");
  const auto [first, second] = keys.first.empty() ? text_columns(rows.columns, path) : keys;
  const size_t a = column_index(rows, first, path, "a text column of the train file");
  const size_t b = second.empty() ? a : column_index(rows, second, path, "a text column");
  out.where = rows.where;
  for (size_t r = 0; r < rows.cells.size(); ++r) {
    out.first.push_back(text_of(rows, r, a, path));
    if (!second.empty()) out.second.push_back(text_of(rows, r, b, path));
  }
  type_labels(rows, label, out);
  return out;
}

namespace {

// Whether label2id is PretrainedConfig's own for num_labels (LABEL_0, LABEL_1, ...), or none.
bool default_names(const std::map<std::string, int64_t>& label2id, int64_t num_labels) {
  if (label2id.empty()) return true;
  if (static_cast<int64_t>(label2id.size()) != num_labels) return false;
  for (int64_t i = 0; i < num_labels; ++i) {
    const auto it = label2id.find(fmt::format("LABEL_{}", i));
    if (it == label2id.end() || it->second != i) return false;
  }
  return true;
}

// Python's str.lower() on ASCII letters (run_glue lowers the config's names).
std::string lowered(std::string text) {
  for (char& c : text) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return text;
}

// The classifier's own ids, by its names in lower case.
LabelPlan model_plan(const TextClassificationOptions& o) {
  LabelPlan plan;
  plan.from_model = true;
  plan.num_labels = o.model_num_labels;
  for (const auto& [name, id] : o.model_label2id) plan.ids[lowered(name)] = id;
  if (o.model_label2id.empty()) {
    for (int64_t i = 0; i < o.model_num_labels; ++i) plan.ids[fmt::format("label_{}", i)] = i;
  }
  return plan;
}

// run_glue's label_list (the train file's distinct labels, sorted) numbered from 0.
LabelPlan sorted_plan(const LabeledTexts& train, const TextClassificationOptions& o) {
  LabelPlan plan;
  plan.integer_names = train.kind == LabelKind::kInteger;
  if (plan.integer_names) {
    std::set<int64_t> values;
    for (double v : train.values) values.insert(static_cast<int64_t>(v));
    for (int64_t v : values) plan.names.push_back(std::to_string(v));
  } else {
    const std::set<std::string> names(train.labels.begin(), train.labels.end());
    plan.names.assign(names.begin(), names.end());
  }
  for (size_t i = 0; i < plan.names.size(); ++i) {
    plan.ids[plan.names[i]] = static_cast<int64_t>(i);
  }
  plan.num_labels = static_cast<int64_t>(plan.names.size());
  if (plan.num_labels == 1) {
    throw InputError(fmt::format(
        "{}: every label is '{}': classification needs two classes or more (float labels are a "
        "regression's targets)",
        train.path, base::shown_text(plan.names[0])));
  }
  if (plan.num_labels != o.model_num_labels) {
    throw InputError(fmt::format(
        "{} has {} classes ({}); the classifier has num_labels {}: give a classifier of {} labels",
        train.path, plan.num_labels, listed(plan.names), o.model_num_labels, plan.num_labels));
  }
  return plan;
}

// Evaluation alone of a classifier with PretrainedConfig's names: integer labels are its ids.
LabelPlan identity_plan(const TextClassificationOptions& o) {
  LabelPlan plan;
  plan.from_model = plan.integer_names = true;
  plan.num_labels = o.model_num_labels;
  for (int64_t i = 0; i < o.model_num_labels; ++i) plan.ids[std::to_string(i)] = i;
  return plan;
}

LabelPlan plan_labels(const LabeledTexts* train, const LabeledTexts& decider,
                      const TextClassificationOptions& o) {
  if (decider.kind == LabelKind::kFloat) {
    LabelPlan plan;
    plan.regression = true;
    return plan;
  }
  if (!default_names(o.model_label2id, o.model_num_labels)) return model_plan(o);
  if (train) return sorted_plan(*train, o);
  return decider.kind == LabelKind::kString ? model_plan(o) : identity_plan(o);
}

// Which labels a plan knows, for messages.
std::string known_labels(const LabelPlan& plan) {
  if (!plan.from_model) return fmt::format("the train file's labels: {}", listed(plan.names));
  std::vector<std::string> names;
  for (const auto& [name, id] : plan.ids) names.push_back(name);
  return fmt::format("the classifier's labels: {}", listed(names));
}

// The class ids or targets of `file`'s rows.
void add_labels(const LabeledTexts& file, const LabelPlan& plan, TextClassificationSplit& split) {
  for (size_t r = 0; r < file.labels.size(); ++r) {
    if (plan.regression) {
      if (file.kind == LabelKind::kString) {
        throw InputError(fmt::format(
            "{} {}: the label '{}' is not a number (the labels are float targets: a regression)",
            file.path, file.where[r], base::shown_text(file.labels[r])));
      }
      split.targets.push_back(static_cast<float>(file.values[r]));
      continue;
    }
    const auto it = plan.ids.find(file.labels[r]);
    if (it == plan.ids.end()) {
      throw InputError(fmt::format("{} {}: the label '{}' is not a class here ({})", file.path,
                                   file.where[r], base::shown_text(file.labels[r]),
                                   known_labels(plan)));
    }
    split.classes.push_back(it->second);
  }
}

// Each row's input ids: tokenizer(first, second, truncation=True, max_length=max_length).
void tokenize_rows(const LabeledTexts& file, const tokenizers::Tokenizer& tokenizer,
                   int64_t max_length, TextClassificationSplit& split) {
  const bool pair = !file.second.empty();
  const size_t added = tokenizer.special_tokens_added(pair);
  if (max_length < static_cast<int64_t>(added)) {
    throw InputError(fmt::format(
        "block_size {} leaves no room for the text: the tokenizer adds {} special tokens to each "
        "row",
        max_length, added));
  }
  for (size_t r = 0; r < file.first.size(); ++r) {
    const std::string_view second = pair ? std::string_view(file.second[r]) : std::string_view();
    split.input_ids.push_back(tokenizer.encode_truncated(file.first[r], pair ? &second : nullptr,
                                                         static_cast<size_t>(max_length)));
  }
}

}  // namespace

nlohmann::ordered_json label2id_json(const LabelPlan& plan) {
  Json out = Json::object();
  for (size_t i = 0; i < plan.names.size(); ++i) out[plan.names[i]] = static_cast<int64_t>(i);
  return out;
}

nlohmann::ordered_json id2label_json(const LabelPlan& plan) {
  Json out = Json::object();
  for (size_t i = 0; i < plan.names.size(); ++i) {
    out[std::to_string(i)] =
        plan.integer_names ? Json(std::stoll(plan.names[i])) : Json(plan.names[i]);
  }
  return out;
}

TextClassificationData prepare_text_classification(const TextClassificationOptions& o,
                                                   const tokenizers::Tokenizer& tokenizer) {
  if (o.train_file.empty() && o.validation_file.empty()) {
    throw std::invalid_argument("prepare_text_classification: no file");
  }
  TextClassificationData data;
  std::optional<LabeledTexts> train, eval;
  std::pair<std::string, std::string> keys;
  if (!o.train_file.empty()) {
    train = read_labeled_texts(o.train_file);
    keys = text_columns(train->columns, o.train_file);
  }
  if (!o.validation_file.empty()) eval = read_labeled_texts(o.validation_file, keys);
  if (!train) keys = text_columns(eval->columns, o.validation_file);
  data.sentence1_key = keys.first;
  data.sentence2_key = keys.second;
  data.labels = plan_labels(train ? &*train : nullptr, train ? *train : *eval, o);
  if (train) {
    add_labels(*train, data.labels, data.train);
    tokenize_rows(*train, tokenizer, o.max_length, data.train);
  }
  if (eval) {
    add_labels(*eval, data.labels, data.eval);
    tokenize_rows(*eval, tokenizer, o.max_length, data.eval);
  }
  return data;
}

}  // namespace trainer::data
