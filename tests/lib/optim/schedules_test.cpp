// Transformers' learning-rate schedules: the multipliers of linear, cosine and constant schedules
// with warmup at their turning points.
#include "lib/optim/schedules.h"

#include <gtest/gtest.h>

namespace trainer::optim {
namespace schedules_test {

TEST(LrSchedule, TransformersMultipliers) {
  EXPECT_DOUBLE_EQ(lr_lambda("linear", 0, 10, 100), 0.0);
  EXPECT_DOUBLE_EQ(lr_lambda("linear", 5, 10, 100), 0.5);
  EXPECT_DOUBLE_EQ(lr_lambda("linear", 10, 10, 100), 1.0);
  EXPECT_DOUBLE_EQ(lr_lambda("linear", 55, 10, 100), 0.5);
  EXPECT_DOUBLE_EQ(lr_lambda("linear", 100, 10, 100), 0.0);
  EXPECT_DOUBLE_EQ(lr_lambda("linear", 0, 0, 938), 1.0);
  EXPECT_NEAR(lr_lambda("cosine", 55, 10, 100), 0.5, 1e-12);
  EXPECT_NEAR(lr_lambda("cosine", 100, 10, 100), 0.0, 1e-12);
  EXPECT_DOUBLE_EQ(lr_lambda("constant", 0, 10, 100), 1.0);
  EXPECT_DOUBLE_EQ(lr_lambda("constant_with_warmup", 2, 10, 100), 0.2);
  EXPECT_DOUBLE_EQ(lr_lambda("constant_with_warmup", 50, 10, 100), 1.0);
}

}  // namespace schedules_test
}  // namespace trainer::optim
