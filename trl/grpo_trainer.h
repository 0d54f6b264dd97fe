// TRL's GRPOTrainer on the Trainer: prompt-only rows repeated num_generations times (TRL's
// RepeatSampler), a generation batch sampled in the process every steps_per_generation x
// num_iterations micro-steps (lib/models/sampling.h: the policy's weights, gathered under ZeRO-3),
// rewarded by reward_funcs (trl/rewards.h), group advantages, then TRL 1.16's clipped policy loss
// of each loss_type (grpo, dr_grpo, dapo, bnpo, cispo, sapo, luspo, vespo) with the reference KL
// when beta > 0, and TRL's metrics and completion logs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/data/registry.h"
#include "lib/io/tensorboard.h"
#include "lib/models/sampling.h"
#include "lib/tokenizers/tokenizer.h"
#include "trainer/trainer.h"
#include "trl/grpo_data.h"
#include "trl/grpo_math.h"
#include "trl/rewards.h"
#include "trl/trl_source.h"
#include "trl/trl_trainer.h"

namespace trainer::trl {

// The prompts of prepare_grpo_dataset: example i is its prompt's ids (int64) as input and i as
// target; record(i) its record for the rewards.
class GrpoDataset : public RowDataset<GrpoRow> {
 public:
  using RowDataset::RowDataset;
  data::Example get(int64_t index) const override;
  nlohmann::ordered_json record(int64_t index) const;
};

// The prompts left-padded with pad_token_id: prompt_ids, prompt_mask [n, longest] (and the same
// as input_ids, attention_mask) and row [n] (each prompt's index in the data set).
data::DataCollator grpo_collator(int64_t pad_token_id);

struct GrpoSourceOptions : TrlSourceOptions {
  GrpoDataOptions data;
};
std::unique_ptr<data::DataSource> make_grpo_source(GrpoSourceOptions options);

// TRL's RepeatSampler: the prompts in chunks of `batch_size` (shuffled by one torch.Generator
// seeded with `seed`, a new torch.randperm each epoch; an incomplete last chunk dropped), each
// chunk handed out `repeat_count` times, each prompt in it `mini_repeat_count` times in a row.
class RepeatSampler : public data::Sampler {
 public:
  RepeatSampler(int64_t size, int64_t mini_repeat_count, int64_t batch_size, int64_t repeat_count,
                bool shuffle, uint64_t seed);
  std::vector<int64_t> indices(int64_t epoch) const override;

 private:
  int64_t size_, mini_repeat_count_, batch_size_, repeat_count_;
  bool shuffle_;
  uint64_t seed_;
};

// What GRPOTrainer needs besides its arguments: the tokenizer (decoding completions), the ids it
// stops at and pads with, whether the prompts are conversations, and the rewards.
struct GrpoSetup {
  std::shared_ptr<const tokenizers::Tokenizer> tokenizer;
  std::vector<int64_t> eos_token_ids;  // the tokenizer's first, then generation_config's
  int64_t pad_token_id = 0;
  bool conversational = false;
  std::optional<double> generation_min_p;  // generation_config.json's, when min_p is null
  std::shared_ptr<RewardFunctions> rewards;
};

// Samples the completions of a generation batch: prompt_ids, prompt_mask [n, P] (left padded) ->
// the new tokens [n, N], each row padded after its EOS. The default samples in the process; a
// test may replay another run's completions.
using CompletionSampler =
    std::function<torch::Tensor(const torch::Tensor& prompt_ids, const torch::Tensor& prompt_mask)>;
// The order a generation batch's n rows are shuffled into before it is cut into micro-batches
// (TRL's shuffle_sequence_dict: torch.randperm(n) from the process's generator by default).
using RowShuffle = std::function<torch::Tensor(int64_t n)>;

class GRPOTrainer : public TrlTrainer {
 public:
  // `ref`: the reference model when beta > 0 and the model has no LoRA adapters (a frozen copy;
  // null with adapters: the model with them off).
  GRPOTrainer(std::shared_ptr<models::Model> model, TrainingArguments args,
              std::shared_ptr<const data::Dataset> train_dataset,
              std::shared_ptr<const data::Dataset> eval_dataset, data::DataCollator collator,
              std::shared_ptr<models::Model> ref, GrpoSetup setup);
  ~GRPOTrainer() override;

  void set_completion_sampler(CompletionSampler sampler) { sampler_ = std::move(sampler); }
  void set_row_shuffle(RowShuffle shuffle) { shuffle_ = std::move(shuffle); }
  const GenerationPlan& generation_plan() const { return plan_; }

  // TRL's _compute_loss on a micro-batch of the buffer (no outputs: GRPO returns none).
  LossOutput compute_loss(models::Model& model, const data::Batch& inputs,
                          bool return_outputs = false,
                          const torch::Tensor& num_items_in_batch = {}) override;
  // TRL's _prepare_inputs (a generation every steps_per_generation x num_iterations micro-steps,
  // its batch cut in steps_per_generation) and the loss, already scaled for accumulation.
  torch::Tensor training_step(models::Model& model, const data::Batch& inputs,
                              const torch::Tensor& num_items_in_batch = {}) override;
  // An evaluation batch: its completions sampled (num_generations_eval a prompt) and scored, and
  // the loss on them, as TRL evaluates.
  PredictionOutput prediction_step(models::Model& model, const data::Batch& inputs,
                                   bool prediction_loss_only) override;

 protected:
  std::shared_ptr<const data::Sampler> make_train_sampler(int64_t batch_size) override;
  int64_t train_loader_batch_size(int64_t batch_size) const override {
    return batch_size * plan_.steps_per_generation;
  }
  std::shared_ptr<const data::Sampler> make_eval_sampler(const data::Dataset& dataset,
                                                         int64_t batch_size) override;
  void save_rank_extras(io::NamedTensors& tensors, io::Metadata& metadata) const override;
  void load_rank_extras(const io::MappedSafetensors& state, const std::string& path) override;
  void add_logged_metrics(nlohmann::ordered_json& logs, const std::string& prefix) override;
  // TRL's loader hands over records, whose floating_point_ops Transformers counts as 0.
  double floating_point_ops(const data::Batch&) override { return 0; }

 protected:
  // What RLOOTrainer changes of a generation: the old policy's and the reference's
  // log-probabilities it keeps (GRPO: old_per_token_logps when the old policy differs,
  // ref_per_token_logps with beta > 0), and the advantages of every process's rewards (GRPO: the
  // group advantages of scale_rewards and multi_objective_aggregation).
  virtual void add_old_and_reference(data::Batch& out, bool training);
  virtual grpo::Advantages compute_advantages(const torch::Tensor& rewards_per_func, bool training);
  // The old policy's per-token log-probabilities of a generation's completions (when `old`) and
  // the reference's (beta != 0: the frozen copy, or the policy with its adapters off), [n, T]
  // each, without gradients; undefined where not asked for.
  std::pair<torch::Tensor, torch::Tensor> old_and_reference_logps(const data::Batch& out,
                                                                  bool training, bool old);
  // num_generations_eval, else num_generations.
  int64_t eval_generations() const {
    return args().num_generations_eval().value_or(args().num_generations());
  }
  // Per-token log-probabilities (and entropies) of the completions at `temperature`, in chunks of
  // `chunk` rows (0: all at once): [n, T] each.
  std::pair<torch::Tensor, torch::Tensor> token_logps(models::Model& model,
                                                      const data::Batch& batch, int64_t chunk);
  const GenerationPlan& plan() const { return plan_; }

 private:
  // A generation's completions: each cut after its first EOS (kept), padded.
  struct Generated {
    torch::Tensor completion_ids, completion_mask;  // [n, T]
    std::vector<std::vector<int64_t>> ids;          // each completion's kept tokens
    std::vector<int64_t> lengths, truncated;        // its length; 1: no EOS (TRL's truncated)
    std::vector<std::string> texts;                 // decoded without special tokens
  };
  class TimingsReport;
  // TRL's _generate_and_score_completions on this process's rows of a generation batch;
  // `training`: a training generation (else an evaluation's: its rows, num_generations_eval, the
  // eval metrics). Its steps follow (trl/grpo_generation.cpp).
  data::Batch generate_and_score(const data::Batch& prompts, bool training);
  Generated cut_completions(torch::Tensor tokens) const;
  // completions/* and num_tokens over every process.
  void record_length_metrics(const torch::Tensor& prompt_mask, const Generated& g, bool training);
  void record_reward_metrics(const torch::Tensor& rewards_per_func,
                             const grpo::Advantages& advantages, bool training);
  // log_completions' rows of this process's completions.
  void keep_completion_rows(const data::Batch& prompts, const Generated& g, const GrpoDataset& data,
                            const torch::Tensor& rewards_per_func, const torch::Tensor& advantages);
  // compute_loss's pieces (trl/grpo_loss.cpp): the arguments as grpo::LossSettings, the tokens of
  // the top entropy quantile over every process, TRL's metrics of the micro-step.
  grpo::LossSettings loss_settings() const;
  torch::Tensor high_entropy_mask(const torch::Tensor& entropies, const torch::Tensor& mask);
  void record_loss_metrics(const grpo::PerTokenLoss& loss, const torch::Tensor& entropies,
                           const torch::Tensor& advantages, const torch::Tensor& mask,
                           const grpo::LossSettings& s, bool training);
  // The sampling settings of the arguments (generation_kwargs over GRPOConfig's keys, the model's
  // min_p where min_p is null), read once for a model of `vocab_size` tokens: InputError for a
  // generation_kwargs key not built or a value Transformers refuses.
  models::SamplingSettings sampling_settings(int64_t vocab_size) const;
  // Samples the completions (the default sampler).
  torch::Tensor sample(const torch::Tensor& prompt_ids, const torch::Tensor& prompt_mask);
  // The rewards [n, F] of this process's completions (NaN for None), failures agreed on by
  // every process.
  torch::Tensor score_rewards(const data::Batch& prompts, const Generated& generated,
                              const GrpoDataset& rows);
  // The completion table of log_completions, written and printed at each log.
  void log_completions_table(int64_t step);
  void log_completions_tensorboard(int64_t step);
  // The reference's parameters moved toward the policy's (sync_ref_model).
  void sync_reference();

  GrpoSetup setup_;
  GenerationPlan plan_;
  models::SamplingSettings sampling_;
  std::shared_ptr<const GrpoDataset> train_rows_, eval_rows_;
  CompletionSampler sampler_;
  RowShuffle shuffle_;
  int64_t step_ = 0;  // TRL's _step: micro-steps of this run
  std::vector<data::Batch> buffer_;
  int64_t last_synced_step_ = 0;
  double step_seconds_ = 0;  // this optimizer step's time so far
  // Where this process's training time went (printed at the end of training): sampling, the
  // rewards, the old policy's and the reference's log-probabilities, and the update's forward and
  // backward.
  struct Timings {
    double sampling = 0, rewards = 0, scoring = 0, update = 0;
  };
  std::shared_ptr<Timings> timings_ = std::make_shared<Timings>();
  // log_completions' rows since the last log: prompt, completion, each reward, advantage.
  nlohmann::ordered_json completion_rows_ = nlohmann::ordered_json::array();
  // The completion tables' event file, beside the TensorBoard callback's (report_to tensorboard).
  std::unique_ptr<io::EventFileWriter> completions_writer_;
};

}  // namespace trainer::trl
