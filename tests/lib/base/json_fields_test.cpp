// base::JsonFields, the one reader of a JSON object's fields: its typed reads, and each style's
// wording of the same problems (a file's fields, generation_config.json's, trainer_state.json's,
// model_config's options with the unknown-option error).
#include "lib/base/json_fields.h"

#include <gtest/gtest.h>

#include "lib/base/errors.h"
#include "tests/test_util.h"

namespace trainer::base {
namespace json_fields_test {

using json = nlohmann::ordered_json;
using Style = JsonFields::Style;
using testing::input_error_of;

const json kObject = json::parse(R"({"n": 3, "x": 1.5, "s": "a", "b": true, "null": null,
                                     "w": 1e3, "list": ["a", "b"], "ids": [1, 2], "bad": "no"})");

TEST(JsonFields, TypedReadsTakeTheValueOrTheFallback) {
  JsonFields f(kObject, "config.json");
  EXPECT_EQ(f.positive("n", 0), 3);
  EXPECT_EQ(f.positive("absent", 7), 7);
  EXPECT_EQ(f.integer("w", 0), 1000);  // a whole number, as a float
  EXPECT_EQ(input_error_of([&] { f.integer("x", 0); }), "config.json: x 1.5 is not an integer");
  EXPECT_EQ(f.integer("n", 0, 0, 5), 3);
  EXPECT_EQ(f.integer("null", 9), 9);  // null is absent
  EXPECT_DOUBLE_EQ(f.number("x", 0), 1.5);
  EXPECT_DOUBLE_EQ(f.number("n"), 3.0);
  EXPECT_EQ(f.string("s"), "a");
  EXPECT_TRUE(f.boolean("b", false));
  EXPECT_EQ(f.choice("s", "z", {"a", "b"}), "a");
  EXPECT_EQ(f.strings("list"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(f.strings("s"), std::vector<std::string>{"a"});
  EXPECT_EQ(f.ids("ids"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(f.ids("n"), std::vector<int64_t>{3});
  EXPECT_EQ(f.integers("n", {}, 0), std::vector<int64_t>{3});
  EXPECT_TRUE(f.required("null").is_null());
  EXPECT_FALSE(f.has("null"));
  EXPECT_EQ(f.unread(), std::optional<std::string>("bad"));
}

TEST(JsonFields, EachStyleWordsTheSameProblems) {
  auto errors = [](Style style) {
    JsonFields f(kObject, "f.json", style);
    return std::vector<std::string>{input_error_of([&] { f.number("s", 0); }),
                                    input_error_of([&] { f.integer("n", 0, 5); }),
                                    input_error_of([&] { f.positive("absent", 0); }),
                                    input_error_of([&] { f.required("absent"); }),
                                    input_error_of([&] { f.fail("n", "odd"); }),
                                    input_error_of([&] { f.fail_object("not one"); })};
  };
  EXPECT_EQ(errors(Style::kFile),
            (std::vector<std::string>{
                "f.json: s \"a\" is not a number", "f.json: n 3 is not allowed (an integer >= 5)",
                "f.json: absent is missing (a positive integer)", "f.json: absent is missing",
                "f.json: n odd", "f.json: not one"}));
  EXPECT_EQ(
      errors(Style::kNotAllowed),
      (std::vector<std::string>{"f.json: s \"a\" is not allowed (a number)",
                                "f.json: n 3 is not allowed (an integer >= 5)",
                                "f.json: absent is missing (a positive integer)",
                                "f.json: absent is missing", "f.json: n odd", "f.json: not one"}));
  EXPECT_EQ(errors(Style::kQuotedKey),
            (std::vector<std::string>{
                "f.json: \"s\" is not a number", "f.json: \"n\" is not an integer >= 5",
                "f.json: \"absent\" is missing (a positive integer)", "f.json: no \"absent\"",
                "f.json: \"n\" odd", "f.json: not one"}));
}

TEST(JsonFields, OptionsSayWhoseAndRefuseAnOptionLeftUnread) {
  const json config = {{"n_layers", 2}, {"dropout", 1}};
  JsonFields options = JsonFields::options("model_config", "gpt", config);
  EXPECT_EQ(options.integer("n_layer", 4, 1, 8), 4);
  EXPECT_EQ(input_error_of([&] { options.number("dropout", 0, 0, 1, /*max_open=*/true); }),
            "model_config: option dropout of gpt is 1; must be in [0.0, 1.0)");
  EXPECT_EQ(input_error_of([&] { options.finish(); }),
            "model_config: unknown option 'n_layers' for gpt (did you mean 'n_layer'? known: "
            "n_layer, dropout)");
  EXPECT_EQ(input_error_of([&] { options.string("n_layers", ""); }),
            "model_config: option n_layers of gpt is 2; expected a string");
  EXPECT_EQ(input_error_of([&] {
              options.choice("dropout", "a", {"a", "b"});
            }),
            "model_config: option dropout of gpt is 1; allowed: a, b");

  JsonFields none = JsonFields::options("dataset_config", "mnist", json());
  EXPECT_FALSE(none.unread().has_value());
  none.finish();
  const json extra = {{"path", "x"}};
  EXPECT_EQ(input_error_of([&] { JsonFields::options("dataset_config", "mnist", extra).finish(); }),
            "dataset_config: unknown option 'path' for mnist (it takes none)");
  EXPECT_EQ(input_error_of([&] { JsonFields::options("model_config", "mlp", json::array({1})); }),
            "model_config: [1] is not a JSON object (options for mlp, e.g. {})");
}

}  // namespace json_fields_test
}  // namespace trainer::base
