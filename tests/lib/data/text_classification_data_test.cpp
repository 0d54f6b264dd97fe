// run_glue.py's text classification data without LibTorch: the text columns it picks, the label
// column typed as `datasets` types it, the label ids (the classifier's names, or the sorted
// labels), and pairs of texts tokenized with `tokenizers`' longest-first truncation (the ids
// Transformers 5.24 gives, written here).
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lib/base/errors.h"
#include "lib/data/text_classification_data.h"
#include "lib/tokenizers/tokenizer.h"
#include "tests/test_util.h"

namespace trainer::text_classification_data_test {
namespace {

using data::LabelKind;

TEST(TextClassificationData, TextColumnsFollowRunGlue) {
  using Columns = std::pair<std::string, std::string>;
  EXPECT_EQ(data::text_columns({"idx", "sentence2", "label", "sentence1"}, "f"),
            Columns("sentence1", "sentence2"));
  EXPECT_EQ(data::text_columns({"label", "premise", "hypothesis", "idx"}, "f"),
            Columns("premise", "hypothesis"));
  EXPECT_EQ(data::text_columns({"text", "label"}, "f"), Columns("text", ""));
  testing::expect_input_error([] { data::text_columns({"label"}, "f.csv"); },
                              {"f.csv has no text column (its columns: 'label')"});
}

// A CSV label column is typed by pandas' rules, a JSON one by pyarrow's.
TEST(TextClassificationData, LabelColumnsAreTypedAsDatasetsTypesThem) {
  testing::TempDir tmp;
  auto typed = [&](const std::string& name, const std::string& text) {
    std::ofstream(tmp.file(name)) << text;
    return data::read_labeled_texts(tmp.file(name));
  };
  auto ints = typed("a.csv", "text,label\nx,10\ny,2\nz, 7\n");
  EXPECT_EQ(ints.kind, LabelKind::kInteger);
  EXPECT_EQ(ints.labels, (std::vector<std::string>{"10", "2", "7"}));
  EXPECT_EQ(typed("b.csv", "text,label\nx,1\ny,2.5\n").kind, LabelKind::kFloat);
  auto names = typed("c.csv", "text,label\nx,01\ny,pos\n");
  EXPECT_EQ(names.kind, LabelKind::kString);
  EXPECT_EQ(names.labels, (std::vector<std::string>{"01", "pos"}));
  EXPECT_EQ(
      typed("d.jsonl", "{\"text\": \"x\", \"label\": 1}\n{\"text\": \"y\", \"label\": 2.0}\n").kind,
      LabelKind::kFloat);
  auto pair = typed("e.jsonl", "{\"label\": 0, \"q\": \"a\", \"p\": \"b\"}\n");
  EXPECT_EQ(pair.first, std::vector<std::string>{"a"});
  EXPECT_EQ(pair.second, std::vector<std::string>{"b"});
  testing::expect_input_error(
      [&] {
        typed("f.jsonl", "{\"text\": \"x\", \"label\": 1}\n{\"text\": \"y\", \"label\": \"a\"}\n");
      },
      {"f.jsonl line 2: the label is \"a\", but line 1's is 1 (a label column holds names or "
       "numbers, not both)"});
  testing::expect_input_error(
      [&] { typed("g.jsonl", "{\"text\": \"x\", \"label\": true}\n"); },
      {"g.jsonl line 1: the label is true (a class name, an integer class, or a float target"});
  testing::expect_input_error([&] { typed("h.jsonl", "{\"text\": 3, \"label\": 1}\n"); },
                              {"h.jsonl line 1: 'text' is 3, not a text"});
  testing::expect_input_error([&] { typed("i.txt", "x\n"); },
                              {"has the extension '.txt'; text classification reads .csv"});
}

// Integer labels in numeric order; with PretrainedConfig's names the config gets run_glue's.
TEST(TextClassificationData, SortedLabelsBecomeTheIdsAndTheConfigsNames) {
  testing::TempDir tmp;
  std::ofstream(tmp.file("train.csv")) << "text,label\nx,10\ny,2\nz,7\nw,2\n";
  std::ofstream(tmp.file("eval.csv")) << "text,label\nx,7\ny,3\n";
  const auto tokenizer = tokenizers::Tokenizer::load(testing::reference_dir("seq_cls") + "/llama");
  data::TextClassificationOptions options;
  options.train_file = tmp.file("train.csv");
  options.model_label2id = {{"LABEL_0", 0}, {"LABEL_1", 1}, {"LABEL_2", 2}};
  options.model_num_labels = 3;
  const auto data = data::prepare_text_classification(options, tokenizer);
  EXPECT_EQ(data.train.classes, (std::vector<int64_t>{2, 0, 1, 0}));
  EXPECT_EQ(data::label2id_json(data.labels).dump(), R"({"2":0,"7":1,"10":2})");
  EXPECT_EQ(data::id2label_json(data.labels).dump(), R"({"0":2,"1":7,"2":10})");
  options.validation_file = tmp.file("eval.csv");
  testing::expect_input_error(
      [&] { data::prepare_text_classification(options, tokenizer); },
      {"eval.csv line 3: the label '3' is not a class here (the train file's labels: '2', '7', "
       "'10')"});
  // Evaluation alone: integer labels are the classifier's ids.
  options.train_file.clear();
  testing::expect_input_error([&] { data::prepare_text_classification(options, tokenizer); },
                              {"eval.csv line 2: the label '7' is not a class here (the "
                               "classifier's labels: '0', '1', '2')"});
}

// tokenizer(a, b, truncation=True, max_length=n)["input_ids"] in Transformers 5.24: Llama's
// template puts BOS before each text, GPT-2's none.
TEST(TextClassificationData, PairsAreCutLongestFirstAsTokenizersCutsThem) {
  const std::string a = "The movie was wonderful and I loved every minute.";
  const std::string b = "What a fantastic concert that was!";
  const std::string_view second = b;
  const auto llama = tokenizers::Tokenizer::load(testing::reference_dir("seq_cls") + "/llama");
  EXPECT_EQ(llama.special_tokens_added(false), 1u);
  EXPECT_EQ(llama.special_tokens_added(true), 2u);
  EXPECT_EQ(llama.encode_truncated(a, &second, 12),
            (std::vector<int32_t>{0, 319, 279, 80, 87, 444, 0, 56, 73, 270, 260, 283}));
  EXPECT_EQ(llama.encode_truncated(a, &second, 20),
            (std::vector<int32_t>{0, 319, 279, 80,  87,  444, 431, 266, 264, 69,
                                  0, 56,  73,  270, 260, 283, 416, 489, 304, 449}));
  const std::string longer = b + " " + a;
  const std::string_view long_second = longer;
  EXPECT_EQ(llama.encode_truncated("Hi there", &long_second, 16),
            (std::vector<int32_t>{0, 41, 74, 265, 263, 0, 56, 73, 270, 260, 283, 416, 489, 304, 449,
                                  68}));
  EXPECT_EQ(llama.encode_truncated(a, nullptr, 5), (std::vector<int32_t>{0, 319, 279, 80, 87}));
  EXPECT_EQ(llama.encode_truncated(a, &second, 100).size(), 42u);
  EXPECT_THROW(llama.encode_truncated(a, &second, 1), std::invalid_argument);
  const auto gpt2 = tokenizers::Tokenizer::load(testing::reference_dir("seq_cls") + "/gpt2");
  EXPECT_EQ(gpt2.encode_truncated(a, &second, 12),
            (std::vector<int32_t>{316, 276, 79, 86, 438, 426, 55, 72, 269, 259, 280, 411}));
  EXPECT_EQ(gpt2.encode_truncated("Hi there", &long_second, 16),
            (std::vector<int32_t>{40, 73, 264, 262, 55, 72, 269, 259, 280, 411, 482, 301, 443, 67,
                                  261, 84}));
}

}  // namespace
}  // namespace trainer::text_classification_data_test
