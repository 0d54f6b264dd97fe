// The MNIST-format data set on files made here: both splits normalised as the tutorial's
// transforms, and bad directories (mismatched counts, labels out of range, missing files).
#include "lib/data/mnist.h"

#include <gtest/gtest.h>

#include "lib/base/errors.h"
#include "tests/test_util.h"

namespace trainer::data {
namespace mnist_test {

using testing::expect_input_error;

using testing::TempDir;
using testing::write_idx;

TEST(MnistDataset, LoadsBothSplitsAndNormalises) {
  TempDir dir;
  testing::write_mnist_dir(dir.path(), 30, 12, true);
  MnistDataset train(dir.path(), "train");
  MnistDataset test(dir.path(), "test", 5);
  EXPECT_EQ(train.size(), 30);
  EXPECT_EQ(test.size(), 5);
  EXPECT_EQ(train.images().scalar_type(), torch::kUInt8);
  Example e = train.get(3);
  EXPECT_EQ(e.input.sizes(), (std::vector<int64_t>{1, 28, 28}));
  float pixel = train.images()[3][0][0].item<uint8_t>();
  EXPECT_NEAR(e.input[0][0][0].item<float>(), (pixel / 255.0 - 0.1307) / 0.3081, 1e-6);
  EXPECT_EQ(e.target.item<int64_t>(), train.labels()[3].item<int64_t>());
}

TEST(MnistDataset, MismatchedCountsNameBothFiles) {
  TempDir dir;
  testing::write_mnist_dir(dir.path(), 20, 10, false);
  write_idx(dir.file("train-labels-idx1-ubyte"), {10}, std::vector<uint8_t>(10, 1));
  expect_input_error([&] { MnistDataset(dir.path(), "train"); },
                     {"holds 20 images", "holds 10 labels", "train-labels-idx1-ubyte"});
}

TEST(MnistDataset, LabelOutOfRange) {
  TempDir dir;
  testing::write_mnist_dir(dir.path(), 4, 4, false);
  write_idx(dir.file("t10k-labels-idx1-ubyte"), {4}, {1, 2, 200, 3});
  expect_input_error([&] { MnistDataset(dir.path(), "test"); }, {"label 200", "0 to 9"});
}

TEST(MnistDataset, MissingDirectoryAndFile) {
  expect_input_error([] { MnistDataset("/nonexistent-dir", "train"); },
                     {"dataset directory /nonexistent-dir does not exist"});
  TempDir dir;
  expect_input_error([&] { MnistDataset(dir.path(), "train"); },
                     {"train-images-idx3-ubyte[.gz] is missing"});
}

}  // namespace mnist_test
}  // namespace trainer::data
