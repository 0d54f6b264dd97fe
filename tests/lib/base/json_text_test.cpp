// The one JSON reader (base::parse_json): nesting past serde_json's limit refused in one line
// before anything recurses, parse errors without nlohmann's tag, bytes that are not UTF-8 shown
// escaped; and the path checks every file read goes through.
#include "lib/base/json_text.h"

#include <filesystem>
#include <fstream>

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/text.h"
#include "tests/test_util.h"

namespace trainer::base {
namespace json_text_test {

using testing::expect_input_error;
using testing::TempDir;

TEST(JsonText, NestingPastTheLimitIsOneLineNotACrash) {
  // 128 levels read (serde_json's limit, as tokenizers and safetensors read these files).
  const std::string deepest = std::string(128, '[') + std::string(128, ']');
  EXPECT_EQ(parse_json(deepest, "x").dump().size(), 256u);
  EXPECT_EQ(json_too_deep_at(deepest), std::string_view::npos);
  // 200,000 levels (a crash of the stack when copied or printed) refused where level 129 opens.
  const std::string deep =
      "{\"a\": \n " + std::string(200000, '[') + std::string(200000, ']') + "}";
  EXPECT_EQ(json_too_deep_at(deep), 8u + 127);  // the object is the first level
  expect_input_error([&] { parse_json(deep, "config.json"); },
                     {"config.json is not valid JSON: values nested deeper than 128 levels (line "
                      "2, column 129)"});
  // Brackets inside strings are text, escaped quotes included.
  const std::string quoted = "[\"" + std::string(500, '[') + "\\\"" + std::string(500, '{') + "\"]";
  EXPECT_EQ(parse_json(quoted, "x")[0].get<std::string>().size(), 1001u);
  // The same limit where a callback parser reads (training arguments, data files).
  expect_input_error([&] { check_json_depth(std::string(129, '{'), "args.json"); },
                     {"args.json is not valid JSON: values nested deeper than 128 levels (line 1, "
                      "column 129)"});
}

TEST(JsonText, ParseErrorsAreOneLineWithoutTheLibrarysTagOrRawBytes) {
  expect_input_error([&] { parse_json("", "t.json"); },
                     {"t.json is not valid JSON: parse error at line 1, column 1"});
  expect_input_error([&] { parse_json("{\"model\": {", "t.json"); },
                     {"t.json is not valid JSON: parse error", "unexpected end of input"});
  const std::string message = testing::input_error_of([&] { parse_json("\xff\xfe{}", "t.json"); });
  EXPECT_EQ(message.find("[json.exception"), std::string::npos) << message;
  EXPECT_NE(message.find("last read: '\\xff'"), std::string::npos) << message;
  EXPECT_EQ(message.find('\xff'), std::string::npos) << message;
  EXPECT_EQ(shown_text("caf\xc3\xa9 \xe9t\xe9"), "caf\xc3\xa9 \\xe9t\\xe9");
}

// The reader builds what nlohmann's own parser builds: every value type, members in the order
// written, a key given twice in its first place with its last value (in a small object and in
// one past the size where keys are indexed), and 1e400 refused as a number out of range.
TEST(JsonText, ParsedValuesAreNlohmannsOwnWithKeysInOrderAndTheLastOfARepeatedKey) {
  const std::string text =
      R"({"b": 1, "a": [true, null, -2, 18446744073709551615, 1.5, "s", {}, []], "b": {"x": 2},)"
      R"( "c": "\u00e9"})";
  const auto ours = parse_json(text, "x");
  EXPECT_EQ(ours, nlohmann::ordered_json::parse(text));
  EXPECT_EQ(ours.dump(), R"({"b":{"x":2},"a":[true,null,-2,18446744073709551615,1.5,"s",{},[]],)"
                         R"("c":"é"})");
  EXPECT_TRUE(ours["a"][3].is_number_unsigned());
  // n members, every tenth key given twice (the second time with another value), then small
  // objects with a repeated key: the same as nlohmann's parser at 2,000 (its own takes n^2/2
  // comparisons), the same order and values at 200,000.
  auto object_of = [](int n) {
    std::string text = "{";
    for (int i = 0; i < n; ++i)
      text += "\"k" + std::to_string(i) + "\": " + std::to_string(i) + ",";
    for (int i = 0; i < n; i += 10) text += "\"k" + std::to_string(i) + "\": -1,";
    return text + "\"last\": [{\"a\": 1, \"a\": 2}, {\"z\": 0}]}";
  };
  EXPECT_EQ(parse_json(object_of(2000), "x"), nlohmann::ordered_json::parse(object_of(2000)));
  const auto parsed = parse_json(object_of(200000), "big.json");
  ASSERT_EQ(parsed.size(), 200001u);
  int i = 0;
  for (const auto& [key, value] : parsed.items()) {
    if (i < 200000) {
      ASSERT_EQ(key, "k" + std::to_string(i));
      ASSERT_EQ(value.get<int>(), i % 10 == 0 ? -1 : i) << key;
    }
    ++i;
  }
  EXPECT_EQ(parsed["last"].dump(), R"([{"a":2},{"z":0}])");
  expect_input_error([&] { parse_json("[1e400]", "n.json"); },
                     {"n.json is not valid JSON: number overflow parsing '1e400'"});
  expect_input_error([&] { parse_json("{\"a\": 1} x", "t.json"); },
                     {"t.json is not valid JSON: parse error at line 1, column 10"});
}

// A streamed container is kept empty, of its type, and its members reach `take` in order with
// their keys ("" in an array), containers whole; `start` says when it opens (again for a key
// given twice); other containers are as parsed; what take throws leaves parse_json.
TEST(JsonText, StreamedContainersHandTheirMembersOverAsRead) {
  const std::string text =
      R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": [1, {"c": 2}]}, "merges": ["a b", )"
      R"(["a", "b"]], "vocab": {"z": 9}}, "vocab": {"not": "streamed"}, "list": [{"vocab": 1}]})";
  std::vector<std::string> seen;
  auto record = [&](const std::string& what) {
    return [&seen, what](const std::string& key, nlohmann::ordered_json&& value) {
      seen.push_back(what + " " + key + "=" + value.dump());
    };
  };
  const std::vector<JsonStream> streams = {
      {{"model", "vocab"}, [&] { seen.push_back("vocab opens"); }, record("vocab")},
      {{"model", "merges"}, nullptr, record("merges")},
      {{"list", "[]", "vocab"}, nullptr, record("never")}};
  const auto parsed = parse_json(text, "t.json", streams);
  EXPECT_EQ(parsed.dump(),
            R"({"model":{"type":"BPE","vocab":{},"merges":[]},"vocab":{"not":"streamed"},)"
            R"("list":[{"vocab":1}]})");
  EXPECT_EQ(seen, (std::vector<std::string>{"vocab opens", "vocab a=0", R"(vocab b=[1,{"c":2}])",
                                            R"(merges ="a b")", R"(merges =["a","b"])",
                                            "vocab opens", "vocab z=9"}));
  const std::vector<JsonStream> refusing = {
      {{"model", "merges"}, nullptr, [](const std::string&, nlohmann::ordered_json&&) {
         throw InputError("t.json: a merge refused");
       }}};
  expect_input_error([&] { parse_json(text, "t.json", refusing); }, {"t.json: a merge refused"});
}

TEST(JsonText, PathsThatCannotBeLookedAtSayWhy) {
  TempDir dir;
  std::filesystem::create_symlink("loop", dir.file("loop"));
  std::ofstream(dir.file("file")) << "x";
  EXPECT_EQ(path_problem(dir.file("file")), "");
  EXPECT_EQ(path_problem(dir.file("missing")), "does not exist");
  EXPECT_EQ(path_problem(dir.file("file") + "/x"), "does not exist");
  EXPECT_EQ(path_problem(dir.file("loop")), "cannot be read: Too many levels of symbolic links");
  // A loop counts as there (never throws, as std::filesystem::exists does): opening it says why.
  EXPECT_TRUE(exists(dir.file("loop")));
  EXPECT_FALSE(exists(dir.file("missing")));
  // A folder one may not search (root may search any: checked only when not root).
  std::filesystem::create_directory(dir.file("closed"));
  ::chmod(dir.file("closed").c_str(), 0);
  if (::geteuid() != 0) {
    EXPECT_EQ(path_problem(dir.file("closed/config.json")), "cannot be read: Permission denied");
  }
  ::chmod(dir.file("closed").c_str(), 0755);
  expect_input_error([&] { read_json(dir.file("loop")); },
                     {"cannot open " + dir.file("loop") + ": Too many levels of symbolic links"});
}

TEST(JsonText, AnOutputFolderThatCannotBeMadeIsInputError) {
  TempDir dir;
  std::ofstream(dir.file("file")) << "x";
  std::filesystem::create_symlink("loop", dir.file("loop"));
  for (const auto& row : std::vector<std::pair<std::string, std::string>>{
           {dir.file("file"), "--output_dir " + dir.file("file") + " is a file, not a directory"},
           {dir.file("file") + "/x", "is not a directory"},
           {"/dev/null/x", "is not a directory"},
           {"/proc/1/x", "cannot create --output_dir /proc/1/x"},
           {dir.file("loop") + "/x", "Too many levels of symbolic links"}}) {
    // Not a structured binding: clang 14 cannot capture one in a lambda.
    expect_input_error([&] { make_output_directory(row.first, "--output_dir"); }, {row.second});
  }
  // A path that goes into a folder it makes and back out to a file leaves nothing made.
  expect_input_error([&] { make_output_directory(dir.file("new/../file/x"), "--output_dir"); },
                     {"is not a directory"});
  EXPECT_FALSE(std::filesystem::exists(dir.file("new")));
  EXPECT_EQ(make_output_directory(dir.file("a/b"), "--output_dir").size(), 2u);
  EXPECT_TRUE(make_output_directory(dir.file("a/b"), "--output_dir").empty());
}

}  // namespace json_text_test
}  // namespace trainer::base
