// The Model interface every trainable model implements: forward on a batch of named tensors, the
// task and its default loss (the tasks' losses are here too).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <c10/core/GradMode.h>
#include <torch/nn/module.h>

#include "lib/base/files.h"
#include "lib/base/hf_files.h"
#include "lib/data/dataset.h"
#include "lib/models/checkpoint.h"
#include "lib/models/linear_cross_entropy.h"

namespace trainer::models {

// What a model's forward returns: its outputs and, when it scores the batch's "labels" itself (as
// Transformers' models do when given labels), that loss.
struct ModelOutput {
  torch::Tensor logits;  // logits, log-probabilities or regression values, [B, ...]
  torch::Tensor loss;    // undefined: the Trainer scores logits with Model::loss
  // With Batch::token_stats, a language model's float32 [3], no gradient, over its label tokens
  // (after the shift): the sum of the entropies of their predicted distributions, the count whose
  // label is the argmax (the first index on ties), and their count (TRL's entropy and
  // mean_token_accuracy). Undefined otherwise.
  torch::Tensor token_stats = {};
  // With Batch::token_scores, a causal language model's TokenScores of its label tokens (TRL's
  // fused LM head: DPO's log-probabilities); logits and loss are then undefined.
  TokenScores token_scores = {};
  // A mixture of experts' load-balancing loss over its sparse layers' routers (Transformers'
  // load_balancing_loss_func), float32, when its config's output_router_logits is on or
  // Batch::router_aux_loss asks for it; undefined otherwise.
  torch::Tensor aux_loss = {};
};

// A model's task and the kind of its outputs, which pick its default loss.
struct Task {
  data::TaskKind kind = data::TaskKind::kClassification;
  bool log_probs = false;  // classification outputs are log-probabilities (NLL), not logits
  // Transformers' model_accepts_loss_kwargs for a model whose loss is its own mean (a sequence
  // classifier): the Trainer counts the window's labels as num_items_in_batch, and so neither
  // divides the loss by the accumulation steps nor leaves it unscaled over processes.
  bool loss_kwargs = false;
};

// The task's loss; labels equal to -100 are ignored (classification, causal_lm):
// - classification: cross_entropy on logits, nll_loss on log-probabilities;
// - regression: mse_loss of the outputs (reshaped as the labels) against the labels as float;
// - causal_lm: cross_entropy of outputs[:, :-1] against labels[:, 1:] (the labels are the
//   input_ids, shifted here as Transformers shifts them inside the loss).
// With num_items_in_batch defined (a scalar): the summed loss divided by it, so that micro-batches
// of unequal length weigh each token once; otherwise the mean. `label_smoothing` epsilon (not for
// regression): Transformers' LabelSmoother, each label's loss (1 - epsilon) of its cross-entropy
// and epsilon of the mean over the classes of -log p.
torch::Tensor task_loss(const Task& task, const torch::Tensor& outputs, const torch::Tensor& labels,
                        const torch::Tensor& num_items_in_batch = {}, double label_smoothing = 0.0);

// Called around each of a model's blocks (its repeated layers) in forward: how sharded data
// parallel gathers a block's parameters just before they are used and frees them after.
class BlockHooks {
 public:
  virtual ~BlockHooks() = default;
  virtual void before_block(size_t index) = 0;
  // The block's output, passed on (a hook may register a backward hook on it).
  virtual torch::Tensor after_block(size_t index, torch::Tensor output) = 0;
};

// A block as sharded data parallel sees it: its name in named_parameters() ("model.layers.3"),
// its class as Transformers names it ("LlamaDecoderLayer"), and the module.
struct Block {
  std::string name;
  std::string class_name;
  std::shared_ptr<torch::nn::Module> module;
};

// A trainable module: forward on a batch of named tensors, and the task's loss.
class Model : public torch::nn::Module {
 public:
  // The batch's named tensors ("x", "input_ids", "attention_mask", "labels", ...). Default: the
  // one-tensor forward on "x", no loss.
  virtual ModelOutput forward(const data::Batch& inputs);
  // The forward of a model with one input tensor. Default: throws std::logic_error (a model that
  // reads several inputs overrides the batch forward only).
  virtual torch::Tensor forward(const torch::Tensor& x);
  // The loss the default compute_loss uses when forward returns none: task_loss(task(), ...).
  virtual torch::Tensor loss(const torch::Tensor& outputs, const torch::Tensor& labels,
                             const torch::Tensor& num_items_in_batch = {});
  virtual Task task() const { return task_; }
  void set_task(Task task) { task_ = task; }

  // What save_pretrained writes beside model.safetensors, name -> contents (a Hugging Face
  // model's config.json and generation_config.json, its tokenizer's files): the Trainer writes
  // them into output_dir and every checkpoint, so that each is itself a model folder.
  std::map<std::string, std::string> pretrained_files;

  // Writes the weights a run saves into `dir` and returns the files' names: model.safetensors
  // (shards and their index above max_shard_bytes); a LoRA model its adapter. With a `batch`,
  // they land at its commit.
  virtual std::vector<std::string> save_weights(const std::string& dir, uint64_t max_shard_bytes,
                                                base::WriteBatch* batch = nullptr) const;
  // Loads what save_weights wrote in `dir`: every name with its shape, none missing or extra
  // (InputError naming the file and the tensor otherwise).
  virtual void load_weights(const std::string& dir);
  // The name of the linear layer that gives the outputs ("fc2"), which LoRA's "all-linear" leaves
  // out; "" when there is none.
  virtual std::string output_layer() const { return ""; }
  // The weights' file, as messages name it.
  virtual std::string weights_file() const { return base::hf::kWeights; }

  // The model's repeated blocks in forward order (a transformer's layers), which sharding may
  // wrap one by one; none for a model whose forward has no hooks around its layers.
  virtual std::vector<Block> blocks() { return {}; }
  // Hooks called around each block in forward (null: none); the caller keeps them alive.
  virtual void set_block_hooks(BlockHooks* hooks) { block_hooks_ = hooks; }
  // Whether training computes a language model's loss with linear_cross_entropy (chunks of
  // tokens, never the whole logits; set_chunked_loss); a model without that loss ignores it.
  bool chunked_loss() const { return chunked_loss_; }

 protected:
  // Runs block `index` on x through the hooks: run_block(i, x, [layer, mask](const Tensor& h)
  // {...}). With activation checkpointing on, in training with gradients on, blocks 0, n, 2n, ...
  // (n = every_n_layers) run through checkpoint(): the block then runs again in backward, so it
  // must hold by value what it reads, never a reference to the caller's locals.
  template <typename F>
  torch::Tensor run_block(size_t index, const torch::Tensor& x, F&& block) {
    const bool recompute = checkpoint_every_ > 0 && index % checkpoint_every_ == 0 &&
                           is_training() && c10::GradMode::is_enabled();
    if (!block_hooks_ && !recompute && !detect_overflow_) return block(x);
    if (block_hooks_) block_hooks_->before_block(index);
    torch::Tensor y = recompute ? checkpoint(BlockFunction(std::forward<F>(block)), x) : block(x);
    if (detect_overflow_) check_block_output(index, y);
    return block_hooks_ ? block_hooks_->after_block(index, std::move(y)) : y;
  }
  // Throws std::runtime_error naming block `index` when `y` holds inf or NaN (debug
  // underflow_overflow).
  void check_block_output(size_t index, const torch::Tensor& y) const;

  Task task_;
  BlockHooks* block_hooks_ = nullptr;
  size_t checkpoint_every_ = 0;  // 0: no activation checkpointing
  bool chunked_loss_ = false;
  bool detect_overflow_ = false;

  friend void set_activation_checkpointing(Model& model, int64_t every_n_layers);
  friend void set_chunked_loss(Model& model, bool on);
  friend void set_detect_overflow(Model& model, bool on);
};

// A model around another (PEFT's PeftModel, DDP, FSDP, the Accelerator's): forward, loss and
// task go to the wrapped model unless a wrapper overrides them; unwrap() is the wrapped model,
// one level down. Each wrapper registers the wrapped model under its own name.
class ModelWrapper : public Model {
 public:
  explicit ModelWrapper(std::shared_ptr<Model> wrapped) : wrapped_(std::move(wrapped)) {}

  ModelOutput forward(const data::Batch& inputs) override { return wrapped_->forward(inputs); }
  torch::Tensor forward(const torch::Tensor& x) override { return wrapped_->forward(x); }
  torch::Tensor loss(const torch::Tensor& outputs, const torch::Tensor& labels,
                     const torch::Tensor& num_items_in_batch = {}) override {
    return wrapped_->loss(outputs, labels, num_items_in_batch);
  }
  Task task() const override { return wrapped_->task(); }

  Model& unwrap() const { return *wrapped_; }
  const std::shared_ptr<Model>& unwrap_ptr() const { return wrapped_; }

 protected:
  std::shared_ptr<Model> wrapped_;
};

// The first model going down from `model` through its wrappers (itself first) that is a T, or
// nullptr: the Hugging Face model under a PeftModel under DDP, the gradient synchroniser under
// the Accelerator's wrapper.
template <typename T>
T* find_wrapped(Model& model) {
  for (Model* m = &model;;) {
    if (auto* found = dynamic_cast<T*>(m)) return found;
    auto* wrapper = dynamic_cast<ModelWrapper*>(m);
    if (!wrapper) return nullptr;
    m = &wrapper->unwrap();
  }
}

// Activation checkpointing (Transformers' activation_checkpointing_enable(every_n_layers=n)) on
// the model that has blocks, going down from `model` through its wrappers: blocks 0, n, 2n, ...
// recomputed in backward while training; n = 0 turns it off. Throws InputError naming the model
// when none has blocks (basic_net, mlp, resnet, TorchScript: "does not support activation
// checkpointing").
void set_activation_checkpointing(Model& model, int64_t every_n_layers);
// The chunked loss (linear_cross_entropy) on or off for `model` and every model it wraps.
void set_chunked_loss(Model& model, bool on);
// Transformers' debug underflow_overflow, for `model` and every model it wraps: each block's
// output checked for inf and NaN in forward, the first such block named in a std::runtime_error.
void set_detect_overflow(Model& model, bool on);

// Of `classes` (transformer_layer_cls_to_wrap), the first no block has, said as "X is not a layer
// of this model (its blocks are ...)"; "" when every one names some block's class.
std::string unknown_block_class(const std::vector<Block>& blocks,
                                const std::vector<std::string>& classes);

// "float32 [64, 4]": a tensor's dtype as PyTorch names it, and its shape.
std::string tensor_text(const torch::Tensor& x);

// Number of trainable parameters (requires_grad).
int64_t num_trainable_parameters(const torch::nn::Module& model);

}  // namespace trainer::models
