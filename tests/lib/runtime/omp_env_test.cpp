// OMP_NUM_THREADS read as libgomp reads it: the values libgomp 12 takes without complaint and
// those it complains about (each checked against libgomp by hand: OMP_NUM_THREADS=v trainer).
#include "lib/runtime/omp_env.h"

#include <string>

#include <gtest/gtest.h>

namespace trainer {
namespace omp_env_test {

TEST(OmpNumThreads, ReadAsLibgompReadsIt) {
  for (const char* valid : {"2", " 2 ", "2,1", "2, 1", "+2", "1", "18446744073709551615"}) {
    EXPECT_TRUE(runtime::omp_num_threads_is_valid(valid)) << "'" << valid << "'";
  }
  for (const char* invalid : {"", " ", "0", "-1", "2x", "1,", ",1", "1 2", "1,,2",
                              "18446744073709551616", "99999999999999999999", "two"}) {
    EXPECT_FALSE(runtime::omp_num_threads_is_valid(invalid)) << "'" << invalid << "'";
  }
}

}  // namespace omp_env_test
}  // namespace trainer
