// `trainer train` on run_glue.py's text classification data against Transformers' Trainer
// (tests/reference/scripts/seq_cls_finetune.py: the same CSV files, classifiers and order): the
// tokenized rows, each step's loss, gradient norm and learning rate, the evaluation, the eval
// logits and the trained weights; accumulation's quirk (a step's loss the sum of its micro-batch
// means); PEFT's SEQ_CLS adapters both ways; `trainer evaluate` and `predict` on the trained
// folders and on PEFT's own adapter; a regression; and the bad input refused in one line.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/data/text_classification_data.h"
#include "lib/io/safetensors.h"
#include "lib/tokenizers/tokenizer.h"
#include "tests/test_util.h"

namespace trainer::seq_cls_run_test {
namespace {

using json = nlohmann::ordered_json;
using testing::run;

struct Case {
  std::string name, family, extra;
};

const Case kCases[] = {
    {"llama", "llama", ""},
    {"gpt2", "gpt2", ""},
    {"qwen3_ga2", "qwen3", "--gradient_accumulation_steps 2"},
    {"lora_llama", "llama", "--use_peft true --lora_r 8 --lora_alpha 16 --lora_dropout 0"},
};

std::string inputs() { return std::string(SOURCE_DIR) + "/tests/reference/inputs/seq_cls"; }
std::string folder(const std::string& family) {
  return testing::reference_dir("seq_cls") + "/" + family;
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) return json();
  return json::parse(in);
}

json reference(const std::string& name) {
  const std::string dir = testing::reference_dir("seq_cls_finetune_" + name);
  return dir.empty() ? json() : read_json(dir + "/reference.json");
}

// `trainer COMMAND` with the reference script's settings and `arguments`.
testing::ProcessResult trainer(const std::string& command, const std::string& arguments) {
  return run("OMP_NUM_THREADS=1 " + testing::kTrainerBin + " " + command +
             " --use_cpu true --per_device_train_batch_size 4 --per_device_eval_batch_size 4"
             " --learning_rate 1e-3 --max_steps 8 --logging_steps 1 --lr_scheduler_type linear"
             " --seed 42 --save_strategy no --report_to none --disable_tqdm true " +
             arguments);
}

// The reference's run of `c` here, into `out`, with its evaluation and predictions.
testing::ProcessResult train(const Case& c, const std::string& model, const std::string& out) {
  return trainer("train", "--model_name_or_path " + model + " --train_file " + inputs() +
                              "/train.csv --validation_file " + inputs() +
                              "/eval.csv --do_eval true --do_predict true --output_dir " + out +
                              " " + c.extra);
}

// The largest relative difference of `ours` to `theirs`, each within `tolerance`.
double expect_close(const std::vector<double>& ours, const json& theirs, double tolerance,
                    const std::string& what) {
  EXPECT_EQ(ours.size(), theirs.size()) << what;
  double largest = 0;
  for (size_t i = 0; i < std::min(ours.size(), theirs.size()); ++i) {
    const double want = theirs[i].get<double>();
    EXPECT_NEAR(ours[i], want, tolerance * std::abs(want) + 1e-7) << what << " " << i + 1;
    largest = std::max(largest, std::abs(ours[i] - want) / std::abs(want));
  }
  return largest;
}

// The float32 values of a 1-D or 2-D C-order .npy file as `trainer predict` writes it.
std::vector<double> npy_values(const std::string& path, const std::string& descr) {
  const std::string bytes = testing::slurp(path);
  if (bytes.size() < 10) return {};
  const size_t header = 10 + static_cast<uint8_t>(bytes[8]) + 256 * static_cast<uint8_t>(bytes[9]);
  EXPECT_NE(bytes.find("'descr': '" + descr + "'"), std::string::npos) << path;
  std::vector<double> values;
  for (size_t at = header; at + 4 <= bytes.size() && descr == "<f4"; at += 4) {
    float v;
    std::memcpy(&v, bytes.data() + at, 4);
    values.push_back(v);
  }
  for (size_t at = header; at + 8 <= bytes.size() && descr == "<i8"; at += 8) {
    int64_t v;
    std::memcpy(&v, bytes.data() + at, 8);
    values.push_back(static_cast<double>(v));
  }
  return values;
}

// The reference's eval logits, row by row.
json flat_logits(const json& ref) {
  json flat = json::array();
  for (const auto& row : ref["eval_logits"]) {
    for (const auto& v : row) flat.push_back(v);
  }
  return flat;
}

// Each step's loss, gradient norm and learning rate against Transformers'; returns the largest
// relative difference of the losses and of the norms.
std::pair<double, double> expect_steps(const json& state, const json& ref,
                                       const std::string& what) {
  std::vector<double> losses, norms, rates;
  for (const auto& e : state["log_history"]) {
    if (!e.contains("loss")) continue;
    losses.push_back(e["loss"].get<double>());
    norms.push_back(e["grad_norm"].get<double>());
    rates.push_back(e["learning_rate"].get<double>());
  }
  expect_close(rates, ref["learning_rates"], 1e-9, what + " learning_rate");
  return {expect_close(losses, ref["losses"], 1e-5, what + " loss"),
          expect_close(norms, ref["grad_norms"], 1e-5, what + " grad_norm")};
}

// The trained tensors' sums and sums of squares (relative 1e-5; a sum 1e-4 of its tensor's scale),
// named as the reference's file names them.
void expect_parameters(const std::string& file, const json& ref, const std::string& what) {
  const io::NamedTensors tensors = io::load_safetensors(file);
  ASSERT_EQ(tensors.size(), ref["parameters"].size()) << what;
  double largest = 0;
  for (const auto& [name, tensor] : tensors) {
    ASSERT_TRUE(ref["parameters"].contains(name)) << what << ": " << name;
    const json& want = ref["parameters"][name];
    const torch::Tensor t = tensor.to(torch::kDouble);
    const double sum = t.sum().item<double>(), squares = t.pow(2).sum().item<double>();
    // A sum cancels: its tolerance is relative to the tensor's scale (sqrt(n sum x^2) >= sum |x|),
    // 1e-4 of it: GPT-2's key bias has no gradient but rounding noise, which AdamW's steps follow.
    const double scale = std::sqrt(static_cast<double>(t.numel()) * want[1].get<double>());
    EXPECT_NEAR(sum, want[0].get<double>(), 1e-4 * scale) << what << ", " << name;
    EXPECT_NEAR(squares, want[1].get<double>(), 1e-5 * std::abs(want[1].get<double>()) + 1e-7)
        << what << ", " << name;
    largest = std::max(largest, std::abs(squares - want[1].get<double>()) / want[1].get<double>());
  }
  std::printf("%s: the weights' sums of squares within %.2e of Transformers'\n", what.c_str(),
              largest);
}

// The evaluation and predictions of a run (or of evaluate/predict into `dir`) equal the
// reference's.
void expect_evaluation(const std::string& dir, const json& ref, const std::string& prefix,
                       const std::string& what) {
  const json results = read_json(dir + "/all_results.json");
  ASSERT_TRUE(results.contains(prefix + "_loss")) << what << ": " << results.dump();
  EXPECT_NEAR(results[prefix + "_loss"].get<double>(), ref["eval_loss"].get<double>(),
              1e-5 * ref["eval_loss"].get<double>())
      << what;
  EXPECT_DOUBLE_EQ(results[prefix + "_accuracy"].get<double>(), ref["eval_accuracy"].get<double>())
      << what;
  if (prefix == "eval") return;
  const std::vector<double> logits = npy_values(dir + "/predictions.npy", "<f4");
  const double largest = expect_close(logits, flat_logits(ref), 1e-5, what + " logit");
  std::printf("%s: eval logits within %.2e of Transformers'\n", what.c_str(), largest);
  const int64_t k = ref["num_labels"].get<int64_t>();
  for (size_t row = 0; row < ref["eval_predictions"].size() && logits.size() >= (row + 1) * k;
       ++row) {
    const auto begin = logits.begin() + static_cast<int64_t>(row) * k;
    EXPECT_EQ(std::max_element(begin, begin + k) - begin,
              ref["eval_predictions"][row].get<int64_t>())
        << what << " row " << row;
  }
  const std::vector<double> labels = npy_values(dir + "/label_ids.npy", "<i8");
  ASSERT_EQ(labels.size(), ref["eval"]["labels"].size()) << what;
  for (size_t i = 0; i < labels.size(); ++i) {
    EXPECT_EQ(labels[i], ref["eval"]["labels"][i].get<double>()) << what;
  }
}

class SeqClsAgainstTransformers : public ::testing::TestWithParam<Case> {};

// run_glue's rows: the tokenizer's ids with truncation at 128, the labels by their names' ids.
TEST_P(SeqClsAgainstTransformers, RowsStepsEvaluationAndWeightsEqualTransformers) {
  const Case& c = GetParam();
  const json ref = reference(c.name);
  ASSERT_FALSE(ref.is_null()) << c.name;
  const auto tokenizer = tokenizers::Tokenizer::load(folder(c.family));
  data::TextClassificationOptions options;
  options.train_file = inputs() + "/train.csv";
  options.validation_file = inputs() + "/eval.csv";
  options.model_label2id = {{"neg", 0}, {"neu", 1}, {"pos", 2}};
  options.model_num_labels = 3;
  const auto rows = data::prepare_text_classification(options, tokenizer);
  EXPECT_EQ(json(rows.train.input_ids), ref["train"]["input_ids"]);
  EXPECT_EQ(json(rows.train.classes), ref["train"]["labels"]);
  EXPECT_EQ(json(rows.eval.input_ids), ref["eval"]["input_ids"]);
  EXPECT_EQ(json(rows.eval.classes), ref["eval"]["labels"]);

  testing::TempDir tmp;
  const std::string out = tmp.file("out");
  const auto r = train(c, folder(c.family), out);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // A classifier's run ends without a language model's sample, and without a warning.
  EXPECT_EQ(r.out.find("Sample"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "");
  const auto [loss, norm] = expect_steps(read_json(out + "/trainer_state.json"), ref, c.name);
  std::printf("%s: largest relative difference to Transformers: loss %.2e, grad_norm %.2e\n",
              c.name.c_str(), loss, norm);
  expect_evaluation(out, ref, "eval", c.name);
  expect_evaluation(out, ref, "test", c.name + " (do_predict)");
  const bool lora = c.name.rfind("lora", 0) == 0;
  expect_parameters(out + (lora ? "/adapter_model.safetensors" : "/model.safetensors"), ref,
                    c.name);
  if (ref.contains("ga_check")) {
    // Transformers' quirk: the step's loss is the SUM of its micro-batches' means.
    const json& check = ref["ga_check"];
    const double first = read_json(out + "/trainer_state.json")["log_history"][0]["loss"];
    EXPECT_NEAR(first, check["sum_of_means"].get<double>(), 1e-5 * first);
    EXPECT_GT(std::abs(first - check["mean_of_means"].get<double>()), 0.5);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, SeqClsAgainstTransformers, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return info.param.name; });

// `trainer evaluate` or `predict` of `model` on the eval file into `out`.
testing::ProcessResult scores(const std::string& command, const std::string& model,
                              const std::string& out, const std::string& file = "") {
  return run("OMP_NUM_THREADS=1 " + testing::kTrainerBin + " " + command +
             " --use_cpu true --per_device_eval_batch_size 4 --report_to none --disable_tqdm true"
             " --model_name_or_path " +
             model + " --validation_file " + (file.empty() ? inputs() + "/eval.csv" : file) +
             " --output_dir " + out);
}

// A Python snippet run with TRAINER_PYTHON: its last line, parsed as JSON.
json python_json(const std::string& code, const std::string& arguments,
                 const testing::TempDir& tmp) {
  std::ofstream(tmp.file("check.py")) << code;
  const auto r =
      run(std::string(TRAINER_PYTHON) + " " + tmp.file("check.py") + " " + arguments + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  const auto lines = testing::lines_of(r.out);
  return lines.empty() || r.exit_code != 0 ? json() : json::parse(lines.back());
}

// A classifier trained here is a folder Transformers reads (its labels named as run_glue names
// them), and `trainer evaluate` and `predict` of it give the run's own numbers, Transformers'.
TEST(SeqClsRun, EvaluateAndPredictOfTheTrainedFolderEqualTransformers) {
  const json ref = reference("llama");
  testing::TempDir tmp;
  auto r = train(kCases[0], folder("llama"), tmp.file("full"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json config = read_json(tmp.file("full/config.json"));
  EXPECT_EQ(config["architectures"], json::array({"LlamaForSequenceClassification"}));
  EXPECT_EQ(config["label2id"], json({{"neg", 0}, {"neu", 1}, {"pos", 2}}));
  EXPECT_EQ(config["id2label"], json({{"0", "neg"}, {"1", "neu"}, {"2", "pos"}}));
  EXPECT_EQ(config["problem_type"], "single_label_classification");
  EXPECT_EQ(config["pad_token_id"], 190);
  const auto python = testing::transformers_classifies(tmp.file("full"));
  EXPECT_EQ(python.exit_code, 0) << python.out;

  r = scores("evaluate", tmp.file("full"), tmp.file("evaluated"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("eval_accuracy"), std::string::npos) << r.out;
  expect_evaluation(tmp.file("evaluated"), ref, "eval", "evaluate");
  EXPECT_EQ(read_json(tmp.file("evaluated/eval_results.json"))["eval_samples"], 12);
  r = scores("predict", tmp.file("full"), tmp.file("predicted"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  expect_evaluation(tmp.file("predicted"), ref, "test", "predict");
}

// PEFT's SEQ_CLS adapter (its own, trained by the reference) evaluates here to PEFT's numbers;
// ours loads in PEFT with the logits we predict, and in our evaluate; its head is named as
// PEFT names it.
TEST(SeqClsRun, PeftSeqClsAdaptersGoBothWays) {
  const json ref = reference("lora_llama");
  testing::TempDir tmp;
  // PEFT's folder, its base named where it lies here.
  const std::string theirs = tmp.file("peft");
  std::filesystem::create_directories(theirs);
  const std::string committed = testing::reference_dir("seq_cls_finetune_lora_llama") + "/adapter";
  std::filesystem::copy_file(committed + "/adapter_model.safetensors",
                             theirs + "/adapter_model.safetensors");
  json adapter = read_json(committed + "/adapter_config.json");
  adapter["base_model_name_or_path"] = folder("llama");
  std::ofstream(theirs + "/adapter_config.json") << adapter.dump(2);
  auto r = scores("predict", theirs, tmp.file("peft_scored"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  expect_evaluation(tmp.file("peft_scored"), ref, "test", "PEFT's adapter");

  r = train(kCases[3], folder("llama"), tmp.file("lora"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json ours = read_json(tmp.file("lora/adapter_config.json"));
  EXPECT_EQ(ours["task_type"], "SEQ_CLS");
  const io::NamedTensors tensors = io::load_safetensors(tmp.file("lora/adapter_model.safetensors"));
  json shapes = json::object();
  for (const auto& [name, t] : tensors) shapes[name] = t.sizes().vec();
  EXPECT_EQ(json::parse(shapes.dump()), json::parse(ref["adapter_tensors"].dump()));
  r = scores("evaluate", tmp.file("lora"), tmp.file("lora_evaluated"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  expect_evaluation(tmp.file("lora_evaluated"), ref, "eval", "our adapter");

  std::ofstream(tmp.file("rows.json")) << ref["eval"]["input_ids"].dump();
  const json logits = python_json(
      "import json, sys, torch\n"
      "from transformers import AutoModelForSequenceClassification as A\n"
      "from peft import PeftModel\n"
      "m = PeftModel.from_pretrained(A.from_pretrained(sys.argv[1], dtype=torch.float32), "
      "sys.argv[2]).eval()\n"
      "with torch.no_grad():\n"
      "    rows = [m(torch.tensor([r])).logits[0].tolist() for r in json.load(open(sys.argv[3]))]\n"
      "print(json.dumps([v for row in rows for v in row]))\n",
      folder("llama") + " " + tmp.file("lora") + " " + tmp.file("rows.json"), tmp);
  const double largest =
      expect_close(npy_values(tmp.file("lora/predictions.npy"), "<f4"), logits, 1e-4, "PEFT");
  std::printf("PEFT's logits of our adapter: largest relative difference %.2e\n", largest);
}

const char kRegression[] =
    "text,label\n"
    "The movie was wonderful.,0.9\n"
    "This soup is cold.,-0.7\n"
    "The train leaves at nine.,0.05\n"
    "What a fantastic concert!,1.2\n"
    "I waited an hour and nobody came.,-1.1\n";

// A reward model's folder (one label) takes a float label column as a regression: its MSE, RMSE
// and MAE are Transformers'; trained, its config says so.
TEST(SeqClsRun, AFloatLabelColumnIsARegression) {
  testing::TempDir tmp;
  std::ofstream(tmp.file("scores.csv")) << kRegression;
  const std::string rm = testing::reference_dir("reward_fixtures") + "/llama_rm";
  auto r = scores("evaluate", rm, tmp.file("evaluated"), tmp.file("scores.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json got = read_json(tmp.file("evaluated/eval_results.json"));
  const json want = python_json(
      "import csv, json, sys, torch\n"
      "from transformers import AutoModelForSequenceClassification as A, AutoTokenizer\n"
      "m = A.from_pretrained(sys.argv[1], dtype=torch.float32).eval()\n"
      "t = AutoTokenizer.from_pretrained(sys.argv[1])\n"
      "rows = list(csv.DictReader(open(sys.argv[2])))\n"
      "with torch.no_grad():\n"
      "    e = [m(**t(r['text'], return_tensors='pt')).logits[0, 0].item() - float(r['label'])"
      " for r in rows]\n"
      "print(json.dumps({'mse': sum(x * x for x in e) / len(e), "
      "'mae': sum(abs(x) for x in e) / len(e)}))\n",
      rm + " " + tmp.file("scores.csv"), tmp);
  ASSERT_TRUE(got.contains("eval_loss")) << got.dump();
  EXPECT_NEAR(got["eval_loss"].get<double>(), want["mse"].get<double>(),
              1e-5 * want["mse"].get<double>());
  EXPECT_NEAR(got["eval_rmse"].get<double>(), std::sqrt(want["mse"].get<double>()), 1e-5);
  EXPECT_NEAR(got["eval_mae"].get<double>(), want["mae"].get<double>(), 1e-5);

  r = trainer("train", "--model_name_or_path " + rm + " --train_file " + tmp.file("scores.csv") +
                           " --output_dir " + tmp.file("trained"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(read_json(tmp.file("trained/config.json"))["problem_type"], "regression");
}

// A classifier with PretrainedConfig's names (LABEL_0, ...): run_glue's sorted labels become its
// ids and its config's names; the run is the reference's, whose ids are the same.
TEST(SeqClsRun, SortedLabelsNameAClassifierWithoutNames) {
  testing::TempDir tmp;
  const std::string plain = tmp.file("plain");
  std::filesystem::create_directories(plain);
  for (const char* name : {"model.safetensors", "tokenizer.json", "tokenizer_config.json"}) {
    std::filesystem::create_symlink(folder("llama") + "/" + name, plain + "/" + name);
  }
  json config = read_json(folder("llama") + "/config.json");
  config["id2label"] = {{"0", "LABEL_0"}, {"1", "LABEL_1"}, {"2", "LABEL_2"}};
  config["label2id"] = {{"LABEL_0", 0}, {"LABEL_1", 1}, {"LABEL_2", 2}};
  std::ofstream(plain + "/config.json") << config.dump(2);
  const auto r = train(kCases[0], plain, tmp.file("out"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  expect_steps(read_json(tmp.file("out/trainer_state.json")), reference("llama"), "plain");
  const json saved = read_json(tmp.file("out/config.json"));
  EXPECT_EQ(saved["label2id"], json({{"neg", 0}, {"neu", 1}, {"pos", 2}}));
  EXPECT_EQ(saved["id2label"], json({{"0", "neg"}, {"1", "neu"}, {"2", "pos"}}));

  // Four classes for its three labels.
  std::ofstream(tmp.file("four.csv")) << "text,label\na b,w\nc d,x\ne f,y\ng h,z\n";
  const auto four = trainer("train", "--model_name_or_path " + plain + " --train_file " +
                                         tmp.file("four.csv") + " --output_dir " + tmp.file("x"));
  EXPECT_EQ(four.exit_code, 2) << four.out << four.err;
  EXPECT_EQ(testing::lines_of(four.err),
            std::vector<std::string>{"trainer: error: " + tmp.file("four.csv") +
                                     " has 4 classes ('w', 'x', 'y', 'z'); the classifier has "
                                     "num_labels 3: give a classifier of 4 labels"});
}

struct BadCase {
  std::string name, csv, extra, words;
};

TEST(SeqClsRun, BadInputIsOneLine) {
  testing::TempDir tmp;
  const std::string f = tmp.file("data.csv");
  const BadCase cases[] = {
      {"no label", "text,y\nhello,pos\n", "", f + " has no 'label' column"},
      {"unknown label", "text,label\nhello,pos\nbye,happy\n", "",
       f + " line 3: the label 'happy' is not a class here (the classifier's labels: 'neg', "
           "'neu', 'pos')"},
      {"empty text", "text,label\n,pos\nhi,neg\n", "",
       f + " line 2: 'text' is an empty text (every row needs its text)"},
      {"no text column", "label\npos\nneg\n", "",
       f + " has no text column (its columns: 'label'): text classification reads the text from "
           "the columns beside 'label' (sentence1 and sentence2, else the first one or two)"},
      {"null label", "text,label\nhello,pos\nbye,\n", "", f + " line 3: the label is empty"},
      {"no validation_file", "text,label\nhello,pos\nbye,neg\n", "--do_eval true",
       "text classification evaluates on validation_file"},
      {"block_size", "text,label\nhello,pos\nbye,neg\n", "--block_size 4096",
       "block_size 4096 is longer than the model's 128 positions"},
  };
  for (const BadCase& c : cases) {
    std::ofstream(f) << c.csv;
    const auto r = trainer("train", "--model_name_or_path " + folder("llama") + " --train_file " +
                                        f + " --output_dir " + tmp.file("out") + " " + c.extra);
    EXPECT_EQ(r.exit_code, 2) << c.name << ": " << r.out << r.err;
    const auto lines = testing::lines_of(r.err);
    ASSERT_EQ(lines.size(), 1u) << c.name << ": " << r.err;
    EXPECT_EQ(lines[0].rfind("trainer: error: ", 0), 0u) << c.name << ": " << lines[0];
    EXPECT_NE(lines[0].find(c.words), std::string::npos) << c.name << ": " << lines[0];
    EXPECT_FALSE(std::filesystem::exists(tmp.file("out"))) << c.name;
  }
}

}  // namespace
}  // namespace trainer::seq_cls_run_test
