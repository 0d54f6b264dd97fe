// The installed CMake package, as a C++ user's own project sees it: `cmake --install` into a
// temporary prefix, then apps/examples/custom_loss.cpp built by a CMakeLists.txt of its own with
// find_package(Trainer) and trainer::trainer, and run. It takes about a minute, so scripts/test
// leaves the Package suite out and .ci/run runs it after scripts/test.
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace trainer {
namespace package_test {

TEST(Package, AnOutsideProjectBuildsTheCustomLossExampleAgainstTheInstalledTree) {
  testing::TempDir dir;
  const std::string prefix = dir.file("prefix"), project = dir.file("project");
  auto install =
      testing::run("cmake --install '" + std::string(BINARY_DIR) + "' --prefix '" + prefix + "'");
  ASSERT_EQ(install.exit_code, 0) << install.out << install.err;
  for (const char* file : {"/include/trainer/trainer/all.h", "/include/trainer/trainer/trainer.h",
                           "/lib/cmake/Trainer/TrainerConfig.cmake", "/bin/trainer"}) {
    EXPECT_TRUE(std::ifstream(prefix + file).good()) << file;
  }
  ASSERT_EQ(testing::run("mkdir -p '" + project + "'").exit_code, 0);
  std::ofstream(project + "/CMakeLists.txt")
      << "cmake_minimum_required(VERSION 3.18)\n"
         "project(outside LANGUAGES CXX)\n"
         "find_package(Trainer 0.9 REQUIRED)\n"
         "add_executable(custom_loss custom_loss.cpp)\n"
         "target_link_libraries(custom_loss PRIVATE trainer::trainer)\n";
  ASSERT_EQ(testing::run("cp '" + std::string(SOURCE_DIR) + "/apps/examples/custom_loss.cpp' '" +
                         project + "/'")
                .exit_code,
            0);
  auto configure = testing::run("cmake -S '" + project + "' -B '" + project + "/build' -G Ninja " +
                                "-DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH='" + prefix + "'");
  ASSERT_EQ(configure.exit_code, 0) << configure.out << configure.err;
  auto build = testing::run("cmake --build '" + project + "/build'");
  ASSERT_EQ(build.exit_code, 0) << build.out << build.err;
  // MyTrainer on 256 examples, one process: it trains, evaluates and saves its state.
  testing::write_mnist_dir(dir.file("data"), 256, 64, false);
  auto result = testing::run("cd '" + project + "' && OMP_NUM_THREADS=1 build/custom_loss '" +
                             dir.file("data") + "' -1 1 out");
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  auto state = nlohmann::json::parse(testing::slurp(project + "/out/trainer_state.json"));
  EXPECT_EQ(state["global_step"], 4);
  EXPECT_TRUE(state["log_history"][0].contains("eval_accuracy")) << state.dump();
  EXPECT_TRUE(state["log_history"].back().contains("train_loss")) << state.dump();
}

}  // namespace package_test
}  // namespace trainer
