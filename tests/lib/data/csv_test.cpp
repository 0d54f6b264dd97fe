// The CSV data set: a table's rows as batches of float features and class ids or targets.
#include "lib/data/csv.h"

#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "lib/base/errors.h"
#include "tests/test_util.h"

namespace trainer::data {
namespace csv_test {

const std::string kIris = std::string(SOURCE_DIR) + "/data/iris.csv";

TEST(CsvDataset, BatchesAreFloatFeaturesAndClassIdsOrTargets) {
  TabularOptions options;
  options.path = kIris;
  options.label = "species";
  TabularData data = load_tabular(options);
  CsvDataset train(data.train, data.num_features(), false);
  CsvDataset few(data.train, data.num_features(), false, 5);
  EXPECT_EQ(train.size(), 120);
  EXPECT_EQ(few.size(), 5);
  torch::Tensor indices = torch::tensor({3, 0, 7}, torch::kLong);
  Batch batch = *train.get_batch(indices);
  EXPECT_EQ(batch.at("x").sizes(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(batch.at("x").scalar_type(), torch::kFloat);
  EXPECT_EQ(batch.at("labels").scalar_type(), torch::kLong);
  Batch collated = default_collate({train.get(3), train.get(0), train.get(7)});
  EXPECT_TRUE(torch::equal(batch.at("x"), collated.at("x")));
  EXPECT_TRUE(torch::equal(batch.at("labels"), collated.at("labels")));
  EXPECT_EQ(batch.at("labels")[1].item<int64_t>(), data.train.classes[0]);
  EXPECT_EQ(batch.at("x")[2][1].item<float>(), data.train.x[7 * 4 + 1]);

  // Regression: petal_width from the other three measurements, float targets.
  options.features = {"sepal_length", "sepal_width", "petal_length"};
  options.label = "petal_width";
  options.regression = true;
  TabularData reg = load_tabular(options);
  EXPECT_TRUE(reg.classes.empty());
  EXPECT_EQ(reg.num_labels(), 1);
  CsvDataset eval(reg.eval, reg.num_features(), true);
  Batch targets = *eval.get_batch(torch::arange(2));
  EXPECT_EQ(targets.at("x").sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(targets.at("labels").scalar_type(), torch::kFloat);
  EXPECT_FLOAT_EQ(targets.at("labels")[1].item<float>(), reg.eval.targets[1]);
}

}  // namespace csv_test
}  // namespace trainer::data
