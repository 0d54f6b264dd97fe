// The Python side's committed results (tests/reference/results/, made by scripts/reference from
// the registry tests/reference/references) are the ones their scripts make: every committed key
// equals the key of its command, scripts and pinned versions, and every result's files are those
// its command wrote. Then the check itself, on a copy of the machinery with one small result: a
// hand-edited file, an edited script, a changed pin and an unregistered result are each found and
// named, and `path` hands a test the committed folder only while its key holds.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace trainer {
namespace reference_test {

namespace fs = std::filesystem;
using testing::run;
using testing::TempDir;

const std::string kReference = std::string(SOURCE_DIR) + "/scripts/reference";

TEST(References, EveryCommittedResultIsWhatItsScriptMakes) {
  const auto names = run(kReference + " list");
  ASSERT_EQ(names.exit_code, 0) << names.err;
  const size_t count = testing::lines_of(names.out).size();
  EXPECT_GE(count, 30u) << names.out;
  const auto check = run(kReference + " --check");
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_EQ(testing::lines_of(check.out).back(),
            "reference: checked " + std::to_string(count) + " results: 0 with a problem")
      << check.out;
}

// A copy of scripts/reference and scripts/common.sh, with a registry of one result whose script
// writes a line of text, committed by --refresh (run with /bin/sh standing in for Python).
class ReferenceCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(root("scripts"));
    fs::create_directories(root("tests/reference/scripts"));
    fs::copy_file(kReference, root("scripts/reference"));
    fs::copy_file(std::string(SOURCE_DIR) + "/scripts/common.sh", root("scripts/common.sh"));
    write("tests/reference/scripts/make.py", "echo \"made by $0\" > \"$1/result.txt\"\n");
    write("tests/reference/scripts/helper.py", "# imported by other.py\n");
    write("tests/reference/scripts/other.py",
          "import helper 2>/dev/null || true\necho other > \"$1/other.txt\"\n");
    write("tests/reference/scripts/copy.py", "cp \"$2\" \"$1/copy.txt\"\n");
    write("tests/reference/scripts/where.py",
          "echo \"$2/result.txt $1/where.txt\" > \"$1/where.txt\"\n");
    fs::create_directories(root("data"));
    write("data/input.txt", "input\n");
    write("tests/reference/references",
          "# a comment\nsmall {python} {scripts}/make.py {out}\n"
          "reads {python} {scripts}/other.py {out} {ref:small}\n"
          "copies {python} {scripts}/copy.py {out} {file:data/input.txt}\n"
          "cache:big {python} {scripts}/make.py {out}\n"
          "where {python} {scripts}/where.py {out} {ref:small}\n");
    const auto made = reference("--refresh");
    ASSERT_EQ(made.exit_code, 0) << made.out << made.err;
  }
  std::string root(const std::string& path) const { return dir_.file(path); }
  void write(const std::string& path, const std::string& text) const {
    std::ofstream(root(path)) << text;
  }
  testing::ProcessResult reference(const std::string& arguments) const {
    return run("TRAINER_PYTHON=/bin/sh TRAINER_CACHE=" + root("cache") + " " +
               root("scripts/reference") + " " + arguments);
  }
  // --check's lines but its summary.
  std::string problems() const {
    const auto check = reference("--check");
    auto lines = testing::lines_of(check.out);
    std::string text;
    for (size_t i = 0; i + 1 < lines.size(); ++i) text += lines[i] + "\n";
    EXPECT_EQ(check.exit_code, text.empty() ? 0 : 1) << check.out << check.err;
    return text;
  }
  TempDir dir_;
};

TEST_F(ReferenceCheck, AFreshResultPassesAndIsTheFolderATestReads) {
  EXPECT_EQ(testing::slurp(root("tests/reference/results/small/result.txt")),
            "made by " + root("tests/reference/scripts/make.py") + "\n");
  EXPECT_EQ(problems(), "");
  const auto path = reference("path small");
  EXPECT_EQ(path.out, root("tests/reference/results/small") + "\n") << path.err;
  const auto key = testing::slurp(root("tests/reference/results/small.key"));
  EXPECT_EQ(key.rfind("key " + testing::lines_of(reference("key small").out)[0] + "\nfiles ", 0),
            0u)
      << key;
}

TEST_F(ReferenceCheck, AHandEditedResultIsFound) {
  write("tests/reference/results/small/result.txt", "made by hand\n");
  EXPECT_EQ(problems(),
            "small: edited: its files are not the ones its command made (scripts/reference "
            "--refresh small makes them again)\n");
  // A file added counts too.
  write("tests/reference/results/small/result.txt",
        "made by " + root("tests/reference/scripts/make.py") + "\n");
  EXPECT_EQ(problems(), "");
  write("tests/reference/results/reads/extra.txt", "x");
  EXPECT_NE(problems().find("reads: edited"), std::string::npos);
}

TEST_F(ReferenceCheck, AnEditedScriptOrImportOrPinMakesItAndWhatReadsItStale) {
  write("tests/reference/scripts/helper.py", "# imported by other.py, edited\n");
  EXPECT_EQ(problems(),
            "reads: stale: its command, scripts, pinned versions or inputs changed since it was "
            "made (scripts/reference --refresh reads)\n");
  // A test then reads a result made in the cache, not the stale one.
  const auto path = reference("path reads");
  EXPECT_EQ(path.exit_code, 0) << path.err;
  EXPECT_EQ(path.out.rfind(root("cache/reference/reads-"), 0), 0u) << path.out;
  EXPECT_EQ(testing::slurp(testing::lines_of(path.out)[0] + "/other.txt"), "other\n");
  // The script of `small` edited: both are stale (`reads` reads it).
  write("tests/reference/scripts/make.py", "echo \"again by $0\" > \"$1/result.txt\"\n");
  EXPECT_NE(problems().find("small: stale"), std::string::npos);
  EXPECT_NE(problems().find("reads: stale"), std::string::npos);
  // --refresh makes both again, `small` first.
  const auto made = reference("--refresh");
  EXPECT_EQ(made.exit_code, 0) << made.err;
  EXPECT_EQ(problems(), "");
  EXPECT_EQ(testing::slurp(root("tests/reference/results/small/result.txt")),
            "again by " + root("tests/reference/scripts/make.py") + "\n");
  // A file of the repository a command names ({file:PATH}) edited.
  write("data/input.txt", "input, edited\n");
  EXPECT_EQ(problems(),
            "copies: stale: its command, scripts, pinned versions or inputs changed since it was "
            "made (scripts/reference --refresh copies)\n");
  // A pinned version moved: every result is stale.
  std::string common = testing::slurp(root("scripts/common.sh"));
  common.replace(common.find("TRL_VERSION=\""), 13, "TRL_VERSION=\"0.0.0");
  write("scripts/common.sh", common);
  EXPECT_NE(problems().find("small: stale"), std::string::npos);
}

TEST_F(ReferenceCheck, ResultsNoLineMakesAndNamesNoLineHasAreRefused) {
  fs::create_directories(root("tests/reference/results/gone"));
  write("tests/reference/results/gone.key", "key x\nfiles y\n");
  EXPECT_EQ(problems(),
            "gone: committed, but no line of the registry makes it (remove results/gone and its "
            "key)\n");
  const auto path = reference("path nosuch");
  EXPECT_EQ(path.exit_code, 2);
  EXPECT_EQ(path.err, "reference: no result named 'nosuch' in " +
                          root("tests/reference/references") +
                          " (names: small reads copies big where)\n");
}

// The paths of the checkout that made a result are committed as @RESULTS@; a test reads a copy in
// the cache with its own checkout's, wherever that is.
TEST_F(ReferenceCheck, APathOfTheCheckoutIsWrittenBackAsTheReadersOwn) {
  EXPECT_EQ(testing::slurp(root("tests/reference/results/where/where.txt")),
            "@RESULTS@/small/result.txt @RESULTS@/where/where.txt\n");
  const auto here = reference("path where");
  ASSERT_EQ(here.exit_code, 0) << here.err;
  EXPECT_EQ(here.out.rfind(root("cache/reference/where-"), 0), 0u) << here.out;
  const std::string results = root("tests/reference/results");
  EXPECT_EQ(testing::slurp(testing::lines_of(here.out)[0] + "/where.txt"),
            results + "/small/result.txt " + results + "/where/where.txt\n");
  // A checkout elsewhere: its own paths, in a copy of its own.
  fs::create_directories(root("elsewhere"));
  fs::copy(root("scripts"), root("elsewhere/scripts"), fs::copy_options::recursive);
  fs::copy(root("tests"), root("elsewhere/tests"), fs::copy_options::recursive);
  fs::copy(root("data"), root("elsewhere/data"), fs::copy_options::recursive);
  const auto there = run("TRAINER_PYTHON=/bin/sh TRAINER_CACHE=" + root("cache") + " " +
                         root("elsewhere/scripts/reference") + " path where");
  ASSERT_EQ(there.exit_code, 0) << there.err;
  EXPECT_NE(there.out, here.out);
  const std::string moved = root("elsewhere/tests/reference/results");
  EXPECT_EQ(testing::slurp(testing::lines_of(there.out)[0] + "/where.txt"),
            moved + "/small/result.txt " + moved + "/where/where.txt\n");
  EXPECT_EQ(problems(), "");
}

// A cache: line is made in the cache on first use, never committed: --refresh leaves it out,
// --check does not miss it, and a committed copy is refused.
TEST_F(ReferenceCheck, ACacheOnlyResultIsMadeInTheCacheAndNeverCommitted) {
  EXPECT_FALSE(fs::exists(root("tests/reference/results/big")));
  EXPECT_EQ(problems(), "");
  const auto path = reference("path big");
  EXPECT_EQ(path.exit_code, 0) << path.err;
  EXPECT_EQ(path.out.rfind(root("cache/reference/big-"), 0), 0u) << path.out;
  EXPECT_EQ(testing::slurp(testing::lines_of(path.out)[0] + "/result.txt"),
            "made by " + root("tests/reference/scripts/make.py") + "\n");
  const auto refused = reference("--refresh big");
  EXPECT_EQ(refused.exit_code, 2);
  fs::create_directories(root("tests/reference/results/big"));
  write("tests/reference/results/big.key", "key x\nfiles y\n");
  EXPECT_EQ(problems(),
            "big: committed, but its line makes it in the cache only (remove results/big and "
            "its key)\n");
}

}  // namespace reference_test
}  // namespace trainer
