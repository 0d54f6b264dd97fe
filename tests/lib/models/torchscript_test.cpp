// TorchScript models scripted by PyTorch in the reference environment: PyTorch's names on the
// module's own tensors, buffers and training mode, saving back (read again here and by PyTorch),
// one-line errors for bad files and failing forwards, and the scripted BasicNet training as the
// built-in one (unfused) does from the same weights: the same loss curve.
#include "lib/models/torchscript.h"

#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "lib/data/mnist.h"
#include "lib/io/safetensors.h"
#include "lib/models/models.h"
#include "tests/test_util.h"
#include "trainer/trainer.h"

namespace trainer::models {
namespace torchscript_test {

using testing::run;
using testing::TempDir;

const Task kLogProbs{data::TaskKind::kClassification, /*log_probs=*/true};

#define SKIP_WITHOUT_TORCH()                           \
  if (!testing::python_has_torch())                    \
  GTEST_SKIP() << "TRAINER_PYTHON (" << TRAINER_PYTHON \
               << ") cannot import torch: the TorchScript files are written by PyTorch"

// The TorchScript file tests/reference/scripts/script_basicnet.py writes for `model` (4 features,
// 3 classes).
std::string script(const std::string& model) { return testing::torchscript_file(model); }

TEST(TorchScript, ScriptedBasicNetHasPyTorchNamesOnTheModulesOwnTensors) {
  SKIP_WITHOUT_TORCH();
  TorchScriptModel model(script("basic_net"), kLogProbs);
  BasicNet builtin(/*fused=*/false);
  auto mine = model.named_parameters(), theirs = builtin.named_parameters();
  ASSERT_EQ(mine.size(), theirs.size());
  for (size_t i = 0; i < mine.size(); ++i) {
    EXPECT_EQ(mine[i].key(), theirs[i].key());
    EXPECT_EQ(mine[i].value().sizes(), theirs[i].value().sizes());
    EXPECT_TRUE(mine[i].value().requires_grad());
  }
  EXPECT_EQ(num_trainable_parameters(model), 1199882);
  // The same tensors as the script module's: a change through one is seen by the other.
  torch::Tensor bias = model.named_parameters()["fc2.bias"];
  {
    torch::NoGradGuard no_grad;
    bias.fill_(0.25);
  }
  EXPECT_EQ(model.module().attr("fc2").toModule().attr("bias").toTensor()[3].item<float>(), 0.25f);
  // Forward in eval mode equals the built-in BasicNet's with the same weights.
  io::load_state_dict(builtin, io::state_dict(model), "scripted");
  model.eval();
  builtin.eval();
  torch::manual_seed(1);
  torch::Tensor x = torch::randn({3, 1, 28, 28});
  torch::Tensor y = model.forward(x);
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{3, 10}));
  EXPECT_TRUE(torch::allclose(y, builtin.forward(x), 1e-5, 1e-6));
  EXPECT_NEAR(y.exp().sum(1)[0].item<float>(), 1.0f, 1e-5);  // log-probabilities
}

TEST(TorchScript, BuffersTrainingModeAndDtypeFollowTheWrapper) {
  SKIP_WITHOUT_TORCH();
  TorchScriptModel model(script("mlp_bn"));
  std::vector<std::string> names;
  for (const auto& item : model.named_parameters()) names.push_back(item.key());
  EXPECT_EQ(names, (std::vector<std::string>{"body.0.weight", "body.0.bias", "body.1.weight",
                                             "body.1.bias", "head.weight", "head.bias"}));
  std::vector<std::string> buffers;
  for (const auto& item : model.named_buffers()) buffers.push_back(item.key());
  EXPECT_EQ(buffers, (std::vector<std::string>{"body.1.running_mean", "body.1.running_var",
                                               "body.1.num_batches_tracked"}));
  // Training mode: batch norm updates its running mean, seen through the wrapper's buffer.
  torch::manual_seed(2);
  torch::Tensor x = torch::randn({8, 4});
  model.train();
  EXPECT_TRUE(model.module().is_training());
  torch::Tensor a = model.forward(x);
  EXPECT_EQ(model.named_buffers()["body.1.num_batches_tracked"].item<int64_t>(), 1);
  EXPECT_GT(model.named_buffers()["body.1.running_mean"].abs().sum().item<float>(), 0.0f);
  EXPECT_FALSE(torch::equal(a, model.forward(x)));  // dropout
  // Eval: running statistics, no dropout, the same outputs every time.
  model.eval();
  EXPECT_FALSE(model.module().is_training());
  EXPECT_TRUE(torch::equal(model.forward(x), model.forward(x)));
  EXPECT_EQ(model.named_buffers()["body.1.num_batches_tracked"].item<int64_t>(), 2);
  // .to() moves the module's own tensors: float64 weights take float64 input.
  model.to(torch::kDouble);
  EXPECT_EQ(model.module().attr("head").toModule().attr("weight").toTensor().scalar_type(),
            torch::kDouble);
  EXPECT_EQ(model.named_buffers()["body.1.num_batches_tracked"].scalar_type(), torch::kLong);
  EXPECT_EQ(model.forward(x.to(torch::kDouble)).scalar_type(), torch::kDouble);
  model.to(torch::kCPU, torch::kFloat);
  EXPECT_EQ(model.forward(x).scalar_type(), torch::kFloat);
}

TEST(TorchScript, SavedBackWithTrainedWeightsForUsAndPyTorch) {
  SKIP_WITHOUT_TORCH();
  TempDir dir;
  TorchScriptModel model(script("mlp_bn"));
  {
    torch::NoGradGuard no_grad;
    for (auto& p : model.parameters()) p.add_(0.5);
  }
  model.save(dir.file("trained.pt"));
  TorchScriptModel again(dir.file("trained.pt"));
  auto saved = again.named_parameters();
  for (const auto& item : model.named_parameters()) {
    EXPECT_TRUE(torch::equal(item.value(), saved[item.key()])) << item.key();
  }
  // PyTorch reads it as the same module: its head.bias sums to ours.
  auto result = run(std::string(TRAINER_PYTHON) +
                    " -c 'import torch,sys; m = torch.jit.load(sys.argv[1]); "
                    "print(float(m.head.bias.sum()))' " +
                    dir.file("trained.pt"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NEAR(std::stod(result.out), model.named_parameters()["head.bias"].sum().item<double>(),
              1e-5);
}

TEST(TorchScript, BadFilesAndFailingForwardAreOneLineInputErrors) {
  SKIP_WITHOUT_TORCH();
  TempDir dir;
  EXPECT_EQ(testing::input_error_of([&] { TorchScriptModel m(dir.file("missing.pt")); }),
            "model_name_or_path " + dir.file("missing.pt") +
                ": No such file or directory (a TorchScript file written by "
                "torch.jit.script(model).save(path))");
  EXPECT_EQ(testing::input_error_of([&] { TorchScriptModel m(dir.path()); }),
            "model_name_or_path " + dir.path() + " is a directory, not a TorchScript file");
  testing::run("echo 'not a model' > " + dir.file("text.pt"));
  std::string text = testing::input_error_of([&] { TorchScriptModel m(dir.file("text.pt")); });
  EXPECT_EQ(text, "model_name_or_path " + dir.file("text.pt") +
                      " is not a TorchScript archive: it is not an archive as torch.jit.save "
                      "writes; write one with torch.jit.script(model).save(path)");
  // torch.save of a state dict: a zip archive, but no TorchScript in it.
  auto saved = run(std::string(TRAINER_PYTHON) +
                   " -c 'import torch,sys; torch.save({\"w\": torch.ones(2)}, sys.argv[1])' " +
                   dir.file("state.pt"));
  ASSERT_EQ(saved.exit_code, 0) << saved.err;
  std::string state = testing::input_error_of([&] { TorchScriptModel m(dir.file("state.pt")); });
  EXPECT_EQ(state, "model_name_or_path " + dir.file("state.pt") +
                       " is not a TorchScript archive: it is a torch.save file (a state_dict or a "
                       "pickled module), which only Python can load; write one with "
                       "torch.jit.script(model).save(path)");
  // BasicNet given a table's rows: the module's own error, one line, with the input's shape.
  TorchScriptModel model(script("basic_net"), kLogProbs);
  std::string failed = testing::input_error_of([&] { model.forward(torch::zeros({2, 4})); });
  EXPECT_EQ(failed.rfind(script("basic_net") + ": forward failed on x float32 [2, 4]: ", 0), 0u)
      << failed;
  EXPECT_NE(failed.find("RuntimeError: "), std::string::npos) << failed;
  EXPECT_EQ(failed.find('\n'), std::string::npos);
}

// A module that scores the labels itself, as Transformers' models do: the batch reaches its
// forward(x, labels=None) by name, and its loss is the one returned.
TEST(TorchScript, BatchReachesForwardByNameAndItsOwnLossIsUsed) {
  SKIP_WITHOUT_TORCH();
  TorchScriptModel model(script("own_loss"));
  torch::manual_seed(3);
  torch::Tensor x = torch::randn({6, 4}), labels = torch::tensor({0, 1, 2, 2, 1, 0});
  ModelOutput scored = model.forward(data::Batch{{"x", x}, {"labels", labels}});
  ASSERT_TRUE(scored.loss.defined());
  EXPECT_EQ(scored.logits.sizes(), (std::vector<int64_t>{6, 3}));
  torch::Tensor expected = torch::nn::functional::cross_entropy(
      scored.logits, labels, torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(0.1));
  EXPECT_NEAR(scored.loss.item<double>(), expected.item<double>(), 1e-6);
  // Without labels: logits only, the same ones.
  ModelOutput plain = model.forward(data::Batch{{"x", x}});
  EXPECT_FALSE(plain.loss.defined());
  EXPECT_TRUE(torch::equal(plain.logits, scored.logits));
  // A one-input module takes "x" whatever its parameter is called; a batch without it is an error.
  TorchScriptModel mlp(script("mlp"));
  EXPECT_EQ(mlp.forward(data::Batch{{"x", x}, {"labels", labels}}).logits.sizes(),
            (std::vector<int64_t>{6, 3}));
  EXPECT_EQ(testing::input_error_of([&] {
              mlp.forward(data::Batch{{"input_ids", x}});
            }),
            script("mlp") +
                ": forward's parameters name none of the batch's tensors (input_ids), and it "
                "holds no \"x\" to pass alone (name the parameters after the batch's keys)");
}

// The check: the scripted BasicNet, trained by the Trainer from the built-in BasicNet's
// initial weights, follows the built-in (unfused) BasicNet's loss curve: the same data order, the
// same dropout masks from the same generator, the same AdamW steps.
TEST(TorchScript, ScriptedBasicNetTrainsAsTheBuiltInOneFromTheSameWeights) {
  SKIP_WITHOUT_TORCH();
  TempDir dir;
  torch::manual_seed(5);
  auto data = std::make_shared<data::MnistDataset>(
      torch::randint(0, 256, {96, 28, 28}).to(torch::kUInt8), torch::randint(0, 10, {96}));
  auto args = TrainingArguments()
                  .output_dir(dir.path())
                  .disable_tqdm(true)
                  .per_device_train_batch_size(16)
                  .learning_rate(1e-3)
                  .logging_steps(1)
                  .max_steps(12)
                  .save_strategy("no");
  auto curve = [&](std::shared_ptr<Model> model) {
    Trainer trainer(model, args, data);
    trainer.train();
    std::vector<double> losses;
    for (const auto& log : trainer.state().log_history) {
      if (log.contains("loss")) losses.push_back(log["loss"].get<double>());
    }
    return losses;
  };
  auto scripted = std::make_shared<TorchScriptModel>(script("basic_net"), kLogProbs);
  auto builtin = std::make_shared<BasicNet>(/*fused=*/false);
  auto fused = std::make_shared<BasicNet>(/*fused=*/true);
  io::load_state_dict(*builtin, io::state_dict(*scripted), "scripted");
  io::load_state_dict(*fused, io::state_dict(*scripted), "scripted");
  std::vector<double> a = curve(scripted), b = curve(builtin), c = curve(fused);
  ASSERT_EQ(a.size(), 12u);
  ASSERT_EQ(b.size(), 12u);
  double worst = 0, fused_worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(a[i] - b[i]) / std::abs(b[i]));
    fused_worst = std::max(fused_worst, std::abs(c[i] - b[i]) / std::abs(b[i]));
  }
  std::printf(
      "largest relative loss difference: scripted vs built-in %.3g, fused vs unfused %.3g\n", worst,
      fused_worst);
  // The same aten ops in the same order: equal here to the last bit; float tolerance allowed.
  EXPECT_LT(worst, 1e-6) << "scripted vs built-in BasicNet, largest relative loss difference";
  EXPECT_LT(a.back(), a.front());  // it learned
  // The comparison sees dropout: the fused BasicNet's own masks give another curve.
  EXPECT_GT(fused_worst, 1e-3);
  // And the trained weights agree too.
  auto trained = scripted->named_parameters();
  for (const auto& item : builtin->named_parameters()) {
    double rel = (item.value() - trained[item.key()]).norm().item<double>() /
                 item.value().norm().item<double>();
    EXPECT_LT(rel, 1e-6) << item.key();
  }
}

}  // namespace torchscript_test
}  // namespace trainer::models
