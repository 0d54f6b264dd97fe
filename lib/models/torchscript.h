// Models defined in Python and trained here: a TorchScript module (torch.jit.script(model).save)
// wrapped as a Model whose parameters and buffers are the module's own tensors, under PyTorch's
// dotted names. The only translation unit that includes torch/script.h.
#pragma once

#include <memory>
#include <string>

#include "lib/models/models.h"

namespace torch::jit {
struct Module;
}

namespace trainer::models {

class TorchScriptModel : public Model {
 public:
  // Loads the TorchScript archive at `path` onto the CPU. Its parameters (requires_grad as
  // saved) and buffers are registered, the same tensors, under their dotted names ("conv1.weight",
  // "body.0.bias") through child modules that mirror the module's hierarchy, so named_parameters(),
  // optimizers, .to(device), checkpoints and model.safetensors all see them. `log_probs`: the
  // module returns log-probabilities (the default loss is NLL) rather than logits
  // (cross-entropy). Throws InputError (one line, naming `path`) for a missing file, a directory,
  // a file that is not a TorchScript archive, a module without a forward method or without
  // parameters.
  explicit TorchScriptModel(const std::string& path, bool log_probs = false);
  ~TorchScriptModel() override;

  // The module's forward(x). Throws InputError naming the file, the input's shape and the error
  // of the module (its last line: the Python exception) when forward fails or returns something
  // other than a tensor; out-of-memory errors pass through as they are.
  torch::Tensor forward(const torch::Tensor& x) override;
  // nll_loss on log-probabilities, else cross_entropy.
  torch::Tensor loss(const torch::Tensor& outputs, const torch::Tensor& labels) override;
  // Sets training mode here and in the TorchScript module (dropout, batch norm follow it).
  void train(bool on = true) override;
  // As PyTorch's Module.to: a dtype applies to floating-point parameters and buffers only (an
  // integer buffer such as num_batches_tracked keeps its type; LibTorch's would convert it).
  void to(torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Device device, torch::Dtype dtype, bool non_blocking = false) override;
  using Model::to;

  // Writes the module with its current weights, on the CPU, as a TorchScript archive at `path`
  // (atomically: a temporary file renamed into place). Python's torch.jit.load reads it back.
  // Throws std::runtime_error naming the path when it cannot be written.
  void save(const std::string& path) const;

  bool log_probs() const { return log_probs_; }
  const std::string& path() const { return path_; }
  torch::jit::Module& module() { return *module_; }

 private:
  std::unique_ptr<torch::jit::Module> module_;
  std::string path_;
  bool log_probs_ = false;
};

}  // namespace trainer::models
