// Models defined in Python and trained here: a TorchScript module (torch.jit.script(model).save)
// wrapped as a Model whose parameters and buffers are the module's own tensors, under PyTorch's
// dotted names. The only translation unit that includes torch/script.h.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

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
  // optimizers, .to(device), checkpoints and model.safetensors all see them. `task` picks the
  // default loss (task_loss): classification on logits unless task.log_probs. Throws InputError
  // (one line, naming `path`) for a missing file, a directory, a file that is not a TorchScript
  // archive, a module without a forward method or without parameters.
  explicit TorchScriptModel(const std::string& path, Task task = {});
  ~TorchScriptModel() override;
  using Model::forward;

  // The module's forward(x). Throws InputError naming the file, the input's shape and the error
  // of the module (its last line: the Python exception) when forward fails or returns something
  // other than a tensor; out-of-memory errors pass through as they are.
  torch::Tensor forward(const torch::Tensor& x) override;
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

  const std::string& path() const { return path_; }
  torch::jit::Module& module() { return *module_; }

 private:
  std::unique_ptr<torch::jit::Module> module_;
  std::string path_;
};

// The TorchScript model at `path` (model_name_or_path) for data `info`, with model_config
// options: "outputs", what forward returns: "logits" (the default) or "log_probs" (classification
// only: the loss is then NLL, as for the tutorial's BasicNet). Throws InputError as
// TorchScriptModel does, for an unknown option (naming the nearest) or a bad value.
std::shared_ptr<Model> load_torchscript(const std::string& path,
                                        const nlohmann::ordered_json& config,
                                        const data::DataInfo& info);

}  // namespace trainer::models
