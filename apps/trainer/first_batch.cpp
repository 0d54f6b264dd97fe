// The first-batch probe of a run: two examples through the model before anything is trained or
// written, their outputs checked against the task, and an empty split refused.
#include <algorithm>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <torch/torch.h>

#include "apps/trainer/run_setup.h"
#include "lib/base/errors.h"
#include "lib/base/text.h"
#include "lib/models/gpt.h"
#include "lib/models/hf_causal_lm.h"
#include "lib/models/model.h"

namespace trainer::cli {

namespace {

// The first batch's outputs fit the task: floating point, one row per example, and the shape the
// task's loss and metrics read (a model with 5 logits for 3 classes would train and predict
// classes that do not exist).
void check_model_output(const models::ModelOutput& out, const data::Batch& batch,
                        data::TaskKind task, const data::DataInfo& info, bool evaluated,
                        const TrainingArguments& args) {
  // A batch without labels (DPO's pairs) is shaped by its input_ids.
  const torch::Tensor& labels = !batch.contains("labels") && batch.contains("input_ids")
                                    ? batch.at("input_ids")
                                    : batch.at("labels");
  const int64_t examples = labels.size(0);
  std::string expected;
  bool fits = out.logits.defined() && at::isFloatingType(out.logits.scalar_type()) &&
              out.logits.dim() >= 1 && out.logits.size(0) == examples;
  // A model that scores itself (its own loss) decides the shape of its outputs, unless the task's
  // metrics read them: accuracy always (a class past the data's would be counted), rmse and mae
  // on the evaluation split; a language model's evaluation reads only the loss.
  const bool shape_free =
      out.loss.defined() &&
      (task == data::TaskKind::kCausalLM || (task == data::TaskKind::kRegression && !evaluated));
  if (shape_free && fits) return;
  switch (task) {
    case data::TaskKind::kClassification:
      expected = fmt::format("[{}, {}] (a score for each of the data set's {} classes)", examples,
                             info.num_labels, info.num_labels);
      fits = fits && out.logits.dim() == 2 && out.logits.size(1) == info.num_labels;
      break;
    case data::TaskKind::kRegression:
      expected = fmt::format("[{}] or [{}, 1] (one value per example)", examples, examples);
      fits = fits && out.logits.numel() == (batch.contains("labels") ? labels.numel() : examples);
      break;
    case data::TaskKind::kCausalLM:
      expected = fmt::format("[{}, {}, V] with V >= {} (a score for each token of the vocabulary)",
                             examples, labels.dim() > 1 ? labels.size(1) : 0, info.num_labels);
      fits = fits && out.logits.dim() == 3 && labels.dim() == 2 &&
             out.logits.size(1) == labels.size(1) && out.logits.size(2) >= info.num_labels;
      break;
  }
  if (fits) return;
  const std::string came = out.logits.defined() ? "outputs " + models::tensor_text(out.logits)
                                                : std::string("no outputs");
  throw InputError(fmt::format(
      "model {} gives {} for a batch of {} examples; a {} model must give floating-point outputs "
      "of shape {}",
      model_label(args), came, examples, data::task_name(task), expected));
}

}  // namespace

void check_model_takes(models::Model& model, const data::Dataset& dataset,
                       const data::DataCollator& collator, const std::string& split,
                       data::DataSource& source, const TrainingArguments& args) {
  if (dataset.size() == 0) return;
  torch::NoGradGuard no_grad;
  const bool training = model.is_training();
  model.eval();
  // Two examples where there are two: a model that loses the batch dimension shows it.
  const int64_t count = std::min<int64_t>(2, dataset.size());
  std::optional<data::Batch> batch;
  models::ModelOutput out;
  try {
    if (!collator) batch = dataset.get_batch(torch::arange(count, torch::kLong));
    if (!batch) {
      std::vector<data::Example> examples;
      for (int64_t i = 0; i < count; ++i) examples.push_back(dataset.get(i));
      batch = (collator ? collator : data::DataCollator(data::default_collate))(examples);
    }
    // A language model computes every length alike: its first 16 tokens show the outputs' shape
    // without the whole [tokens, vocabulary] logits (1 GiB for 2 x 1,024 tokens of Llama 3's
    // vocabulary in float32), which would otherwise be the run's peak of memory.
    if (models::find_wrapped<models::HfCausalLM>(model) ||
        models::find_wrapped<models::Gpt>(model)) {
      data::Batch cut;
      for (const auto& [key, t] : batch->items()) cut[key] = t.dim() == 2 ? t.slice(1, 0, 16) : t;
      batch = std::move(cut);
    }
    out = model.forward(*batch);
  } catch (const c10::Error& e) {
    data::Example first = dataset.get(0);
    throw InputError(fmt::format(
        "the {} examples in {} have inputs of shape {}; model {} cannot take them ({})",
        source.split_name(split), source.location(), base::shape_text(first.input.sizes().vec()),
        model_label(args), base::first_line(e.what_without_backtrace())));
  }
  check_model_output(out, *batch, model.task().kind, source.info(), split != "train", args);
  model.train(training);
}

void check_not_empty(const data::Dataset& dataset, const std::string& split,
                     const data::DataSource& source) {
  if (dataset.size() > 0) return;
  throw InputError(
      fmt::format("the {} split in {} holds no examples (evaluation needs at least one)",
                  source.split_name(split), source.location()));
}

}  // namespace trainer::cli
