// Sequence classifiers (...ForSequenceClassification) of every family whose classifier
// Transformers builds, from folders it saved (tests/reference/scripts/seq_cls_reference.py): the
// pooled logits of right- and left-padded batches, a row alone, a pad id inside a row and at its
// end equal Transformers' (float32), the loss of each problem type too; the parameters and
// config.json save_pretrained would write, our folder read back by us and by Transformers; a
// causal folder made a classifier; the configs refused.
#include <fstream>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/models/hf_pretrained.h"
#include "tests/test_util.h"

namespace trainer::seq_cls_test {
namespace {

using json = nlohmann::json;

const json& cases() {
  static const json c =
      json::parse(std::ifstream(testing::reference_dir("seq_cls") + "/cases.json"));
  return c;
}

const json& names() {
  static const json n =
      json::parse(std::ifstream(testing::reference_dir("seq_cls") + "/names.json"));
  return n;
}

torch::Tensor ids_tensor(const json& rows) {
  std::vector<torch::Tensor> out;
  for (const auto& row : rows) out.push_back(torch::tensor(row.get<std::vector<int64_t>>()));
  return torch::stack(out);
}

torch::Tensor float_tensor(const json& rows) {
  std::vector<torch::Tensor> out;
  for (const auto& row : rows) {
    out.push_back(torch::tensor(row.get<std::vector<double>>()).to(torch::kFloat));
  }
  return torch::stack(out);
}

// The labels as Transformers took them: integers, floats, or rows of floats (multi-label).
torch::Tensor labels_tensor(const json& labels) {
  if (labels.at(0).is_array()) return float_tensor(labels);
  if (labels.at(0).is_number_integer()) return torch::tensor(labels.get<std::vector<int64_t>>());
  return torch::tensor(labels.get<std::vector<double>>()).to(torch::kFloat);
}

class SequenceClassifier : public ::testing::TestWithParam<std::string> {};

TEST_P(SequenceClassifier, GivesTransformersPooledLogitsAndLoss) {
  const std::string family = GetParam();
  const json& c = cases().at(family);
  const std::string folder = testing::reference_dir("seq_cls") + "/" + family;
  auto model = models::load_hf_model(folder);
  model->eval();
  ASSERT_TRUE(model->is_classifier());
  EXPECT_EQ(model->config().num_labels, c["num_labels"].get<int64_t>());
  EXPECT_EQ(model->config().pad_token_id, c["pad_token_id"].get<int64_t>());
  EXPECT_EQ(model->task().kind,
            c["num_labels"] == 1 ? data::TaskKind::kRegression : data::TaskKind::kClassification);
  torch::NoGradGuard no_grad;
  for (const auto& b : c["batches"]) {
    const std::string what = family + " " + b["name"].get<std::string>();
    data::Batch batch{{"input_ids", ids_tensor(b["input_ids"])},
                      {"labels", labels_tensor(b["labels"])}};
    if (!b["attention_mask"].is_null()) batch["attention_mask"] = ids_tensor(b["attention_mask"]);
    const models::ModelOutput out = model->forward(batch);
    const torch::Tensor expected = float_tensor(b["logits"]);
    ASSERT_EQ(out.logits.sizes(), expected.sizes()) << what;
    EXPECT_LE((out.logits - expected).abs().max().item<double>(), 1e-5) << what;
    EXPECT_NEAR(out.loss.item<double>(), b["loss"].get<double>(), 1e-5) << what;
  }
  // The problem type the first loss decided is kept, as Transformers keeps it.
  EXPECT_EQ(model->config().problem_type, c["loss_problem_type"].get<std::string>());
}

TEST_P(SequenceClassifier, SavesTransformersNamesAndConfigAndReadsBack) {
  const std::string family = GetParam();
  const json& n = names().at(family);
  const std::string folder = testing::reference_dir("seq_cls") + "/" + family;
  auto model = models::load_hf_model(folder);
  std::map<std::string, std::vector<int64_t>> ours, theirs;
  for (const auto& item : model->named_parameters()) ours[item.key()] = item.value().sizes().vec();
  for (const auto& [name, shape] : n["parameters"].items()) {
    theirs[name] = shape.get<std::vector<int64_t>>();
  }
  EXPECT_EQ(ours, theirs) << family;
  const auto files = models::hf_pretrained_files(*model, folder);
  const json config = json::parse(files.at("config.json"));
  EXPECT_EQ(config["architectures"], n["architectures"]) << family;
  EXPECT_EQ(config["model_type"], n["model_type"]) << family;
  if (!n["id2label"].is_null()) {
    EXPECT_EQ(config["id2label"], n["id2label"]) << family;
  }

  // Our folder, read back by us and by Transformers: the same scores.
  testing::TempDir dir;
  model->save_weights(dir.path(), UINT64_MAX);
  for (const auto& [name, text] : files) std::ofstream(dir.file(name)) << text;
  auto again = models::load_hf_model(dir.path());
  again->eval();
  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor ids = torch::tensor({1, 2, 3}, torch::kLong).unsqueeze(0);
  const torch::Tensor logits = model->classifier_logits(ids);
  EXPECT_TRUE(torch::equal(again->classifier_logits(ids), logits)) << family;
  if (family == "gpt2" || family == "qwen3" || family == "mixtral") {
    const auto result = testing::transformers_classifies(dir.path());
    ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
    std::string last = result.out.substr(0, result.out.find_last_not_of('\n') + 1);
    last = last.substr(last.rfind('\n') + 1);
    const torch::Tensor python = float_tensor(json::parse(last));
    EXPECT_LE((python - logits).abs().max().item<double>(), 1e-5) << family << " " << result.out;
  }
}

INSTANTIATE_TEST_SUITE_P(SeqCls, SequenceClassifier,
                         ::testing::Values("gpt2", "llama", "qwen2", "qwen3", "mistral",
                                           "gemma3_text", "phi3", "gemma2", "olmo2", "smollm3",
                                           "mixtral", "qwen3_moe"));

// AutoModelForSequenceClassification.from_pretrained over a causal folder: the body's weights,
// no lm_head, a fresh score of the asked labels; the classifier's architectures and labels.
TEST(SequenceClassifiers, ACausalFolderBecomesAClassifierWithAFreshHead) {
  const std::string folder = testing::hf_fixtures_dir() + "/llama";
  const models::HfConfig causal = models::read_hf_config(folder);
  const models::HfConfig config = models::as_sequence_classifier(causal, 1, 5);
  EXPECT_TRUE(config.sequence_classification);
  EXPECT_EQ(config.num_labels, 1);
  EXPECT_EQ(config.pad_token_id, 5);
  EXPECT_EQ(json(config.json["architectures"]), json::array({"LlamaForSequenceClassification"}));
  EXPECT_EQ(json(config.json["id2label"]), json({{"0", "LABEL_0"}}));
  auto model = models::load_hf_model(folder, config, "float32");
  auto lm = models::load_hf_model(folder);
  const auto params = model->named_parameters();
  EXPECT_FALSE(params.contains("lm_head.weight"));
  EXPECT_EQ(params["score.weight"].sizes(), torch::IntArrayRef({1, config.hidden_size}));
  EXPECT_TRUE(
      torch::equal(params["model.norm.weight"], lm->named_parameters()["model.norm.weight"]));
  EXPECT_NEAR(params["score.weight"].std().item<double>(), config.initializer_range, 0.01);
  EXPECT_THROW(model->lm_logits(torch::zeros({1, config.hidden_size})), std::logic_error);
}

TEST(SequenceClassifiers, ABatchWithoutAPadIdAndAClassifierTransformersLacksAreOneLine) {
  json config = json::parse(std::ifstream(testing::hf_fixtures_dir() + "/llama/config.json"));
  config["architectures"] = {"LlamaForSequenceClassification"};
  config.erase("pad_token_id");
  const models::HfConfig c = models::parse_hf_config(config, "config.json");
  auto model = models::make_hf_causal_lm(c);
  try {
    model->classifier_logits(torch::ones({2, 3}, torch::kLong));
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "LlamaForSequenceClassification: a batch of 2 rows needs config.json's "
              "pad_token_id to find each row's last token (Transformers: cannot handle batch "
              "sizes > 1 if no padding token is defined); set it");
  }
  // One row: its last token.
  EXPECT_EQ(model->classifier_logits(torch::ones({1, 3}, torch::kLong)).sizes(),
            torch::IntArrayRef({1, 2}));
  auto error_of = [&](const json& j) {
    try {
      models::parse_hf_config(j, "config.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  json wrong = config;
  wrong["architectures"] = {"Qwen2ForSequenceClassification"};
  EXPECT_EQ(error_of(wrong),
            "config.json: architectures \"Qwen2ForSequenceClassification\" does not match "
            "model_type llama (its classifier is LlamaForSequenceClassification)");
  wrong["architectures"] = {"LlamaForTokenClassification"};
  EXPECT_EQ(error_of(wrong),
            "config.json: architectures \"LlamaForTokenClassification\" is not supported (a causal "
            "language model: LlamaForCausalLM, or a sequence classifier: "
            "LlamaForSequenceClassification)");
  wrong = config;
  wrong["problem_type"] = "ranking";
  EXPECT_EQ(error_of(wrong),
            "config.json: problem_type \"ranking\" is not allowed (one of regression, "
            "single_label_classification, multi_label_classification)");
  wrong = config;
  wrong["model_type"] = "granite";
  wrong["architectures"] = {"GraniteForSequenceClassification"};
  EXPECT_EQ(error_of(wrong),
            "config.json: architectures \"GraniteForSequenceClassification\" is not supported "
            "(Transformers 5.24 has no sequence classifier for model_type granite)");
}

}  // namespace
}  // namespace trainer::seq_cls_test
