// The file layer under output_dir: atomic writes that leave nothing behind when they fail, a
// WriteBatch that lands all of its files or none, and OutputDir's checks, lock file and cleanup.
#include "lib/io/files.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "lib/io/errors.h"
#include "lib/io/output_dir.h"
#include "tests/test_util.h"

namespace trainer::io {
namespace files_test {

using testing::slurp;
using testing::TempDir;

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(Files, ABatchLandsEveryFileAtCommitAndRemovesWhatItReplaces) {
  TempDir dir;
  write_file_atomic(dir.file("a.json"), "old a");
  write_file_atomic(dir.file("stale.json"), "old stale");
  {
    WriteBatch batch;
    write_file_atomic(dir.file("a.json"), "new a");
    write_file_atomic(dir.file("b.json"), "first b");
    write_file_atomic(dir.file("b.json"), "second b");
    EXPECT_EQ(slurp(dir.file("a.json")), "old a");  // nothing visible before the commit
    EXPECT_FALSE(std::filesystem::exists(dir.file("b.json")));
    EXPECT_TRUE(batch.staged(dir.file("b.json")));
    batch.remove_on_commit(dir.file("stale.json"));
    batch.remove_on_commit(dir.file("a.json"));  // written in the batch: kept
    batch.commit();
  }
  EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{"a.json", "b.json"}));
  EXPECT_EQ(slurp(dir.file("a.json")), "new a");
  EXPECT_EQ(slurp(dir.file("b.json")), "second b");
}

TEST(Files, ABatchThatIsNotCommittedLeavesEverythingAsItWas) {
  TempDir dir;
  write_file_atomic(dir.file("a.json"), "old a");
  try {
    WriteBatch batch;
    write_file_atomic(dir.file("a.json"), "new a");
    write_file_atomic(dir.file("b.json"), "new b");
    throw std::runtime_error("the run failed before its commit");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{"a.json"}));
  EXPECT_EQ(slurp(dir.file("a.json")), "old a");
}

TEST(Files, ReadFileRefusesDirectoriesAndDevicesAndBoundsTheSize) {
  TempDir dir;
  EXPECT_THROW(read_file(dir.path()), InputError);
  EXPECT_THROW(read_file("/dev/zero"), InputError);
  write_file_atomic(dir.file("a"), std::string(100, 'x'));
  EXPECT_EQ(read_file(dir.file("a"), 100).size(), 100u);
  try {
    read_file(dir.file("a"), 99);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot read " + dir.file("a") + ": larger than 99 bytes");
  }
}

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
  EXPECT_EQ(names_in(out), (std::vector<std::string>{"model.safetensors", "notes.tmp.txt"}));
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
  EXPECT_EQ(error_of(dir.file("file/run")),
            "output_dir " + dir.file("file/run") + ": Not a directory");
  EXPECT_EQ(error_of("/proc/1/run"),
            "cannot create output_dir /proc/1/run: No such file or directory");
}

}  // namespace files_test
}  // namespace trainer::io
