// Models defined in Python and trained here: a TorchScript module (torch.jit.script(model).save)
// wrapped as a Model whose parameters and buffers are the module's own tensors, under PyTorch's
// dotted names. The only translation unit that includes torch/script.h.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/models/model.h"

namespace torch::jit {
struct Module;
}

namespace trainer::models {

class TorchScriptModel : public Model {
 public:
  // Loads the TorchScript archive at `path` onto the CPU. Its parameters (requires_grad as
  // saved) and buffers are registered, the same tensors, under their dotted names ("conv1.weight",
  // "body.0.bias") through child modules that mirror the module's hierarchy, so named_parameters(),
  // optimizers, .to(device), checkpoints and model.safetensors all see them (a tensor tied under
  // two names, under the first). `task` picks the default loss (task_loss): classification on
  // logits unless task.log_probs. Throws InputError (one line, naming `path`) for a missing file,
  // a directory, a file that is not a TorchScript archive, a module without a forward method or
  // without parameters.
  explicit TorchScriptModel(const std::string& path, Task task = {});
  ~TorchScriptModel() override;

  // The batch's tensors passed to the module's forward by its parameter names, as Transformers
  // passes a batch to a model: forward(self, input_ids, attention_mask=None, labels=None) gets
  // those keys (and num_items_in_batch, when it takes one and the Trainer set it); a parameter
  // the batch lacks must have a default. A forward none of whose parameters the batch names gets
  // "x" alone, whatever it calls it. Outputs: a tensor (the logits); a dict with "logits" and,
  // when it scored the labels itself, "loss"; or a tuple, (loss, logits, ...) when it was given
  // labels, else (logits, ...). Throws InputError for a parameter the batch cannot fill and as
  // forward(x) does.
  ModelOutput forward(const data::Batch& inputs) override;
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
  // With a `batch`, the file lands at its commit.
  void save(const std::string& path, base::WriteBatch* batch = nullptr) const;
  using Model::save;

  const std::string& path() const { return path_; }
  torch::jit::Module& module() { return *module_; }

 private:
  // module_->forward(args, kwargs), with the errors forward(x) describes; `what` names the input.
  c10::IValue call(std::vector<c10::IValue> args,
                   const std::unordered_map<std::string, c10::IValue>& kwargs,
                   const std::string& what);

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
