// The tutorial's third level in C++: a collator that builds {"x", "labels"}, a Trainer subclass
// whose compute_loss is nll_loss, and train(), run on NUM_PROCESSES processes through
// trainer::launch as the tutorial's notebook_launcher(train_trainer_ddp, num_processes=2).
// Usage: custom_loss [DATASET_DIR] [MAX_TRAIN_SAMPLES] [NUM_PROCESSES (1)] [OUTPUT_DIR]
#include <cstdio>

#include <torch/torch.h>

#include "apps/examples/example_args.h"
#include "lib/data/mnist.h"
#include "lib/accelerate/launch.h"
#include "lib/base/errors.h"
#include "lib/models/models.h"
#include "trainer/trainer.h"

using namespace trainer;

// docs-snippet: trainer
// def collate_fn(examples): stack the images, tensor of the labels.
data::Batch collate_fn(const std::vector<data::Example>& examples) {
  std::vector<torch::Tensor> pixel_values, labels;
  for (const auto& example : examples) {
    pixel_values.push_back(example.input);
    labels.push_back(example.target);
  }
  return data::Batch{{"x", torch::stack(pixel_values)}, {"labels", torch::stack(labels)}};
}

class MyTrainer : public Trainer {
 public:
  using Trainer::Trainer;

  LossOutput compute_loss(models::Model& model, const data::Batch& inputs, bool return_outputs,
                          const torch::Tensor& num_items_in_batch = {}) override {
    torch::Tensor outputs = model.forward(inputs.at("x"));
    torch::Tensor target = inputs.at("labels");
    torch::Tensor loss = torch::nll_loss(outputs, target);
    return {loss, return_outputs ? outputs : torch::Tensor()};
  }
};

void train_trainer_ddp(const std::string& dir, int64_t max_train, const std::string& output_dir) {
  auto train_dset = std::make_shared<data::MnistDataset>(dir, "train", max_train);
  auto test_dset =
      std::make_shared<data::MnistDataset>(dir, "test", max_train < 0 ? -1 : max_train / 2);

  torch::manual_seed(42);
  auto model = std::make_shared<models::BasicNet>();
  auto training_args = TrainingArguments()
                           .output_dir(output_dir)
                           .per_device_train_batch_size(64)
                           .per_device_eval_batch_size(64)
                           .num_train_epochs(1)
                           .eval_strategy("epoch")
                           .remove_unused_columns(false);

  MyTrainer trainer(model, training_args, train_dset, test_dset, collate_fn, compute_accuracy);
  trainer.train();
  trainer.save_state();
}
// docs-snippet-end

int main(int argc, char** argv) {
  try {
    if (argc > 5 || (argc > 1 && std::string(argv[1]).rfind("-", 0) == 0)) {
      std::fputs(
          "usage: custom_loss [DATASET_DIR] [MAX_TRAIN_SAMPLES (-1: all)] "
          "[NUM_PROCESSES (1)] [OUTPUT_DIR (basic-trainer)]\n",
          argc > 1 && std::string(argv[1]) == "--help" ? stdout : stderr);
      return argc > 1 && std::string(argv[1]) == "--help" ? 0 : 2;
    }
    std::string dir = argc > 1 ? argv[1] : data::kFashionMnistDir;
    int64_t max_train = argc > 2 ? examples::sample_count_arg("MAX_TRAIN_SAMPLES", argv[2]) : -1;
    int num_processes = argc > 3
                            ? static_cast<int>(examples::integer_arg(
                                  "NUM_PROCESSES", argv[3], 1, 1024, "an integer from 1 to 1024"))
                            : 1;
    std::string output_dir = argc > 4 ? argv[4] : "basic-trainer";
    launch([&] { train_trainer_ddp(dir, max_train, output_dir); }, num_processes);
    return 0;
  } catch (...) {
    return report_error("custom_loss: ");
  }
}
