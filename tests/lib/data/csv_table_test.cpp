// CSV tables, torch-free: the RFC 4180 reader (quotes, line breaks in fields, CRLF, BOM), every
// bad-file error with its line, labels to class ids, the seeded split, standardisation fitted on
// the training rows, and Fisher's Iris as shipped in data/iris.csv.
#include "lib/data/csv_table.h"

#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "lib/base/errors.h"
#include "tests/test_util.h"

namespace trainer::data {
namespace csv_table_test {

const std::string kIris = std::string(SOURCE_DIR) + "/data/iris.csv";

TabularData tabular(const std::string& text, TabularOptions options) {
  return make_tabular(parse_csv(text, "t.csv"), options, "t.csv");
}

TEST(CsvReader, QuotesCommasLineBreaksCrlfAndBom) {
  std::string text =
      "\xEF\xBB\xBF"
      "name,\"a,b\",c\r\n"
      "\"x, \"\"y\"\"\",1,2\r\n"
      "\r\n"
      "\"two\nlines\",3,\n"
      "plain\"quote,4,5";
  CsvTable table = parse_csv(text, "t.csv");
  EXPECT_EQ(table.header, (std::vector<std::string>{"name", "a,b", "c"}));
  ASSERT_EQ(table.rows(), 3);
  EXPECT_EQ(table.cell(0, 0), "x, \"y\"");
  EXPECT_EQ(table.cell(0, 2), "2");
  EXPECT_EQ(table.cell(1, 0), "two\nlines");
  EXPECT_EQ(table.cell(1, 2), "");  // a trailing comma: an empty last field
  EXPECT_EQ(table.cell(2, 0), "plain\"quote");
  // Lines: the blank line 3 is skipped; the record after a two-line field starts on line 6.
  EXPECT_EQ(table.lines, (std::vector<int64_t>{2, 4, 6}));
}

TEST(CsvReader, BadFilesNameTheLine) {
  auto parse = [](const std::string& text) {
    return testing::input_error_of([&] { parse_csv(text, "t.csv"); });
  };
  EXPECT_EQ(parse(""), "t.csv is empty (a CSV file starts with a header line naming its columns)");
  EXPECT_EQ(parse("\n\r\n\n"),
            "t.csv is empty (a CSV file starts with a header line naming its columns)");
  EXPECT_EQ(parse("a,b\n1,2\n\"3\n,4\n5,6\n"),
            "t.csv line 3: a quoted field opened on this line is never closed");
  EXPECT_EQ(parse("a,b\n\"1\"x,2\n"),
            "t.csv line 2: 'x' after a closing quote (a quoted field ends at its quote; write a "
            "quote inside one as \"\")");
  EXPECT_EQ(parse("a,b,c\n1,2,3\n\"x\ny\",2,3\n1,2\n"),
            "t.csv line 5: 2 fields, but the header names 3 columns");
  EXPECT_EQ(parse("5.1,3.5,0\n"),
            "t.csv line 1: the first line holds numbers ('5.1', ...), not column names: the file "
            "needs a header line naming its columns");
  EXPECT_EQ(parse("a,b,a\n"), "t.csv line 1: header names column 'a' twice (columns 1 and 3)");
  EXPECT_EQ(parse("a,,b\n"), "t.csv line 1: header column 2 has no name");
  EXPECT_EQ(testing::input_error_of([] { read_csv("/nonexistent/iris.csv"); }),
            "cannot open CSV file /nonexistent/iris.csv: No such file or directory");
}

TEST(CsvTabular, BadValuesAndColumnsAreOneLineErrors) {
  std::string text = "sepal_length,petal_width,species\n5.1,0.2,setosa\n7.0,abc,versicolor\n";
  TabularOptions options;
  options.label = "species";
  EXPECT_EQ(testing::input_error_of([&] { tabular(text, options); }),
            "t.csv line 3: column 'petal_width' is 'abc', not a number");
  EXPECT_EQ(testing::input_error_of([&] {
              tabular("x,y\n1,a\n ,b\n", {"", {}, "y"});
            }),
            "t.csv line 3: column 'x' is empty, not a number");
  EXPECT_EQ(testing::input_error_of([&] {
              tabular("x,y\n1,a\n1e39,b\n", {"", {}, "y"});
            }),
            "t.csv line 3: column 'x' is '1e39', not a finite float32 number");
  options.features = {"sepal_length", "petal_widht"};
  EXPECT_EQ(testing::input_error_of([&] { tabular(text, options); }),
            "t.csv has no column 'petal_widht' (dataset_config features; did you mean "
            "'petal_width'?; columns: sepal_length, petal_width, species)");
  options.features = {"sepal_length", "species"};
  EXPECT_EQ(testing::input_error_of([&] { tabular(text, options); }),
            "dataset_config features lists 'species', the label column (a model must not see its "
            "target)");
  options.features = {"sepal_length", "sepal_length"};
  EXPECT_EQ(testing::input_error_of([&] { tabular(text, options); }),
            "dataset_config features lists 'sepal_length' twice");
  options = {};  // label "label": missing
  EXPECT_EQ(testing::input_error_of([&] { tabular(text, options); }),
            "t.csv has no column 'label' (dataset_config label; columns: sepal_length, "
            "petal_width, species)");
  options.label = "specie";
  EXPECT_NE(
      testing::input_error_of([&] { tabular(text, options); }).find("did you mean 'species'?"),
      std::string::npos);
  EXPECT_EQ(testing::input_error_of([&] {
              tabular("x,y\n", {"", {}, "y"});
            }),
            "t.csv has a header line but no rows");
  EXPECT_EQ(testing::input_error_of([&] {
              tabular("y\n1\n", {"", {}, "y"});
            }),
            "t.csv has no feature column: its only column is the label 'y'");
  EXPECT_EQ(testing::input_error_of([&] {
              tabular("x,y\n1,a\n2,a\n", {"", {}, "y"});
            }),
            "t.csv: label column 'y' holds one class only ('a'); classification needs two or more");
  EXPECT_EQ(testing::input_error_of([&] {
              tabular("x,y\n1,0.5\n2,1\n", {"", {}, "y"});
            }),
            "t.csv: label column 'y' holds numbers with fractions ('0.5'), not classes (for a "
            "numeric target set dataset_config task to \"regression\")");
  EXPECT_EQ(testing::input_error_of([&] {
              tabular("x,y\n1,\n2,1\n", {"", {}, "y"});
            }),
            "t.csv line 2: label column 'y' is empty");
  EXPECT_EQ(testing::input_error_of([&] {
              tabular("x,y\n1,a\n2,b\n", {"", {}, "y", false, 1.0});
            }),
            "dataset_config validation_fraction is 1, not in [0, 1)");
  EXPECT_EQ(testing::input_error_of([&] {
              tabular("x,y\n1,a\n2,b\n", {"", {}, "y", false, 0.9});
            }),
            "t.csv has 2 rows: validation_fraction 0.9 leaves no training row");
  // A file without its header line: the first row's numbers are no column names.
  EXPECT_EQ(testing::input_error_of([&] {
              tabular("5.1,3.5,setosa\n4.9,3.0,setosa\n", {"", {}, "species"});
            }),
            "t.csv has no column 'species' (dataset_config label; columns: 5.1, 3.5, setosa): its "
            "first line looks like data; the file needs a header line naming its columns");
}

TEST(CsvTabular, ClassIdsFollowTheSortedDistinctLabels) {
  // Integers in numeric order ("2" and "2.0" one class), strings in byte order.
  TabularData numeric = tabular("x,y\n1,10\n2,9\n3,2\n4,2.0\n5, 9 \n", {"", {}, "y", false, 0.0});
  EXPECT_EQ(numeric.classes, (std::vector<std::string>{"2", "9", "10"}));
  EXPECT_EQ(numeric.num_labels(), 3);
  // No eval rows: the train split is the file's rows shuffled; map them back through x.
  std::vector<int64_t> by_line(5);
  for (int64_t i = 0; i < numeric.train.size; ++i) {
    by_line[numeric.train.lines[i] - 2] = numeric.train.classes[i];
  }
  EXPECT_EQ(by_line, (std::vector<int64_t>{2, 1, 0, 0, 1}));
  TabularData text = tabular("x,y\n1,b\n2,B\n3,a\n", {"", {}, "y", false, 0.0});
  EXPECT_EQ(text.classes, (std::vector<std::string>{"B", "a", "b"}));
}

TEST(CsvTabular, ConstantColumnIsCentredNotNan) {
  TabularData data = tabular("c,x,y\n0.1,1,a\n0.1,2,b\n0.1,3,a\n", {"", {}, "y", false, 0.0});
  EXPECT_EQ(data.std[0], 0.0);
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(data.train.x[i * 2], 0.0f);
  EXPECT_NEAR(data.mean[1], 2.0, 1e-12);
  EXPECT_NEAR(data.std[1], std::sqrt(2.0 / 3.0), 1e-12);  // population std, as StandardScaler
}

TEST(CsvIris, ShippedTableHasFishersCountsAndMeans) {
  TabularOptions options;
  options.path = kIris;
  options.label = "species";
  options.validation_fraction = 0.0;
  TabularData data = load_tabular(options);
  EXPECT_EQ(data.features, (std::vector<std::string>{"sepal_length", "sepal_width", "petal_length",
                                                     "petal_width"}));
  EXPECT_EQ(data.classes, (std::vector<std::string>{"setosa", "versicolor", "virginica"}));
  ASSERT_EQ(data.train.size, 150);
  EXPECT_EQ(data.eval.size, 0);
  std::vector<int> counts(3);
  for (int64_t c : data.train.classes) ++counts[c];
  EXPECT_EQ(counts, (std::vector<int>{50, 50, 50}));
  // The column means of the corrected table (UCI's bezdekIris.data, scikit-learn's load_iris).
  std::vector<double> means = {5.843333, 3.057333, 3.758000, 1.199333};
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(data.mean[j], means[j], 1e-6) << j;
  // Population standard deviations (numpy's std of load_iris().data).
  std::vector<double> stds = {0.825301, 0.434411, 1.759404, 0.759693};
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(data.std[j], stds[j], 1e-6) << j;
}

TEST(CsvIris, SplitIsSeededDisjointAndStandardisedOnTrainOnly) {
  TabularOptions options;
  options.path = kIris;
  options.label = "species";
  TabularData a = load_tabular(options), b = load_tabular(options);
  ASSERT_EQ(a.eval.size, 30);  // round(0.2 * 150)
  ASSERT_EQ(a.train.size, 120);
  EXPECT_EQ(a.eval.lines, b.eval.lines);
  std::set<int64_t> lines(a.train.lines.begin(), a.train.lines.end());
  lines.insert(a.eval.lines.begin(), a.eval.lines.end());
  EXPECT_EQ(lines.size(), 150u);
  EXPECT_EQ(*lines.begin(), 2);
  EXPECT_EQ(*lines.rbegin(), 151);
  options.seed = 7;
  EXPECT_NE(load_tabular(options).eval.lines, a.eval.lines);

  // The training split's features have mean 0 and std 1; the statistics are the training rows'
  // own: the raw training values, read back from the file by line, give the same mean.
  CsvTable table = read_csv(kIris);
  for (int j = 0; j < 4; ++j) {
    double sum = 0, sum_sq = 0, raw = 0, eval_sum = 0;
    for (int64_t i = 0; i < a.train.size; ++i) {
      double v = a.train.x[i * 4 + j];
      sum += v;
      sum_sq += v * v;
      raw += std::stod(table.cell(a.train.lines[i] - 2, j));
    }
    EXPECT_NEAR(sum / 120, 0.0, 1e-6) << j;
    EXPECT_NEAR(sum_sq / 120, 1.0, 1e-5) << j;
    EXPECT_NEAR(a.mean[j], raw / 120, 1e-6) << j;  // the mean of the float32 values
    for (int64_t i = 0; i < a.eval.size; ++i) {
      eval_sum += a.eval.x[i * 4 + j];
      // Eval rows go through the training split's mean and std.
      double v = std::stod(table.cell(a.eval.lines[i] - 2, j));
      EXPECT_NEAR(a.eval.x[i * 4 + j], (v - a.mean[j]) / a.std[j], 1e-5);
    }
    EXPECT_GT(std::abs(eval_sum / 30), 1e-4) << j;  // not re-centred on its own rows
  }
}

// A class only the validation rows hold is a warning naming it (the model scores it but never
// learns it); with every class in the training rows there is none.
TEST(CsvTabular, AClassOnlyInTheValidationSplitIsAWarning) {
  const std::string text = "a,y\n1,x\n2,x\n3,x\n4,w\n5,w\n6,w\n7,z\n";
  TabularOptions options;
  options.label = "y";
  options.validation_fraction = 0.15;  // one row of seven
  int warned = 0, quiet = 0;
  for (uint64_t seed = 0; seed < 30; ++seed) {
    options.seed = seed;
    ::testing::internal::CaptureStderr();
    TabularData data = tabular(text, options);
    const std::string err = ::testing::internal::GetCapturedStderr();
    ASSERT_EQ(data.eval.size, 1);
    const bool z_held_out = data.classes[data.eval.classes[0]] == "z";
    if (z_held_out) {
      ++warned;
      EXPECT_EQ(err,
                "trainer: warning: t.csv: class z of label column 'y' appears only in the "
                "validation split; the model never trains on it\n");
    } else {
      ++quiet;
      EXPECT_EQ(err, "") << seed;
    }
  }
  EXPECT_GT(warned, 0);
  EXPECT_GT(quiet, 0);
}

}  // namespace csv_table_test
}  // namespace trainer::data
