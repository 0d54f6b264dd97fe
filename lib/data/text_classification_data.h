// run_glue.py's text classification data without a task name, torch-free: the CSV or JSON files
// read as `datasets` types them, the text columns and the label list chosen by its rules, each row
// tokenized with truncation, and the label names the model's config gets.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainer::tokenizers {
class Tokenizer;
}  // namespace trainer::tokenizers

namespace trainer::data {

struct TextClassificationOptions {
  std::string train_file;       // "" for evaluation alone
  std::string validation_file;  // "" when no eval split is asked for
  int64_t max_length = 128;     // run_glue's max_seq_length
  // The classifier's labels: config.json's label2id (name -> id) and num_labels.
  std::map<std::string, int64_t> model_label2id;
  int64_t model_num_labels = 2;
};

// How a column of labels is typed, as `datasets` types it: integers (int64), numbers with a
// fraction among them (float64: a regression), or strings.
enum class LabelKind { kInteger, kFloat, kString };

// One data file as run_glue reads it: the texts of the chosen columns and the labels.
struct LabeledTexts {
  std::string path;
  std::vector<std::string> columns;        // as `datasets` names them, in order
  std::vector<std::string> first, second;  // the texts of sentence1_key (and sentence2_key)
  LabelKind kind = LabelKind::kString;
  std::vector<std::string> labels;  // each row's label as text (an integer in decimal)
  std::vector<double> values;       // kInteger, kFloat: the numbers
  std::vector<std::string> where;   // each row's place, for messages ("line 3")
};

// The columns of `columns` run_glue reads as the text without a task name: sentence1 and
// sentence2 when both are there, else the first two that are not `label`, else the first one
// (second ""). Throws InputError naming `path` when there is no column but the label.
std::pair<std::string, std::string> text_columns(const std::vector<std::string>& columns,
                                                 const std::string& path);

// The file at `path` (.csv: a header and rows, every cell a string; .json/.jsonl: `datasets`' JSON
// records) with the label column typed: a CSV column whose cells are all integers is kInteger,
// all numbers kFloat, else kString; a JSON column of integers kInteger, of numbers with a float
// among them kFloat, of strings kString. `keys`: the text columns to read (text_columns of the
// train file's columns; empty: this file's own). Throws InputError, one line naming the file and
// the row, for another extension, no `label` column, a label that is empty, null, true/false, or
// of another type than the column's first, a missing or empty text, a text that is not a string.
LabeledTexts read_labeled_texts(const std::string& path,
                                const std::pair<std::string, std::string>& keys = {});

// The ids the labels get. Classification: where the classifier's config names its labels (a
// label2id other than PretrainedConfig's LABEL_0, LABEL_1, ...), each label's id is its name's
// there (compared in lower case, as run_glue compares them); otherwise run_glue's label_to_id:
// the sorted distinct labels of the train file (integers in numeric order, strings in code point
// order) numbered from 0 (evaluation alone: integer labels are the ids themselves).
struct LabelPlan {
  bool regression = false;
  bool from_model = false;             // the ids are the classifier's own
  bool integer_names = false;          // the names are integers (run_glue's int label_list)
  std::vector<std::string> names;      // by id (run_glue's label_list), when not from_model
  std::map<std::string, int64_t> ids;  // a label's text -> its id
  int64_t num_labels = 1;
};

// run_glue's `model.config.label2id = label_to_id` and id2label, as save_pretrained writes them
// (keys strings; an integer label's name stays an integer in id2label), for a plan of names.
nlohmann::ordered_json label2id_json(const LabelPlan& plan);
nlohmann::ordered_json id2label_json(const LabelPlan& plan);

// One split tokenized: input ids and a class id or a target per row.
struct TextClassificationSplit {
  std::vector<std::vector<int32_t>> input_ids;
  std::vector<int64_t> classes;  // classification
  std::vector<float> targets;    // regression
  int64_t size() const { return static_cast<int64_t>(input_ids.size()); }
};

struct TextClassificationData {
  std::string sentence1_key, sentence2_key;  // sentence2_key "" for one text a row
  LabelPlan labels;
  TextClassificationSplit train, eval;
};

// Both files read, their labels planned and each row tokenized as run_glue's preprocess_function
// does (tokenizer(sentence1, sentence2, truncation=True, max_length=max_length), no padding).
// Throws InputError, one line, for bad files (read_labeled_texts), a label the classifier does
// not name, more or fewer classes in the train file than its num_labels, an integer label
// outside it, a validation_file that lacks a text column or types its labels otherwise, and a
// max_length shorter than the tokenizer's special tokens.
TextClassificationData prepare_text_classification(const TextClassificationOptions& options,
                                                   const tokenizers::Tokenizer& tokenizer);

}  // namespace trainer::data
