// run_clm's data files, torch-free: the text loader's lines (universal newlines, breaks kept or
// dropped, Unicode line separators inside lines, a BOM kept), the JSON loader's records (blank
// lines, objects over lines, arrays), every bad-file error line, the percent split; and all of it
// compared with Hugging Face `datasets` itself (tests/reference/scripts/lm_files_reference.py).
#include "lib/data/lm_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <utility>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "tests/test_util.h"

namespace trainer::data {
namespace lm_files_test {

using Lines = std::vector<std::string>;
using namespace std::string_literals;

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// The examples of a file holding `bytes`, named `name` in a fresh folder.
Lines read_bytes(const std::string& name, const std::string& bytes, bool keep_linebreaks = true,
                 const std::string& column = "text") {
  testing::TempDir dir;
  write(dir.file(name), bytes);
  return read_lm_file(dir.file(name), column, keep_linebreaks);
}

// Every line break `datasets`' text loader could meet; only "\n", "\r\n" and "\r" end lines.
const std::string kHostileText =
    "\xEF\xBB\xBF"
    "bom\r\n"
    "crlf\r\n"
    "lone cr\r"
    "nel\xC2\x85"
    "ls\xE2\x80\xA8"
    "ps\xE2\x80\xA9"
    "vt\x0b"
    "ff\x0c"
    "fs\x1cgs\x1drs\x1e"
    "end\n"
    "\n"
    "\r\n"
    "\r"
    "tab\tnul\x00"
    "no final newline"s;

TEST(LmFiles, TextLinesBreakOnlyAtUniversalNewlines) {
  const std::string tail = "tab\tnul" + std::string(1, '\0') + "no final newline";
  EXPECT_EQ(read_bytes("a.txt", kHostileText),
            (Lines{"\xEF\xBB\xBF"
                   "bom\n",
                   "crlf\n", "lone cr\n",
                   "nel\xC2\x85ls\xE2\x80\xA8ps\xE2\x80\xA9vt\x0b"
                   "ff\x0c"
                   "fs\x1cgs\x1drs\x1e"
                   "end\n",
                   "\n", "\n", "\n", tail}));
  EXPECT_EQ(read_bytes("a.txt", kHostileText, /*keep_linebreaks=*/false),
            (Lines{"\xEF\xBB\xBF"
                   "bom",
                   "crlf", "lone cr",
                   "nel\xC2\x85ls\xE2\x80\xA8ps\xE2\x80\xA9vt\x0b"
                   "ff\x0c"
                   "fs\x1cgs\x1drs\x1e"
                   "end",
                   "", "", "", tail}));
  EXPECT_EQ(read_bytes("a.txt", "\n"), Lines{"\n"});
  EXPECT_EQ(read_bytes("a.txt", "\n", false), Lines{""});
  EXPECT_EQ(read_bytes("a.txt", "a\r"), Lines{"a\n"});
  EXPECT_EQ(read_bytes("a.txt", "\xEF\xBB\xBF"), Lines{"\xEF\xBB\xBF"});
  EXPECT_EQ(read_bytes("a.txt", "\r\n\r\n", false), (Lines{"", ""}));
}

TEST(LmFiles, JsonRecordsAsPyarrowAndPandasReadThem) {
  // Blank lines, CRLF, a lone CR, an object over lines, two on a line, none between them.
  EXPECT_EQ(read_bytes("a.jsonl",
                       "\xEF\xBB\xBF{\"text\": \"a\\n\", \"n\": 1}\r\n\r\n  \n"
                       "{\"n\": 2, \"text\": \"b\\u2028\"}\r{\n  \"text\": \"c\"\n}\n"
                       "{\"text\": \"d\"} {\"text\": \"e\"}{\"text\": \"f\"}"),
            (Lines{"a\n", "b\xE2\x80\xA8", "c", "d", "e", "f"}));
  EXPECT_EQ(read_bytes("a.jsonl", "{\"text\": \"a\", \"body\": \"B\"}\n", true, "body"),
            Lines{"B"});
  // A nested key given twice is pyarrow's business, not an error: the last one stands.
  EXPECT_EQ(read_bytes("a.jsonl", "{\"m\": {\"x\": 1, \"x\": 2}, \"text\": \"t\"}"), Lines{"t"});
  // One top-level array: of objects, or of texts (the column is then "text").
  EXPECT_EQ(read_bytes("a.json", "[{\"text\": \"a\"}, {\"text\": \"b\", \"text\": \"c\"}]\n"),
            (Lines{"a", "c"}));
  EXPECT_EQ(read_bytes("a.json", "[\"a\", \"{b\"]"), (Lines{"a", "{b"}));
  EXPECT_EQ(read_bytes("a.json", " \n[" + std::string(120, ' ') + "{\"text\": \"a\"}]"),
            Lines{"a"});
}

TEST(LmFiles, BadFilesSayWhatAndWhere) {
  testing::TempDir dir;
  auto error = [&](const std::string& name, const std::string& bytes,
                   const std::string& column = "text") {
    write(dir.file(name), bytes);
    return testing::input_error_of([&] { read_lm_file(dir.file(name), column); });
  };
  const std::string d = dir.path();
  EXPECT_EQ(error("a.csv", "text\na\n"),
            fmt::format("data file '{}/a.csv' has the extension '.csv'; use .txt (an example a "
                        "line, as a file without an extension), .json or .jsonl (JSON Lines with "
                        "a text column)",
                        d));
  // A number past double's range is one line naming the line, not an escaped exception.
  EXPECT_EQ(error("big.jsonl", "{\"text\": \"a\"}\n{\"text\": \"b\", \"n\": 1e400}\n"),
            fmt::format("JSON file '{}/big.jsonl' line 2: invalid JSON: number overflow parsing "
                        "'1e400'",
                        d));
  EXPECT_EQ(error("big.json", "[888888888888E888888]"),
            fmt::format("JSON file '{}/big.json' line 1: invalid JSON: number overflow parsing "
                        "'888888888888E888888'",
                        d));
  // A file without an extension is text (fortunes' files).
  write(dir.file("TXT"), "a\r\nb");
  EXPECT_EQ(read_lm_file(dir.file("TXT")), (std::vector<std::string>{"a\n", "b"}));
  EXPECT_EQ(testing::input_error_of([&] { read_lm_file(d + "/missing.txt"); }),
            fmt::format("cannot open text file {}/missing.txt: No such file or directory", d));
  ::mkdir((d + "/folder.jsonl").c_str(), 0755);
  EXPECT_EQ(testing::input_error_of([&] { read_lm_file(d + "/folder.jsonl"); }),
            fmt::format("cannot read JSON file {}/folder.jsonl: it is a directory, not a file", d));
  if (::geteuid() != 0) {  // root reads any file
    write(d + "/secret.txt", "a\n");
    ::chmod((d + "/secret.txt").c_str(), 0);
    EXPECT_EQ(testing::input_error_of([&] { read_lm_file(d + "/secret.txt"); }),
              fmt::format("cannot open text file {}/secret.txt: Permission denied", d));
  }
  EXPECT_EQ(error("e.txt", ""),
            fmt::format("text file '{}/e.txt' holds no lines (it is empty)", d));
  EXPECT_EQ(error("w.txt", std::string("\xFF\xFEh\0i\0", 6)),
            fmt::format("text file '{0}/w.txt' is UTF-16 text; save it as UTF-8 (iconv -f UTF-16 "
                        "-t UTF-8 '{0}/w.txt' > '{0}/w.txt.utf8')",
                        d));
  EXPECT_EQ(error("u.txt", "ok\r\nok\rbad \xC3\x28\n"),
            fmt::format("text file '{}/u.txt' is not UTF-8: byte 0xC3 at line 3, byte offset 11 "
                        "starts no UTF-8 character (save the file as UTF-8)",
                        d));
  EXPECT_EQ(error("u.jsonl", "{\"text\": \"\xED\xA0\x80\"}\n"),
            fmt::format("JSON file '{}/u.jsonl' is not UTF-8: byte 0xED at line 1, byte offset 10 "
                        "starts no UTF-8 character (save the file as UTF-8)",
                        d));
  const std::string j = d + "/j.jsonl";
  EXPECT_EQ(error("j.jsonl", " \n\r\n"),
            fmt::format("JSON file '{}' holds no records (it is empty or blank; JSON Lines hold "
                        "one object a line)",
                        j));
  EXPECT_EQ(
      error("j.jsonl", "{\"text\": \"a\"}\n\n[\"b\"]\n"),
      fmt::format("JSON file '{}' line 3: '[\"b\"]' is not a JSON object (JSON Lines hold one "
                  "a line)",
                  j));
  EXPECT_EQ(
      error("j.jsonl", "{\"text\": \"a\"}\n{\"text\": \"b\"\n"),
      fmt::format("JSON file '{}' line 2: the JSON object that opens there is never closed", j));
  EXPECT_EQ(error("j.jsonl", "{\"text\": \"a\"}\n{\"text\": \"b\",}\n"),
            fmt::format("JSON file '{}' line 2: invalid JSON: syntax error while parsing object "
                        "key - unexpected '}}'; expected string literal",
                        j));
  EXPECT_EQ(error("j.jsonl", "{\"text\": \"a\", \"text\": \"b\"}\n"),
            fmt::format("JSON file '{}' line 1: key 'text' given twice in one object", j));
  EXPECT_EQ(error("j.jsonl", "{\"text\": \"a\"}\n{\"body\": \"b\", \"n\": 1}\n"),
            fmt::format("JSON file '{}' line 2 has no column 'text' (its columns: 'body', 'n'; "
                        "text_column_name chooses the column)",
                        j));
  EXPECT_EQ(error("j.jsonl", "{}\n"),
            fmt::format("JSON file '{}' line 1 has no column 'text' (the record has no columns; "
                        "text_column_name chooses the column)",
                        j));
  EXPECT_EQ(error("j.jsonl", "{\"text\": \"a\"}\n{\"text\": 2}\n"),
            fmt::format("JSON file '{}' line 2: column 'text' is an integer (2), not a string", j));
  EXPECT_EQ(error("j.jsonl", "{\"text\": null}\n"),
            fmt::format("JSON file '{}' line 1: column 'text' is null, not a string", j));
  EXPECT_EQ(
      error("j.jsonl", "{\"body\": [\"a\"]}\n", "body"),
      fmt::format("JSON file '{}' line 1: column 'body' is an array ([\"a\"]), not a string", j));
  // One object with the records in a field: run_clm passes no `field`, so it is one record.
  EXPECT_EQ(error("j.jsonl", "{\"data\": [{\"text\": \"a\"}]}"),
            fmt::format("JSON file '{}' line 1 has no column 'text' (its columns: 'data'; "
                        "text_column_name chooses the column)",
                        j));
  const std::string a = d + "/a.json";
  EXPECT_EQ(error("a.json", "[]"),
            fmt::format("JSON file '{}' holds an empty array (no records)", a));
  EXPECT_EQ(error("a.json", "[{\"text\": \"a\"}]\n{\"text\": \"b\"}\n"),
            fmt::format("JSON file '{}' line 2: invalid JSON: syntax error while parsing value - "
                        "unexpected '{{'; expected end of input",
                        a));
  EXPECT_EQ(error("a.json", "[{\"text\": \"a\"}, 1]"),
            fmt::format("JSON file '{}' element 2 of the top-level array is an integer (1), not "
                        "an object (an array holds objects, or texts)",
                        a));
  EXPECT_EQ(error("a.json", "[\"a\", {\"text\": \"b\"}]"),
            fmt::format("JSON file '{}' element 2 of the top-level array: column 'text' is an "
                        "object ({{\"text\":\"b\"}}), not a string",
                        a));
  EXPECT_EQ(error("a.json", "[\"a\"]", "body"),
            fmt::format("JSON file '{}' element 1 of the top-level array has no column 'body' "
                        "(its columns: 'text'; text_column_name chooses the column)",
                        a));
}

TEST(LmFiles, SplitBoundaryRoundsHalvesToEven) {
  EXPECT_EQ(validation_split_boundary(10, 5), 0);  // 0.5
  EXPECT_EQ(validation_split_boundary(30, 5), 2);  // 1.5
  EXPECT_EQ(validation_split_boundary(50, 5), 2);  // 2.5
  EXPECT_EQ(validation_split_boundary(1000, 15), 150);
  EXPECT_EQ(validation_split_boundary(0, 5), 0);
  EXPECT_EQ(validation_split_boundary(7, 0), 0);
  EXPECT_EQ(validation_split_boundary(7, 100), 7);
  EXPECT_EQ(validation_split_boundary(9, 2.5), 0);
  EXPECT_EQ(testing::input_error_of([] { validation_split_boundary(10, 101); }),
            "validation_split_percentage 101 is not between 0 and 100");
  EXPECT_EQ(testing::input_error_of([] { validation_split_boundary(10, -0.5); }),
            "validation_split_percentage -0.5 is not between 0 and 100");
  EXPECT_THROW(validation_split_boundary(-1, 5), std::invalid_argument);
}

// Each file of tests/reference/inputs/lm_files/ read by this reader and by `datasets` (the
// committed result of lm_files_reference.py on its request.json): the same examples, or both
// refuse it; and run_clm's percent split at each count and percentage the request names.
TEST(LmFiles, ReadsWhatDatasetsReads) {
  const std::string inputs = std::string(SOURCE_DIR) + "/tests/reference/inputs/lm_files";
  const std::string dir = testing::reference_dir("lm_files");
  ASSERT_FALSE(dir.empty());
  const auto request = nlohmann::json::parse(testing::slurp(inputs + "/request.json"));
  const auto reference = nlohmann::json::parse(testing::slurp(dir + "/result.json"));
  ASSERT_GE(request["read"].size(), 50u);
  EXPECT_EQ(testing::slurp(inputs + "/hostile.txt"), kHostileText);
  ASSERT_EQ(reference["read"].size(), request["read"].size());
  for (size_t i = 0; i < request["read"].size(); ++i) {
    const auto& read = request["read"][i];
    const std::string path = inputs + "/" + read["path"].get<std::string>();
    const bool keep = read["keep_linebreaks"];
    const nlohmann::json& expected = reference["read"][i];
    SCOPED_TRACE(path + (keep ? "" : " (keep_linebreaks false)"));
    Lines lines;
    const std::string error = testing::input_error_of(
        [&] { lines = read_lm_file(path, read["text_column"].get<std::string>(), keep); });
    if (expected.contains("error")) {
      EXPECT_NE(error, "") << "datasets refuses it: " << expected["error"].get<std::string>();
    } else {
      EXPECT_EQ(error, "");
      EXPECT_EQ(lines, expected["examples"].get<Lines>());
    }
  }
  const auto& splits = request["split"];
  ASSERT_GE(splits.size(), 2000u);
  ASSERT_EQ(reference["split"].size(), splits.size());
  for (size_t i = 0; i < splits.size(); ++i) {
    const int64_t count = splits[i][0];
    const double percent = splits[i][1];
    EXPECT_EQ(validation_split_boundary(count, percent), reference["split"][i].get<int64_t>())
        << count << " examples, " << percent << "%";
  }
}

}  // namespace lm_files_test
}  // namespace trainer::data
