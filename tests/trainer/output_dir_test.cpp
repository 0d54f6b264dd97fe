// OutputDir: the checks of a path that is to be an output_dir, its lock file, and the cleanup of
// what a killed run left there.
#include "trainer/output_dir.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "tests/test_util.h"

namespace trainer {
namespace output_dir_test {

using testing::slurp;
using testing::TempDir;

TEST(OutputDir, CreatesLocksListsAndCleansUp) {
  TempDir dir;
  std::string out = dir.file("run");
  {
    OutputDir output(out);
    EXPECT_TRUE(std::filesystem::is_directory(out));
    EXPECT_EQ(slurp(out + "/.trainer.lock"), std::to_string(::getpid()) + "\n");
    EXPECT_TRUE(output.earlier_entries().empty());
  }
  // Created by it and left empty: removed again, lock file and all.
  EXPECT_FALSE(std::filesystem::exists(out));

  std::filesystem::create_directories(out);
  std::ofstream(out + "/model.safetensors") << "earlier";
  std::ofstream(out + "/model.safetensors.tmp.4242.00000000deadbeef") << "half";
  std::ofstream(out + "/notes.tmp.txt") << "the user's";
  {
    OutputDir output(out);
    EXPECT_EQ(output.earlier_entries(),
              (std::vector<std::string>{"model.safetensors", "notes.tmp.txt"}));
  }
  EXPECT_EQ(base::list_directory(out),
            (std::vector<std::string>{"model.safetensors", "notes.tmp.txt"}));
}

TEST(OutputDir, PathsThatCannotBeAnOutputDirAreOneLine) {
  TempDir dir;
  std::ofstream(dir.file("file")) << "x";
  auto error_of = [](const std::string& path) -> std::string {
    try {
      OutputDir output(path);
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(error_of(dir.file("file")),
            "output_dir " + dir.file("file") + " is a file, not a directory");
  EXPECT_EQ(error_of(dir.file("file/run")), "cannot create output_dir " + dir.file("file/run") +
                                                ": " + dir.file("file") + " is not a directory");
  EXPECT_EQ(error_of("/proc/1/run"),
            "cannot create output_dir /proc/1/run: No such file or directory");
}

}  // namespace output_dir_test
}  // namespace trainer
