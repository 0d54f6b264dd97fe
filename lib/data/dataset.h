// The data types every layer shares: an Example (one item, like torchvision's (image, label)),
// a Batch of named tensors (the tutorial's {"x": ..., "labels": ...}), the Dataset interface, the
// collator that turns examples into a Batch, and DataInfo, what a model must fit.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/types.h>

namespace trainer::data {

// What the data asks a model to learn; it picks the default loss and metrics.
enum class TaskKind { kClassification, kRegression, kCausalLM };

// "classification", "regression", "causal_lm".
const char* task_name(TaskKind kind);

// What a model must fit: the task, one example's input shape (without the batch dimension: [1, 28,
// 28] for images, [F] for a table's features, [context] for text) and the number of classes
// (classification), targets (regression) or the vocabulary size (causal_lm).
struct DataInfo {
  TaskKind task = TaskKind::kClassification;
  std::vector<int64_t> input_shape;
  int64_t num_labels = 0;
};

// One item of a dataset: its input and its target, as example[0] and example[1] in Python.
struct Example {
  torch::Tensor input;
  torch::Tensor target;
  // A packed row's position ids, restarting at each sequence in it (TRL's seq_lengths); undefined
  // for other data.
  torch::Tensor positions = {};
  // What a collator of its own reads beside input and target (DPO: a pair's reference
  // log-probabilities); undefined for other data.
  torch::Tensor extra = {};
};

// A batch of named tensors whose first dimension is the batch dimension.
class Batch {
 public:
  Batch() = default;
  Batch(std::initializer_list<std::pair<const std::string, torch::Tensor>> items) : items_(items) {}

  torch::Tensor& operator[](const std::string& name) { return items_[name]; }
  // The tensor called `name`. Throws std::out_of_range naming the key and the keys present.
  const torch::Tensor& at(const std::string& name) const;
  bool contains(const std::string& name) const { return items_.count(name) > 0; }
  // Number of examples: the first dimension of the first tensor (0 for an empty batch).
  int64_t size() const;
  // The same batch with every tensor on `device`.
  Batch to(const torch::Device& device) const;
  const std::map<std::string, torch::Tensor>& items() const { return items_; }
  // The names of its tensors, sorted.
  std::vector<std::string> keys() const;

  // Transformers' num_items_in_batch: the label tokens (labels != -100) of the whole gradient
  // accumulation window, summed over processes, as a 0-dim tensor; set by the Trainer for
  // token-level tasks (causal_lm), undefined otherwise. A model that computes its own loss divides
  // its summed loss by it, so that accumulated micro-batches of unequal length weigh each token
  // once. to() carries it.
  torch::Tensor num_items_in_batch;
  // The caller reads only the loss (Transformers' prediction_loss_only): a model may compute it
  // without its outputs (a language model's chunked loss, never the whole logits). to() carries it.
  bool loss_only = false;
  // A language model's loss as TRL's SFT loss_type "dft" asks for it: each label token's -log p
  // weighted by p (detached), Dynamic Fine-Tuning; false: the cross-entropy. to() carries it.
  bool dft_loss = false;
  // Transformers' LabelSmoother's epsilon (label_smoothing_factor): each label token's loss is
  // -(1 - epsilon) log p(label) - epsilon * mean over the vocabulary (or classes) of log p; 0:
  // the cross-entropy. Set by the Trainer; to() carries it.
  double label_smoothing = 0.0;
  // The model also returns the statistics TRL logs of its label tokens (ModelOutput::token_stats).
  // to() carries it.
  bool token_stats = false;
  // The model returns each label token's scores instead of logits or a loss
  // (ModelOutput::token_scores), log sum p^2 among them with token_sum_sq. to() carries them.
  bool token_scores = false;
  bool token_sum_sq = false;
  // The temperature token scores are taken at (the logits divided by it; TRL's GRPO).
  double score_temperature = 1.0;
  // A mixture of experts also returns its routers' load-balancing loss (ModelOutput::aux_loss) and
  // leaves it out of the loss, for TRL's trainers to weigh (without it, the model adds it times
  // router_aux_loss_coef when its config's output_router_logits is on, as Transformers' does).
  // to() carries it.
  bool router_aux_loss = false;

 private:
  std::map<std::string, torch::Tensor> items_;
};

// Turns a list of examples into a Batch, as Transformers' data_collator does.
using DataCollator = std::function<Batch(const std::vector<Example>&)>;

// The default collator: stacks the inputs as "x" and the targets as "labels".
Batch default_collate(const std::vector<Example>& examples);

// A map-style dataset.
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // The example at `index` (0 <= index < size()).
  virtual Example get(int64_t index) const = 0;
  // The default-collated batch for `indices` (int64, 1-D) in one gather, for datasets held as
  // tensors; std::nullopt where the dataset has no such fast path. It must equal
  // default_collate() of the examples one by one.
  virtual std::optional<Batch> get_batch(const torch::Tensor& indices) const {
    return std::nullopt;
  }
  // Where the examples live: get_batch() takes indices on this device and returns batches there.
  virtual torch::Device device() const { return torch::kCPU; }
  // The same examples held on `device`, for gathering and normalising there without a host copy
  // per batch; nullptr where this dataset has no such copy or it would take more than
  // `max_bytes`.
  virtual std::shared_ptr<const Dataset> to_device(const torch::Device& device,
                                                   int64_t max_bytes) const {
    return nullptr;
  }
};

}  // namespace trainer::data
