// TRL's SFTConfig on TrainingArguments: its defaults where they differ from Transformers', its
// arguments taken by `trainer sft` only, and the one-line message of each bad value.
#include <gtest/gtest.h>

#include "lib/base/errors.h"
#include "trainer/training_args.h"

namespace trainer::sft_config_test {
namespace {

TrainingArguments sft(const std::string& json_text = "{}", bool bf16 = true) {
  return TrainingArguments::from_json_text(json_text, "sft.json",
                                           TrainingArguments::sft_defaults(bf16));
}

std::string sft_error(const std::string& json_text) {
  try {
    sft(json_text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(SftConfig, TrlDefaults) {
  const TrainingArguments a = sft();
  EXPECT_TRUE(a.is_sft());
  EXPECT_EQ(a.learning_rate(), 2e-5);
  EXPECT_EQ(a.logging_steps(), 10);
  EXPECT_EQ(a.gradient_checkpointing(), std::optional<bool>(true));
  EXPECT_TRUE(a.checkpointing_plan().enabled);
  EXPECT_TRUE(a.bf16());
  EXPECT_FALSE(sft("{}", false).bf16());
  EXPECT_EQ(a.max_length(), std::optional<int64_t>(1024));
  EXPECT_EQ(a.truncation_mode(), "keep_start");
  EXPECT_FALSE(a.packing());
  EXPECT_EQ(a.packing_strategy(), "bfd");
  EXPECT_EQ(a.loss_type(), std::vector<std::string>{"nll"});
  EXPECT_EQ(a.dataset_text_field(), "text");
  EXPECT_FALSE(a.completion_only_loss().has_value());
  EXPECT_FALSE(a.assistant_only_loss());
  // A key given keeps its value; fp16 given turns the bf16 default off (TRL: bf16 = not fp16).
  EXPECT_EQ(sft(R"({"learning_rate": 1e-3, "logging_steps": 1})").learning_rate(), 1e-3);
  EXPECT_FALSE(sft(R"({"fp16": true, "use_cpu": false})").bf16());
  EXPECT_TRUE(sft(R"({"bf16": true})").bf16());
  // Transformers' own defaults are untouched.
  TrainingArguments plain;
  EXPECT_FALSE(plain.is_sft());
  EXPECT_EQ(plain.learning_rate(), 5e-5);
  EXPECT_EQ(plain.logging_steps(), 500);
}

TEST(SftConfig, PadToMultipleOfReadsTrlsAuto) {
  EXPECT_FALSE(sft(R"({"pad_to_multiple_of": "auto"})").pad_to_multiple_of().has_value());
  EXPECT_EQ(sft(R"({"pad_to_multiple_of": 8})").pad_to_multiple_of(), std::optional<int64_t>(8));
  TrainingArguments a = TrainingArguments::sft_defaults(false);
  a.set_from_text("pad_to_multiple_of", "auto");
  EXPECT_FALSE(a.pad_to_multiple_of().has_value());
  a.set_from_text("pad_to_multiple_of", "16");
  EXPECT_EQ(a.pad_to_multiple_of(), std::optional<int64_t>(16));
}

TEST(SftConfig, TrainerTrainRefusesTheSftArgumentsByName) {
  try {
    TrainingArguments::from_json_text(R"({"packing": true})", "train.json");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "argument packing: an SFTConfig argument (TRL's); only `trainer sft` takes it");
  }
  TrainingArguments a;
  EXPECT_THROW(a.set_from_text("max_length", "512"), InputError);
  // training_args.json of a plain run has none of them; an SFT run's has them all.
  EXPECT_EQ(a.to_json().find("\"packing\""), std::string::npos);
  EXPECT_NE(sft().to_json().find("\"packing\": false"), std::string::npos);
  EXPECT_EQ(TrainingArguments::sft_keys().size(), 21u);
}

TEST(SftConfig, EachBadValueIsOneLine) {
  EXPECT_EQ(sft_error(R"({"truncation_mode": "middle"})"),
            "argument truncation_mode: \"middle\" is not allowed (allowed: keep_start, keep_end)");
  EXPECT_EQ(sft_error(R"({"packing_strategy": "ffd"})"),
            "argument packing_strategy: \"ffd\" is not allowed (allowed: bfd, bfd_split, wrapped)");
  EXPECT_EQ(sft_error(R"({"loss_type": "kl"})"),
            "argument loss_type: \"kl\" is not allowed (allowed: nll, dft)");
  EXPECT_EQ(sft_error(R"({"max_length": 0})"),
            "argument max_length: 0 is not allowed (> 0, or null)");
  EXPECT_EQ(sft_error(R"({"pad_to_multiple_of": -8})"),
            "argument pad_to_multiple_of: -8 is not allowed (> 0, \"auto\" or null)");
  EXPECT_EQ(sft_error(R"({"packing": true, "max_length": 9223372036854775807})"),
            "argument max_length: 9223372036854775807 is not allowed (at most 16777216 with "
            "packing)");
  EXPECT_EQ(sft_error(R"({"pad_to_multiple_of": 1000000000})"),
            "argument pad_to_multiple_of: 1000000000 is not allowed (at most 1048576)");
  EXPECT_EQ(sft_error(R"({"packing": true, "max_length": null})"),
            "argument packing: packing needs a max_length (null is not allowed with it)");
  EXPECT_EQ(sft_error(R"({"padding_free": true})"),
            "argument padding_free: without packing, max_length is not enforced (TRL refuses it): "
            "set packing true (packing_strategy bfd) or max_length null");
  EXPECT_EQ(sft(R"({"padding_free": true, "max_length": null})").padding_free(), true);
  EXPECT_EQ(sft_error(R"({"dataset_kwargs": {"skip_prepare_dataset": true}})"),
            "argument dataset_kwargs: skip_prepare_dataset true is not supported (only "
            "skip_prepare_dataset false: the data is prepared here)");
  EXPECT_EQ(sft_error(R"({"model_init_kwargs": {"device_map": "auto"}})"),
            "argument model_init_kwargs: device_map \"auto\" is not supported (only dtype or "
            "torch_dtype, a string)");
}

}  // namespace
}  // namespace trainer::sft_config_test
