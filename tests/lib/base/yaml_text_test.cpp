// base::parse_yaml: YAML documents as PyYAML's safe_load reads them (the scalars' types, numbers
// with PyYAML's values, printed by PyYAML 6 in the venv of scripts/setup), and its one-line
// errors with file:line:column.
#include <cmath>

#include <gtest/gtest.h>

#include "lib/base/errors.h"
#include "lib/base/yaml_text.h"

namespace trainer::base {
namespace {

using json = nlohmann::ordered_json;

json value_of(const std::string& scalar) { return parse_yaml("k: " + scalar, "t.yaml", 8)["k"]; }

std::string error_of(const std::string& text) {
  try {
    parse_yaml(text, "t.yaml", 8);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(YamlText, ScalarsAsPyYamlTypesThem) {
  // yaml.safe_load("k: " + s)["k"] for each s, as PyYAML 6 gives it.
  EXPECT_EQ(value_of("1e-5"), json("1e-5"));  // YAML 1.1: no dot, text
  EXPECT_EQ(value_of("2.0e-5"), json(2e-05));
  EXPECT_EQ(value_of("2.0e-05"), json(2e-05));
  EXPECT_EQ(value_of("1.0e5"), json("1.0e5"));  // the exponent needs its sign
  EXPECT_EQ(value_of("1.0e+5"), json(100000.0));
  EXPECT_EQ(value_of("1e5"), json("1e5"));
  for (const char* null_text : {"~", "null", "Null", ""}) {
    EXPECT_TRUE(value_of(null_text).is_null()) << null_text;
  }
  for (const char* yes : {"yes", "Yes", "on", "true", "True", "TRUE"}) {
    EXPECT_EQ(value_of(yes), json(true)) << yes;
  }
  for (const char* no : {"no", "NO", "off", "false", "False"}) {
    EXPECT_EQ(value_of(no), json(false)) << no;
  }
  EXPECT_EQ(value_of("y"), json("y"));
  EXPECT_EQ(value_of("n"), json("n"));
  EXPECT_EQ(value_of("tRue"), json("tRue"));
  EXPECT_EQ(value_of("1_000"), json(1000));
  EXPECT_EQ(value_of("0x1F"), json(31));
  EXPECT_EQ(value_of("0o17"), json("0o17"));
  EXPECT_EQ(value_of("017"), json(15));
  EXPECT_EQ(value_of("0b101"), json(5));
  EXPECT_EQ(value_of("-0"), json(0));
  EXPECT_EQ(value_of("+5"), json(5));
  EXPECT_EQ(value_of("1:30"), json(90));
  EXPECT_EQ(value_of("1:30.5"), json(90.5));
  EXPECT_EQ(value_of(".5"), json(0.5));
  EXPECT_EQ(value_of("-.5"), json("-.5"));
  EXPECT_EQ(value_of("1."), json(1.0));
  EXPECT_EQ(value_of("09"), json("09"));
  EXPECT_EQ(value_of("0.1_0"), json(0.1));
  EXPECT_EQ(value_of("9223372036854775807"), json(int64_t{9223372036854775807}));
  EXPECT_EQ(value_of("-9223372036854775808"), json(std::numeric_limits<int64_t>::min()));
  EXPECT_EQ(value_of(".inf"), json(std::numeric_limits<double>::infinity()));
  EXPECT_EQ(value_of("-.inf"), json(-std::numeric_limits<double>::infinity()));
  EXPECT_TRUE(std::isnan(value_of(".NaN").get<double>()));
  // Quoted scalars and !!str are text; explicit tags construct their type.
  EXPECT_EQ(value_of("'1e-5'"), json("1e-5"));
  EXPECT_EQ(value_of("\"yes\""), json("yes"));
  EXPECT_EQ(value_of("!!str 5"), json("5"));
  EXPECT_EQ(value_of("!!float 1"), json(1.0));
  EXPECT_EQ(value_of("!!int '7'"), json(7));
}

TEST(YamlText, CollectionsAnchorsAndMerges) {
  const json v = parse_yaml(
      "base: &b {dtype: bfloat16, n: 2}\n"
      "list: [a, 1, 2.5, null]\n"
      "block:\n  - x\n  - y\n"
      "merged:\n  <<: *b\n  n: 3\n"
      "copy: *b\n",
      "t.yaml", 8);
  EXPECT_EQ(v.dump(),
            R"({"base":{"dtype":"bfloat16","n":2},"list":["a",1,2.5,null],"block":["x","y"],)"
            R"("merged":{"dtype":"bfloat16","n":3},"copy":{"dtype":"bfloat16","n":2}})");
  EXPECT_TRUE(parse_yaml("", "t.yaml", 8).is_null());
  EXPECT_TRUE(parse_yaml("# only a comment\n", "t.yaml", 8).is_null());
}

TEST(YamlText, ErrorsAreOneLineWithLineAndColumn) {
  EXPECT_EQ(error_of("a: 1\nb: [1, 2\n"),
            "t.yaml:3:1: not valid YAML: end of sequence flow not found");
  EXPECT_EQ(error_of("a: 1\nb: 2\na: 3\n"),
            "t.yaml:3:1: a is given twice (first at line 1); give it once");
  EXPECT_EQ(error_of("a: 1\n---\nb: 2\n"),
            "t.yaml:2:1: a second YAML document; a config file holds one");
  EXPECT_EQ(error_of("a: !!python/object:os.system x\n"),
            "t.yaml:1:4: the tag tag:yaml.org,2002:python/object:os.system is not one PyYAML's "
            "safe_load constructs (str, int, float, bool, null, seq, map)");
  EXPECT_EQ(error_of("a: 99999999999999999999\n"),
            "t.yaml:1:4: the integer 99999999999999999999 is out of range (up to 2^63-1)");
  EXPECT_EQ(error_of("a: [[[[[[[[[[1]]]]]]]]]]\n"),
            "t.yaml:1:12: values nested deeper than 8 levels");
  EXPECT_EQ(error_of("? [a]\n: 1\n"),
            "t.yaml:1:3: a mapping's key must be text, not a list, a mapping or null");
  // Aliases expanded past 100,000 values (a "billion laughs"), and an alias of itself.
  std::string laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'h'; ++c) {
    laughs += fmt::format("{}: &{} [*{}, *{}, *{}, *{}, *{}, *{}, *{}, *{}, *{}, *{}]\n", c, c,
                          char(c - 1), char(c - 1), char(c - 1), char(c - 1), char(c - 1),
                          char(c - 1), char(c - 1), char(c - 1), char(c - 1), char(c - 1));
  }
  EXPECT_NE(error_of(laughs).find("more than 100000 values"), std::string::npos)
      << error_of(laughs);
  EXPECT_NE(error_of("a: &a [*a]\n").find("t.yaml:"), std::string::npos);
  EXPECT_EQ(error_of("a: 1\nb: x\xAEy\n"),
            "t.yaml:2:5: not valid YAML: the byte 0xAE is not UTF-8");
  // yaml-cpp 0.7's LoadAll loops on a stray comma, its memory growing: one line instead.
  EXPECT_NE(error_of(", a\nb: 1\n").find("t.yaml:"), std::string::npos) << error_of(", a\nb: 1\n");
}

}  // namespace
}  // namespace trainer::base
