// `trainer` on the CSV and TorchScript configs: configs/iris.json and iris_regression.json train to
// stated eval metrics, configs/torchscript_basic_net.json trains a BasicNet scripted by PyTorch
// and writes it back as model.pt and model.safetensors (which `trainer evaluate` reloads), and
// their bad inputs end with one line and exit 2.
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/io/safetensors.h"
#include "lib/models/torchscript.h"
#include "tests/test_util.h"

namespace trainer {
namespace tabular_cli_test {

using nlohmann::json;
using testing::run;
using testing::slurp;
using testing::TempDir;

const std::string kTrainer = testing::kTrainerBin;
const std::string kSource = SOURCE_DIR;

json read_json(const std::string& path) { return json::parse(slurp(path)); }

// Runs `trainer ARGS` from the source tree (the configs name data/iris.csv relative to it).
testing::ProcessResult trainer(const std::string& args) {
  return run("cd " + kSource + " && " + kTrainer + " " + args);
}

void expect_input_error(const std::string& args, const std::string& message) {
  auto result = trainer(args);
  EXPECT_EQ(result.exit_code, 2) << args << "\n" << result.out;
  EXPECT_EQ(result.err, "trainer: error: " + message + "\n") << args;
}

// tests/reference/scripts/script_basicnet.py OUT ARGS, run once per file for the suite.
// `config` without model_name and model_config: a TorchScript run's arguments (the file gives
// the model; a config's model_name beside it would be a warning).
std::string scripted(const std::string& config) {
  static TempDir dir;
  std::string out = dir.file(std::filesystem::path(config).filename().string());
  if (!std::ifstream(out).good()) {
    json args = read_json(kSource + "/" + config);
    args.erase("model_name");
    args.erase("model_config");
    std::ofstream(out) << args.dump();
  }
  return out;
}

std::string script(const std::string& model, int classes = 3, int features = 4) {
  return testing::torchscript_file(model, classes, features);
}

TEST(IrisCli, ClassifiesTheHeldOutSpecies) {
  TempDir dir;
  auto result = trainer("train configs/iris.json --disable_tqdm true --output_dir " + dir.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  json eval = read_json(dir.file("eval_results.json"));
  EXPECT_EQ(eval["eval_samples"], 30);  // round(0.2 * 150), the split of seed 42
  EXPECT_EQ(read_json(dir.file("train_results.json"))["train_samples"], 120);
  // 30 epochs of 8 steps on 120 standardised rows: 28 of the 30 held-out flowers (one
  // versicolor taken for a virginica and one the other way: the two species that overlap).
  EXPECT_NEAR(eval["eval_accuracy"].get<double>(), 28.0 / 30.0, 1e-9);
  EXPECT_LT(eval["eval_loss"].get<double>(), 0.15);
  // The options reach training_args.json as given.
  json args = read_json(dir.file("training_args.json"));
  EXPECT_EQ(args["dataset_config"]["label"], "species");
  EXPECT_EQ(args["model_config"]["hidden_sizes"], json::array({16}));
}

// optim and optim_args through the real program: Adafactor and SGD (Nesterov momentum) train the
// iris MLP (its loss falls by more than a third in 10 epochs), training_args.json names them, and
// optim_args' weight_decay is warned about.
TEST(IrisCli, AdafactorAndSgdTrainAndTheirLossFalls) {
  for (const auto& [optim, optim_args] : std::vector<std::pair<std::string, std::string>>{
           {"adafactor", ""}, {"sgd", "momentum=0.9,nesterov=true,weight_decay=0.5"}}) {
    SCOPED_TRACE(optim);
    TempDir dir;
    auto result = trainer(
        "train configs/iris.json --disable_tqdm true --num_train_epochs 10 "
        "--eval_strategy no --logging_steps 8 --output_dir " +
        dir.path() + " --optim " + optim +
        (optim_args.empty() ? "" : " --optim_args " + optim_args));
    ASSERT_EQ(result.exit_code, 0) << result.err;
    // optim_args' weight_decay is Transformers' too: read, and without effect.
    EXPECT_EQ(result.err,
              optim == "sgd"
                  ? "trainer: warning: optim_args weight_decay=0.5 has no effect: each parameter "
                    "group sets its own (weight_decay 0.0 on weights, 0.0 on biases and norms), "
                    "as in Transformers; set weight_decay instead\n"
                  : "");
    std::vector<double> losses;
    const json state = read_json(dir.file("trainer_state.json"));
    for (const auto& entry : state["log_history"]) {
      if (entry.contains("loss")) losses.push_back(entry["loss"].get<double>());
    }
    ASSERT_EQ(losses.size(), 10u);  // one per epoch of 8 steps
    EXPECT_LT(losses.back(), losses.front() * 2 / 3) << json(losses).dump();
    json args = read_json(dir.file("training_args.json"));
    EXPECT_EQ(args["optim"], optim);
    EXPECT_EQ(args["optim_args"], optim_args.empty() ? json() : json(optim_args));
  }
}

TEST(IrisCli, PredictsPetalWidthFromTheOtherMeasurements) {
  TempDir dir;
  auto result =
      trainer("train configs/iris_regression.json --disable_tqdm true --output_dir " + dir.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  json eval = read_json(dir.file("eval_results.json"));
  EXPECT_EQ(eval["eval_samples"], 30);
  // petal_width's standard deviation is 0.76 cm; the model is within a fifth of that.
  double rmse = eval["eval_rmse"].get<double>();
  EXPECT_LT(rmse, 0.25);
  EXPECT_NEAR(eval["eval_loss"].get<double>(), rmse * rmse, 1e-6);  // MSE
  EXPECT_LT(eval["eval_mae"].get<double>(), rmse);
}

TEST(IrisCli, BadTablesAndOptionsAreOneLine) {
  TempDir dir;
  std::ofstream(dir.file("bad.csv")) << "x,y,label\n1,2,a\n3,abc,b\n";
  std::ofstream(dir.file("short.csv")) << "x,y,label\n1,2,a\n3,b\n";
  const std::string base = "train configs/iris.json --output_dir " + dir.file("out");
  expect_input_error(base + " --dataset_config '{\"path\": \"" + dir.file("bad.csv") + "\"}'",
                     dir.file("bad.csv") + " line 3: column 'y' is 'abc', not a number");
  expect_input_error(base + " --dataset_config '{\"path\": \"" + dir.file("short.csv") + "\"}'",
                     dir.file("short.csv") + " line 3: 2 fields, but the header names 3 columns");
  expect_input_error(base + " --dataset_config '{\"path\": \"data/iris.csv\", \"lable\": \"x\"}'",
                     "dataset_config: unknown option 'lable' for csv (did you mean 'label'? "
                     "known: path, label, features, task, validation_fraction, seed)");
  expect_input_error(base + " --dataset_config '{\"path\": \"data/iris.csv\"}'",
                     "data/iris.csv has no column 'label' (dataset_config label; columns: "
                     "sepal_length, sepal_width, petal_length, petal_width, species)");
  expect_input_error(
      base +
          " --dataset_config '{\"path\": \"data/iris.csv\", \"label\": \"species\", "
          "\"features\": [\"petal_widht\"]}'",
      "data/iris.csv has no column 'petal_widht' (dataset_config features; did you mean "
      "'petal_width'?; columns: sepal_length, sepal_width, petal_length, petal_width, species)");
  expect_input_error(
      base + " --dataset_config '{\"label\": \"species\"}'",
      "dataset_config path is missing: dataset_name csv reads the CSV file it names");
  expect_input_error(
      base + " --dataset_dir data --dataset_config '{\"label\": \"species\"}'",
      "dataset_config path is missing: dataset_name csv reads the CSV file it names");
  // A relative path is found in dataset_dir when that is set.
  expect_input_error(
      base + " --dataset_dir " + dir.path() + " --dataset_config '{\"path\": \"bad.csv\"}'",
      dir.file("bad.csv") + " line 3: column 'y' is 'abc', not a number");
  expect_input_error(base + " --model_name basic_net --model_config {}",
                     "model_name: basic_net takes 1x28x28 images in 10 classes; the data set has "
                     "examples of shape [4] in 3 classes (use mlp or resnet)");
  EXPECT_FALSE(std::ifstream(dir.file("out/training_args.json")).good());
}

TEST(TorchScriptCli, ScriptedBasicNetTrainsAndComesBackAsModelPtAndSafetensors) {
  if (!testing::python_has_torch()) GTEST_SKIP() << "TRAINER_PYTHON cannot import torch";
  TempDir dir;
  testing::write_mnist_dir(dir.file("data"), 64, 32, false);
  const std::string args = "configs/torchscript_basic_net.json --model_name_or_path " +
                           script("basic_net") + " --dataset_dir " + dir.file("data") +
                           " --output_dir " + dir.file("out") +
                           " --max_steps 3 --per_device_train_batch_size 16 --disable_tqdm true";
  auto result = trainer("train " + args);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  // model.pt holds the trained weights, the same as model.safetensors, not the initial ones.
  models::TorchScriptModel trained(dir.file("out/model.pt"));
  models::TorchScriptModel initial(script("basic_net"));
  io::NamedTensors saved = io::load_safetensors(dir.file("out/model.safetensors"));
  ASSERT_EQ(saved.size(), 8u);
  auto params = trained.named_parameters();
  for (const auto& [name, tensor] : saved) {
    EXPECT_TRUE(torch::equal(params[name], tensor)) << name;
  }
  EXPECT_FALSE(torch::equal(params["fc2.weight"], initial.named_parameters()["fc2.weight"]));
  // trainer evaluate rebuilds the model from model_name_or_path and loads the trained weights.
  auto evaluated = trainer("evaluate " + args);
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.err;
  json eval = read_json(dir.file("out/eval_results.json"));
  EXPECT_EQ(eval["eval_samples"], 32);
  double train_eval_loss = read_json(dir.file("out/all_results.json"))["eval_loss"].get<double>();
  EXPECT_NEAR(eval["eval_loss"].get<double>(), train_eval_loss, 1e-6);
}

TEST(TorchScriptCli, ScriptedMlpWithBatchNormLearnsIris) {
  if (!testing::python_has_torch()) GTEST_SKIP() << "TRAINER_PYTHON cannot import torch";
  TempDir dir;
  // The config's model_config is mlp's: this model takes none of it.
  auto result = trainer("train " + scripted("configs/iris.json") + " --model_name_or_path " +
                        script("mlp_bn") + " --disable_tqdm true --output_dir " + dir.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  json eval = read_json(dir.file("eval_results.json"));
  EXPECT_GE(eval["eval_accuracy"].get<double>(), 27.0 / 30.0);
  // The batch-norm statistics trained along: model.safetensors has them under PyTorch's names.
  io::NamedTensors saved = io::load_safetensors(dir.file("model.safetensors"));
  bool found = false;
  for (const auto& [name, tensor] : saved) {
    if (name == "body.1.num_batches_tracked") {
      found = true;
      EXPECT_EQ(tensor.item<int64_t>(), 240);  // 30 epochs x 8 steps
    }
  }
  EXPECT_TRUE(found);
}

// Outputs that do not fit the task are refused before training, saying what was expected and
// what came: 5 scores for iris's 3 classes would train, and predict classes that do not exist.
TEST(TorchScriptCli, OutputsThatDoNotFitTheTaskAreRefusedBeforeTraining) {
  if (!testing::python_has_torch()) GTEST_SKIP() << "TRAINER_PYTHON cannot import torch";
  TempDir dir;
  const std::string five = script("mlp", 5);
  expect_input_error("train " + scripted("configs/iris.json") + " --output_dir " + dir.file("a") +
                         " --model_name_or_path " + five,
                     "model " + five +
                         " gives outputs float32 [2, 5] for a batch of 2 examples; a "
                         "classification model must give floating-point outputs of shape [2, 3] (a "
                         "score for each of the data set's 3 classes)");
  const std::string three = script("mlp", 3, 3);  // iris_regression: 3 features
  expect_input_error("train " + scripted("configs/iris_regression.json") + " --output_dir " +
                         dir.file("b") + " --model_name_or_path " + three,
                     "model " + three +
                         " gives outputs float32 [2, 3] for a batch of 2 examples; a regression "
                         "model must give floating-point outputs of shape [2] or [2, 1] (one value "
                         "per example)");
  EXPECT_FALSE(std::filesystem::exists(dir.file("a")));
}

// A module with its own loss (label-smoothed cross-entropy, 0.1): the Trainer uses it, so the
// eval loss stays above that loss's floor, the entropy of the smoothed target (0.28 nats for 3
// classes), where plain cross-entropy would go below 0.2.
TEST(TorchScriptCli, AModulesOwnLossIsTheOneTrained) {
  if (!testing::python_has_torch()) GTEST_SKIP() << "TRAINER_PYTHON cannot import torch";
  TempDir dir;
  auto result = trainer("train " + scripted("configs/iris.json") + " --model_name_or_path " +
                        script("own_loss") + " --disable_tqdm true --output_dir " + dir.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  json eval = read_json(dir.file("eval_results.json"));
  EXPECT_GT(eval["eval_loss"].get<double>(), 0.28);
  EXPECT_GE(eval["eval_accuracy"].get<double>(), 27.0 / 30.0);
}

// Two processes of 8 rows each take the steps one process of 16 takes: the scripted MLP (no
// dropout, no batch norm) ends with the same weights. 112 rows, 7 full batches: with 120, the 15
// batches of 8 leave the second process's 8th batch a repeat of the first (Accelerate's
// even_batches), where one process's 8th step has 8 rows.
TEST(TorchScriptCli, TwoRanksTrainAsOne) {
  if (!testing::python_has_torch()) GTEST_SKIP() << "TRAINER_PYTHON cannot import torch";
  TempDir dir;
  const std::string args = " train " + scripted("configs/iris.json") + " --model_name_or_path " +
                           script("mlp") +
                           " --disable_tqdm true --num_train_epochs 5 --max_train_samples 112";
  auto one = trainer(args + " --per_device_train_batch_size 16 --output_dir " + dir.file("one"));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  auto two =
      run("cd " + kSource + " && OMP_NUM_THREADS=1 " +
          testing::launch("--nproc-per-node 2 " + kTrainer + args +
                          " --per_device_train_batch_size 8 --output_dir " + dir.file("two")));
  ASSERT_EQ(two.exit_code, 0) << two.err;
  io::NamedTensors a = io::load_safetensors(dir.file("one/model.safetensors"));
  io::NamedTensors b = io::load_safetensors(dir.file("two/model.safetensors"));
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    double rel =
        (a[i].second - b[i].second).norm().item<double>() / a[i].second.norm().item<double>();
    EXPECT_LT(rel, 1e-5) << a[i].first;
  }
}

// A run resumed from its checkpoint-30 ends with the weights, batch-norm statistics included, of
// the run that was never stopped, bit for bit (dropout's random state comes back with it).
TEST(TorchScriptCli, ResumedRunEndsAsTheUninterruptedOne) {
  if (!testing::python_has_torch()) GTEST_SKIP() << "TRAINER_PYTHON cannot import torch";
  TempDir dir;
  const std::string args =
      "train " + scripted("configs/iris.json") + " --model_name_or_path " + script("mlp_bn") +
      " --disable_tqdm true --max_steps 60 --save_strategy steps --save_steps 30 "
      "--eval_strategy no";
  auto full = trainer(args + " --output_dir " + dir.file("full"));
  ASSERT_EQ(full.exit_code, 0) << full.err;
  ASSERT_EQ(run("mkdir " + dir.file("cut") + " && cp -r " + dir.file("full/checkpoint-30") + " " +
                dir.file("cut/"))
                .exit_code,
            0);
  auto resumed =
      trainer(args + " --output_dir " + dir.file("cut") + " --resume_from_checkpoint true");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  io::NamedTensors a = io::load_safetensors(dir.file("full/model.safetensors"));
  io::NamedTensors b = io::load_safetensors(dir.file("cut/model.safetensors"));
  ASSERT_EQ(a.size(), 9u);  // 6 parameters and 3 batch-norm buffers
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_TRUE(torch::equal(a[i].second, b[i].second)) << a[i].first;
  }
}

TEST(TorchScriptCli, BadModulesAreOneLine) {
  if (!testing::python_has_torch()) GTEST_SKIP() << "TRAINER_PYTHON cannot import torch";
  TempDir dir;
  std::ofstream(dir.file("text.pt")) << "not a model\n";
  const std::string base =
      "train " + scripted("configs/iris.json") + " --output_dir " + dir.file("out");
  expect_input_error(base + " --model_name_or_path " + dir.file("missing.pt"),
                     "model_name_or_path " + dir.file("missing.pt") +
                         ": No such file or directory (a TorchScript file written by "
                         "torch.jit.script(model).save(path))");
  auto text = trainer(base + " --model_name_or_path " + dir.file("text.pt"));
  EXPECT_EQ(text.exit_code, 2);
  EXPECT_EQ(text.err.rfind("trainer: error: model_name_or_path " + dir.file("text.pt") +
                               " is not a TorchScript archive",
                           0),
            0u)
      << text.err;
  EXPECT_EQ(std::count(text.err.begin(), text.err.end(), '\n'), 1);
  // BasicNet given iris rows: the module's own error, with the input's shape, before training.
  auto shape = trainer(base + " --model_name_or_path " + script("basic_net"));
  EXPECT_EQ(shape.exit_code, 2);
  EXPECT_EQ(shape.err.rfind("trainer: error: " + script("basic_net") +
                                ": forward failed on x float32 [2, 4]: RuntimeError: ",
                            0),
            0u)
      << shape.err;
  EXPECT_EQ(std::count(shape.err.begin(), shape.err.end(), '\n'), 1);
  expect_input_error(base + " --model_name_or_path " + script("mlp_bn") +
                         " --model_config '{\"output\": \"logits\"}'",
                     "model_config: unknown option 'output' for a TorchScript model (did you mean "
                     "'outputs'? known: outputs)");
  EXPECT_FALSE(std::ifstream(dir.file("out/training_args.json")).good());
  // A config's model_name beside model_name_or_path is not silently ignored: a warning says the
  // file gives the model (here before the error of its 5 outputs).
  auto both = trainer("train configs/iris.json --model_config {} --output_dir " + dir.file("out") +
                      " --model_name_or_path " + script("mlp", 5));
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_EQ(both.err.rfind("trainer: warning: model_name mlp is not used: model_name_or_path " +
                               script("mlp", 5) + " gives the model\ntrainer: error: model ",
                           0),
            0u)
      << both.err;
}

}  // namespace tabular_cli_test
}  // namespace trainer
