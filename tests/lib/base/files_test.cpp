// The file layer under output_dir: atomic writes that leave nothing behind when they fail, and a
// WriteBatch that lands all of its files or none.
#include "lib/base/files.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "lib/base/errors.h"
#include "tests/test_util.h"

namespace trainer::base {
namespace files_test {

using testing::slurp;
using testing::TempDir;

TEST(Files, ABatchLandsEveryFileAtCommitAndRemovesWhatItReplaces) {
  TempDir dir;
  write_file_atomic(dir.file("a.json"), "old a");
  write_file_atomic(dir.file("stale.json"), "old stale");
  {
    WriteBatch batch;
    write_file_atomic(dir.file("a.json"), "new a", &batch);
    write_file_atomic(dir.file("b.json"), "first b", &batch);
    write_file_atomic(dir.file("b.json"), "second b", &batch);
    EXPECT_EQ(slurp(dir.file("a.json")), "old a");  // nothing visible before the commit
    EXPECT_FALSE(std::filesystem::exists(dir.file("b.json")));
    EXPECT_TRUE(batch.staged(dir.file("b.json")));
    // A write not given the batch is not part of it: it lands at once.
    write_file_atomic(dir.file("log.json"), "now");
    EXPECT_EQ(slurp(dir.file("log.json")), "now");
    EXPECT_FALSE(batch.staged(dir.file("log.json")));
    batch.remove_on_commit(dir.file("stale.json"));
    batch.remove_on_commit(dir.file("a.json"));  // written in the batch: kept
    batch.commit();
  }
  EXPECT_EQ(base::list_directory(dir.path()),
            (std::vector<std::string>{"a.json", "b.json", "log.json"}));
  EXPECT_EQ(slurp(dir.file("a.json")), "new a");
  EXPECT_EQ(slurp(dir.file("b.json")), "second b");
}

TEST(Files, ABatchThatIsNotCommittedLeavesEverythingAsItWas) {
  TempDir dir;
  write_file_atomic(dir.file("a.json"), "old a");
  try {
    WriteBatch batch;
    write_file_atomic(dir.file("a.json"), "new a", &batch);
    write_file_atomic(dir.file("b.json"), "new b", &batch);
    throw std::runtime_error("the run failed before its commit");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(base::list_directory(dir.path()), (std::vector<std::string>{"a.json"}));
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

}  // namespace files_test
}  // namespace trainer::base
