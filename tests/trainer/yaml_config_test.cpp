// YAML configs (TRL's `--config recipe.yaml`): the same TrainingArguments as the equivalent JSON
// config, text converted where TRL's argparse converts it, TRL's script arguments and other names,
// and each bad input one line.
#include <cstdlib>

#include <gtest/gtest.h>

#include "lib/base/errors.h"
#include "trainer/training_args.h"

namespace trainer::yaml_config_test {
namespace {

TrainingArguments sft_yaml(const std::string& text) {
  return TrainingArguments::from_yaml_text(text, "recipe.yaml",
                                           TrainingArguments::sft_defaults(false));
}
TrainingArguments sft_json(const std::string& text) {
  return TrainingArguments::from_json_text(text, "recipe.json",
                                           TrainingArguments::sft_defaults(false));
}

std::string yaml_error(const std::string& text,
                       const TrainingArguments& defaults = TrainingArguments::sft_defaults(false)) {
  try {
    TrainingArguments::from_yaml_text(text, "recipe.yaml", defaults);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

// A recipe as the alignment handbook writes one: every type, comments, a block list, a nested
// mapping, an anchor and its alias, PyYAML's 1.1 numbers.
const char* kRecipe = R"(# Model arguments
model_name_or_path: models/tiny-llama
model_revision: main
dtype: bfloat16
attn_implementation: sdpa

# Data training arguments
dataset_name: data/chat
dataset_config: null
dataset_train_split: train
dataset_test_split: test
max_seq_length: 128
packing: yes
dataset_num_proc: ~

# SFT trainer config
bf16: false
do_eval: true
eval_strategy: epoch
gradient_accumulation_steps: 2
gradient_checkpointing: true
gradient_checkpointing_kwargs: &ckpt
  use_reentrant: false
activation_checkpointing_kwargs: *ckpt
learning_rate: 2.0e-05
adam_epsilon: 1e-6
logging_steps: 5
lr_scheduler_type: cosine
max_steps: -1
num_train_epochs: 1
output_dir: data/tiny-sft
overwrite_output_dir: true
per_device_train_batch_size: 4
report_to:
- none
save_strategy: "no"
seed: 42
warmup_ratio: 0.1
use_peft: true
lora_r: 16
lora_alpha: 32
lora_dropout: 0.05
lora_target_modules: [q_proj, v_proj]
lora_modules_to_save:
- lm_head
)";

const char* kSameAsJson = R"({
  "model_name_or_path": "models/tiny-llama", "model_revision": "main",
  "torch_dtype": "bfloat16", "attn_implementation": "sdpa",
  "dataset_name": "data/chat", "dataset_config": null, "dataset_train_split": "train",
  "dataset_test_split": "test", "max_length": 128, "packing": true, "dataset_num_proc": null,
  "bf16": false, "do_eval": true, "eval_strategy": "epoch", "gradient_accumulation_steps": 2,
  "gradient_checkpointing": true, "gradient_checkpointing_kwargs": {"use_reentrant": false},
  "activation_checkpointing_kwargs": {"use_reentrant": false},
  "learning_rate": 2e-05, "adam_epsilon": 1e-06, "logging_steps": 5,
  "lr_scheduler_type": "cosine", "max_steps": -1, "num_train_epochs": 1,
  "output_dir": "data/tiny-sft", "overwrite_output_dir": true, "per_device_train_batch_size": 4,
  "report_to": ["none"], "save_strategy": "no", "seed": 42, "warmup_ratio": 0.1,
  "use_peft": true, "lora_r": 16, "lora_alpha": 32, "lora_dropout": 0.05,
  "target_modules": ["q_proj", "v_proj"], "modules_to_save": ["lm_head"]})";

TEST(YamlConfig, ARecipeReadsAsItsJson) {
  const TrainingArguments yaml = sft_yaml(kRecipe);
  const TrainingArguments json = sft_json(kSameAsJson);
  EXPECT_EQ(yaml.to_json(), json.to_json());
  EXPECT_EQ(yaml.learning_rate(), 2e-05);
  EXPECT_EQ(yaml.adam_epsilon(), 1e-06);  // "1e-6", text to PyYAML, a number to argparse
  EXPECT_EQ(yaml.max_length(), std::optional<int64_t>(128));
  EXPECT_EQ(yaml.torch_dtype(), "bfloat16");
  EXPECT_EQ(yaml.target_modules(), (std::vector<std::string>{"q_proj", "v_proj"}));
  EXPECT_EQ(yaml.modules_to_save(), std::vector<std::string>{"lm_head"});
  EXPECT_EQ(yaml.lora_r(), 16);
  EXPECT_TRUE(yaml.packing());
  EXPECT_TRUE(yaml.given("max_length"));
  EXPECT_EQ(yaml.attn_implementation(), std::optional<std::string>("sdpa"));
}

TEST(YamlConfig, TextIsConvertedAsTrlsArgparseConvertsIt) {
  // PyYAML reads 1e-5 as text, 2.0e-5 as a float; TRL's argparse converts a text default with
  // the field's type (float("1e-5")): both are numbers, as in `trl sft --config`.
  EXPECT_EQ(sft_yaml("learning_rate: 1e-5").learning_rate(), 1e-5);
  EXPECT_EQ(sft_yaml("learning_rate: 2.0e-5").learning_rate(), 2e-5);
  EXPECT_EQ(sft_yaml("learning_rate: '3e-4'").learning_rate(), 3e-4);
  EXPECT_EQ(sft_yaml("num_train_epochs: 2.0e5").num_train_epochs(), 200000.0);
  EXPECT_EQ(sft_yaml("max_steps: '12'").max_steps(), 12);
  EXPECT_EQ(sft_yaml("logging_steps: 1_0").logging_steps(), 10);
  EXPECT_EQ(sft_yaml("gradient_checkpointing: 'no'").gradient_checkpointing(),
            std::optional<bool>(false));
  EXPECT_TRUE(sft_yaml("packing: on").packing());
  EXPECT_FALSE(sft_yaml("packing: n").packing());  // "n": text to PyYAML, false to argparse
  EXPECT_EQ(sft_yaml("model_init_kwargs: '{\"dtype\": \"float32\"}'").model_init_kwargs().dump(),
            R"({"dtype":"float32"})");
  // Text stays text where the field is text.
  EXPECT_EQ(sft_yaml("run_name: 1e-5").run_name(), std::optional<std::string>("1e-5"));
  EXPECT_EQ(sft_yaml("run_name: '7'").run_name(), std::optional<std::string>("7"));
  // dtype null is auto (Transformers 5's default); lists' null is empty.
  EXPECT_EQ(sft_yaml("dtype: null").torch_dtype(), "auto");
  EXPECT_TRUE(sft_yaml("lora_target_modules: ~").target_modules().empty());
}

TEST(YamlConfig, EnvAndTrlsMixtureKeys) {
  ::unsetenv("TRAINER_YAML_TEST_VAR");
  sft_yaml("env:\n  TRAINER_YAML_TEST_VAR: yes\nseed: 1\n");
  ASSERT_NE(std::getenv("TRAINER_YAML_TEST_VAR"), nullptr);
  EXPECT_STREQ(std::getenv("TRAINER_YAML_TEST_VAR"), "True");  // Python's str(True)
  EXPECT_EQ(sft_yaml("datasets: []\nstreaming: false\ntest_split_size: null\n").seed(), 42);
  EXPECT_EQ(yaml_error("datasets:\n- path: a\n"),
            "recipe.yaml: datasets [{\"path\":\"a\"}]: TRL's dataset mixture (datasets, "
            "streaming, test_split_size) is not supported; give dataset_name (a .json/.jsonl "
            "file or a folder of them)");
}

TEST(YamlConfig, TrlsScriptArguments) {
  const TrainingArguments a = sft_yaml(
      "dataset_config: default\ndataset_streaming: false\nignore_bias_buffers: true\n"
      "model_revision: v1\nattn_implementation: eager\nlora_task_type: CAUSAL_LM\n"
      "load_in_4bit: false\nbnb_4bit_quant_type: fp4\ntrust_remote_code: false\n");
  EXPECT_EQ(a.dataset_config(), nlohmann::ordered_json("default"));
  EXPECT_EQ(a.model_revision(), "v1");
  EXPECT_EQ(yaml_error("attn_implementation: flash_attention_2"),
            "argument attn_implementation: \"flash_attention_2\" is not allowed (eager or sdpa: "
            "that kernel is not built into this trainer (LibTorch's own attention computes the "
            "same softmax; eager and sdpa are it))");
  EXPECT_EQ(yaml_error("attn_implementation: fast"),
            "argument attn_implementation: \"fast\" is not allowed (eager or sdpa (the same "
            "attention here), or null)");
  EXPECT_EQ(yaml_error("dataset_streaming: true"),
            "argument dataset_streaming: true is not allowed (false only: the data is read "
            "whole, prepared once per node and cached)");
  EXPECT_EQ(yaml_error("load_in_4bit: true"),
            "argument load_in_4bit: true is not allowed (false only: quantized weights need "
            "bitsandbytes' CUDA kernels, which this trainer does not have (train LoRA over bf16 "
            "weights: use_peft with dtype bfloat16))");
  EXPECT_EQ(yaml_error("use_dora: true"),
            "argument use_dora: true is not allowed (false only: DoRA is not implemented)");
  EXPECT_EQ(yaml_error("lora_task_type: SEQ_CLS"),
            "argument lora_task_type: \"SEQ_CLS\" is not allowed (CAUSAL_LM only: the models "
            "here are causal language models)");
  EXPECT_EQ(yaml_error("dataset_config: {path: x}"),
            "argument dataset_config: {\"path\":\"x\"} is not allowed (TRL's name of a "
            "configuration: a subfolder of dataset_name, or null)");
  // `trainer train` refuses them by name, and dataset_config as text.
  EXPECT_EQ(yaml_error("model_revision: main", TrainingArguments()),
            "argument model_revision: one of TRL's script arguments (ScriptArguments, "
            "ModelConfig); only `trainer sft` and `trainer dpo` take it");
  EXPECT_EQ(yaml_error("dataset_config: default", TrainingArguments()),
            "argument dataset_config: \"default\" is not allowed (a JSON object of the data set's "
            "options; a configuration's name is TRL's, for trainer sft and trainer dpo)");
  // DPO takes them too.
  EXPECT_EQ(TrainingArguments::from_yaml_text("dataset_test_split: test_prefs\n", "dpo.yaml",
                                              TrainingArguments::dpo_defaults(false))
                .dataset_test_split(),
            "test_prefs");
}

TEST(YamlConfig, OtherNamesThatDisagreeAreOneLine) {
  EXPECT_EQ(sft_yaml("max_seq_length: 64\nmax_length: 64").max_length(),
            std::optional<int64_t>(64));
  EXPECT_EQ(yaml_error("max_seq_length: 64\nmax_length: 32"),
            "recipe.yaml: max_length 32 and its old name max_seq_length 64 disagree (give one)");
  EXPECT_EQ(yaml_error("dtype: float32\ntorch_dtype: bfloat16"),
            "recipe.yaml: torch_dtype \"bfloat16\" and TRL's name dtype \"float32\" disagree "
            "(give one)");
  EXPECT_EQ(TrainingArguments::from_json_text(R"({"max_seq_length": 16})", "a.json",
                                              TrainingArguments::sft_defaults(false))
                .max_length(),
            std::optional<int64_t>(16));
}

TEST(YamlConfig, BadInputIsOneLine) {
  EXPECT_EQ(yaml_error("learning_rate: [1\n"),
            "recipe.yaml:2:1: not valid YAML: end of sequence flow not found");
  EXPECT_EQ(yaml_error("seed: 1\nseed: 2\n"),
            "recipe.yaml:2:1: seed is given twice (first at line 1); give it once");
  EXPECT_EQ(yaml_error("- a\n- b\n"),
            "recipe.yaml must hold one YAML mapping of arguments, not a list");
  EXPECT_EQ(yaml_error("just text"),
            "recipe.yaml must hold one YAML mapping of arguments, not a string");
  EXPECT_EQ(yaml_error(""), "recipe.yaml must hold one YAML mapping of arguments, not nothing");
  EXPECT_EQ(yaml_error("seed: 1\n---\nseed: 2\n"),
            "recipe.yaml:2:1: a second YAML document; a config file holds one");
  EXPECT_EQ(yaml_error("learning_rat: 1.0e-3"),
            "unknown argument learning_rat (did you mean learning_rate?)");
  EXPECT_EQ(yaml_error("learning_rate: fast"),
            "argument learning_rate: \"fast\" is a string, expected a number");
  EXPECT_EQ(yaml_error("packing: maybe"),
            "argument packing: maybe is not true or false (yes/no, true/false, t/f, y/n, 1/0)");
  EXPECT_EQ(yaml_error("seed: {a: 1}"),
            "argument seed: a mapping is not allowed, expected an integer");
  EXPECT_EQ(yaml_error("env: [a]"),
            "recipe.yaml: env is a list; it takes a mapping of variables to values");
}

}  // namespace
}  // namespace trainer::yaml_config_test
