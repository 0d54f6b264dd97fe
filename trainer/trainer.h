// The Trainer: Transformers' Trainer in C++. train() runs the loop (the optimizer optim names with
// weight-decay grouping, learning-rate schedule, gradient accumulation and clipping, logging,
// evaluation, callbacks); evaluate() scores the eval dataset. All distribution goes through an
// Accelerator built from the arguments, so the same program trains on one process or on N started
// by `trainer launch`, torchrun or trainer::launch. A subclass overrides one step without copying
// the loop, as in Transformers: compute_loss (the tutorial's MyTrainer), training_step,
// prediction_step, create_optimizer, create_scheduler.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/types.h>

#include "lib/accelerate/accelerator.h"
#include "lib/base/stopwatch.h"
#include "lib/data/dataloader.h"
#include "lib/data/dataset.h"
#include "lib/io/safetensors.h"
#include "lib/models/model.h"
#include "lib/optim/lr_scheduler.h"
#include "lib/optim/optimizers.h"
#include "lib/report/curve.h"
#include "trainer/checkpoint_manifest.h"
#include "trainer/memory_tracker.h"
#include "trainer/metrics.h"
#include "trainer/trainer_results.h"
#include "trainer/trainer_state.h"
#include "trainer/training_args.h"

namespace trainer {

// The Accelerator the arguments ask for: use_cpu, bf16 / fp16, ddp_backend, ddp_timeout, the
// DDP options and data_on_device. Accumulation stays with the Trainer, which counts micro-batches
// itself (as Transformers does), so the Accelerator's gradient_accumulation_steps is 1.
AcceleratorOptions accelerator_options(const TrainingArguments& args);
// What optim, optim_args and the Adam arguments ask make_optimizer for (optimizer_plan()'s
// checks: throws InputError as it does).
optim::OptimizerChoice optimizer_choice(const TrainingArguments& args);

// auto_find_batch_size on `num_processes` processes: InputError for more than one (a process
// that runs out of memory would halve its batch and start again while the others wait for it in
// a collective), or for a TRAINER_MAX_ALLOCATION_BYTES that is not a byte count. Trainer::train
// checks it too; the trainer program before output_dir is touched.
void check_auto_find_batch_size(const TrainingArguments& args, int64_t num_processes);

class Trainer {
 public:
  // `model` is trained in place. Validates `args` (InputError on a bad value), seeds LibTorch
  // with args.seed(), builds the Accelerator (joining the process group when the environment
  // names several processes) and moves the model to its device; sets TF32 as args.tf32() says
  // (InputError for tf32 true without a CUDA device). `data_collator` defaults to
  // data::default_collate; `compute_metrics` to none (evaluation then reports the loss only).
  Trainer(std::shared_ptr<models::Model> model, TrainingArguments args,
          std::shared_ptr<const data::Dataset> train_dataset,
          std::shared_ptr<const data::Dataset> eval_dataset = nullptr,
          data::DataCollator data_collator = nullptr, ComputeMetrics compute_metrics = nullptr,
          std::vector<std::shared_ptr<TrainerCallback>> callbacks = {});
  virtual ~Trainer() = default;
  Trainer(const Trainer&) = delete;  // its state refers back to it
  Trainer& operator=(const Trainer&) = delete;

  // Trains for args.max_steps() or args.num_train_epochs(), printing the banner, the progress,
  // the logs and the table (main process only). Each process trains on its share of every
  // batch of per_device_train_batch_size x processes; the logged loss is the mean over
  // processes. Saves checkpoint-<step> folders as save_strategy says (and at the step boundary
  // after SIGINT / SIGTERM, then throws Interrupted). Returns the step count, mean loss and speed
  // metrics.
  //
  // With auto_find_batch_size (one process only: InputError otherwise), running out of memory
  // in training (runtime::is_out_of_memory; on the CPU a runtime::AllocationCheck makes it an
  // exception) halves the batch size and starts the loop again, as Transformers does under
  // Accelerate's find_executable_batch_size: a warning names both sizes; state, data loader,
  // schedule and callbacks' begin start afresh; the model keeps the weights it has then and the
  // optimizer its state (Transformers keeps its optimizer), gradients freed. At batch size 0 it
  // throws std::runtime_error "No executable batch size found, reached zero. ...". An evaluation
  // that runs out of memory meanwhile is not retried (std::runtime_error naming
  // per_device_eval_batch_size). train_batch_size() is the size that trained.
  //
  // With skip_memory_metrics false, the metrics (and the last log) end with the memory the
  // Trainer's construction and this call took (TrainerMemoryTracker, memory_tracker.h).
  //
  // `resume_from_checkpoint` (default: args.resume_from_checkpoint(); after a restart by the
  // launcher, TORCHELASTIC_RESTART_COUNT > 0, "true" when neither is set): a checkpoint folder,
  // or "true" for the newest good one in output_dir. The run continues where the checkpoint
  // left off, the skipped batches not read again, and ends as the run that was never stopped.
  TrainOutput train(const std::optional<std::string>& resume_from_checkpoint = std::nullopt);

  // Saves output_dir/checkpoint-<global_step> atomically (every process takes part; each writes
  // its own random state and data position). Returns its path. Throws std::runtime_error when
  // the weights are not finite (nothing is saved then).
  std::string save_checkpoint();

  // Evaluates on the eval dataset, each process its share, the results gathered without the
  // repeats that even out the processes (the same numbers on any number of processes):
  // "<prefix>_loss", the compute_metrics results with the prefix, runtime and speed, and
  // "epoch" while training. Logged and passed to on_evaluate; then, with skip_memory_metrics
  // false and outside train(), eval_mem_* (and init's, when first) are added to the result.
  Metrics evaluate(const std::string& metric_key_prefix = "eval");
  // Transformers' Trainer.predict: the outputs on `dataset` (all of it, in order, on any number
  // of processes), its labels, and the metrics under `metric_key_prefix` (loss and compute_metrics
  // when there are labels; runtime and speed; test_mem_* with skip_memory_metrics false). Nothing
  // is logged.
  PredictionResult predict(const std::shared_ptr<const data::Dataset>& dataset,
                           const std::string& metric_key_prefix = "test");

  // The loss of one batch (and the outputs when return_outputs), as Transformers computes it: the
  // loss the model's forward returns (a model given "labels" may score them itself), otherwise
  // model.loss(outputs, inputs["labels"]) (the task's loss). `num_items_in_batch` (a scalar, for
  // token-level tasks: the label tokens of the accumulation window over every process) makes the
  // loss a sum divided by it; it is also in inputs.num_items_in_batch for the model. Override it
  // for a custom loss.
  virtual LossOutput compute_loss(models::Model& model, const data::Batch& inputs,
                                  bool return_outputs = false,
                                  const torch::Tensor& num_items_in_batch = {});
  // One micro-batch of training: compute_loss, backpropagated through the Accelerator. Without
  // num_items_in_batch the loss is divided by the micro-batches in this accumulation window; with
  // it (causal_lm) the loss is already a share of the window's token mean, and is multiplied by the
  // number of processes, whose gradients DDP averages. Returns that scaled loss, detached, still
  // on the device (the loop reads it back only when logging).
  virtual torch::Tensor training_step(models::Model& model, const data::Batch& inputs,
                                      const torch::Tensor& num_items_in_batch = {});
  // One evaluation batch without gradients, through compute_loss(return_outputs = true).
  virtual PredictionOutput prediction_step(models::Model& model, const data::Batch& inputs,
                                           bool prediction_loss_only);
  // The optimizer optim and optim_args name (optim::make_optimizer: AdamW, fused on CPU, by
  // default) over the model's trainable parameters with Transformers' grouping: no weight decay
  // on biases and norms. Warns (main process) that optim_args' weight_decay has no effect, as in
  // Transformers. Sets optimizer() and returns it. Throws InputError for bad optim/optim_args.
  virtual std::shared_ptr<torch::optim::Optimizer> create_optimizer();
  // lr_scheduler_type with lr_scheduler_kwargs and warmup over num_training_steps (a LambdaLR,
  // or for reduce_lr_on_plateau a ReduceLROnPlateau stepped after each evaluation in training).
  // Sets lr_scheduler() and returns it. Throws InputError for kwargs that do not fit the run.
  virtual std::shared_ptr<optim::LRScheduler> create_scheduler(int64_t num_training_steps,
                                                               torch::optim::Optimizer& optimizer);

  // Writes model.safetensors (PyTorch's parameter names) to `dir` (default: output_dir), and for
  // a TorchScript model model.pt too (the module with the trained weights). Only the main
  // process writes; with a sharded model every process calls it (the weights are gathered there
  // for it), otherwise the others return at once. With a `batch`, the files land at its commit.
  void save_model(const std::string& dir = "", base::WriteBatch* batch = nullptr) const;
  // With overwrite_output_dir, the checkpoints of the earlier run wait in
  // output_dir/earlier-checkpoints (kEarlierCheckpointsDir) while this run trains; call this once
  // the run's own results are saved to remove them. Main process only; others return at once.
  void remove_earlier_checkpoints() const;
  // Writes trainer_state.json to output_dir (main process only), into `batch` when given.
  void save_state(base::WriteBatch* batch = nullptr) const;
  // Each optimization step's loss (the mean over processes), learning rate and gradient norm so
  // far, as read back at the last log, save or the end of training (report::StepCurve).
  const report::StepCurve& step_curve() const { return step_curve_; }
  // Prints "***** <split> metrics *****" and the metrics, as Transformers' log_metrics (main
  // process only).
  void log_metrics(const std::string& split, const Metrics& metrics) const;
  // Writes <split>_results.json and merges the metrics into all_results.json in output_dir
  // (main process only). After train(), all_results.json holds only this Trainer's metrics; a
  // Trainer that has not trained merges into the all_results.json it finds (evaluating a
  // trained run adds eval to its train metrics). Into `batch` when given.
  void save_metrics(const std::string& split, const Metrics& metrics,
                    base::WriteBatch* batch = nullptr) const;

  void add_callback(std::shared_ptr<TrainerCallback> callback);
  const TrainingArguments& args() const { return args_; }
  const TrainerState& state() const { return state_; }
  models::Model& model() { return *model_; }
  const torch::Device& device() const { return accelerator_->device(); }
  Accelerator& accelerator() { return *accelerator_; }
  // The optimizer and schedule of the current or last train() (null before).
  std::shared_ptr<torch::optim::Optimizer> optimizer() const { return optimizer_; }
  std::shared_ptr<optim::LRScheduler> lr_scheduler() const { return lr_scheduler_; }
  // The result of the last evaluation and the step it ran at (-1: none yet).
  const Metrics& last_eval_metrics() const { return last_eval_metrics_; }
  int64_t last_eval_step() const { return last_eval_step_; }
  // The per-device batch size the current or last train() trains with: per_device_train_batch_size
  // unless auto_find_batch_size halved it (or a resumed checkpoint's, with auto_find_batch_size).
  int64_t train_batch_size() const { return train_batch_size_; }
  // Steps of the current or last train() that replayed a CUDA graph (cuda_graphs; 0 otherwise).
  int64_t cuda_graph_replays() const { return cuda_graph_replays_; }

 protected:
  // Metrics a subclass adds to a log before it is recorded (TRL's trainers: their per-batch
  // metrics averaged since the last log): `prefix` "" for a training log (each step's and the
  // last one's), or an evaluation's prefix ("eval"), whose result gets them too. Called on every
  // process.
  virtual void add_logged_metrics(nlohmann::ordered_json& logs, const std::string& prefix) {}
  // Transformers' floating_point_ops of a micro-batch the loader handed over: a Hugging Face
  // model's 6 x its non-embedding parameters x the batch's input_ids (0 for other models and
  // batches without input_ids, as Transformers counts them). GRPO's prompts count nothing, as in
  // TRL (its loader hands over records).
  virtual double floating_point_ops(const data::Batch& inputs);
  // The training data's sampler (train_sampling_strategy's) and the loader's batch per process
  // (the train batch size): GRPO's repeats its prompts, a generation's worth at once.
  virtual std::shared_ptr<const data::Sampler> make_train_sampler(int64_t batch_size);
  virtual int64_t train_loader_batch_size(int64_t batch_size) const { return batch_size; }
  // The order an evaluation reads `dataset` in batches of `batch_size` (Transformers'
  // _get_eval_sampler: in order, or grouped by length).
  virtual std::shared_ptr<const data::Sampler> make_eval_sampler(const data::Dataset& dataset,
                                                                 int64_t batch_size);
  // What a trainer keeps of its own in each process's rank state of a checkpoint (GRPO: its
  // buffer of sampled completions), and reads back on resume at the same number of processes.
  virtual void save_rank_extras(io::NamedTensors& tensors, io::Metadata& metadata) const {}
  virtual void load_rank_extras(const io::MappedSafetensors& state, const std::string& path) {}
  // The run's callbacks, in the order they are called.
  const std::vector<std::shared_ptr<TrainerCallback>>& callbacks() const { return callbacks_; }
  // The micro-batches of the current gradient accumulation window (fewer at an epoch's end).
  int64_t current_gradient_accumulation_steps() const {
    return current_gradient_accumulation_steps_;
  }

 private:
  // The callbacks of a run, in Transformers' order: the flow's, report_to's integrations, the
  // console's (main process), early stopping's, then `callbacks`.
  void add_callbacks(std::vector<std::shared_ptr<TrainerCallback>> callbacks);
  // What the arguments ask of the model before it moves to the device: activation checkpointing,
  // the chunked loss, the overflow detector, the KV cache, NEFTune's noise.
  void configure_model();
  // The loop under evaluate and predict: outputs and labels (kept when asked for or when
  // compute_metrics needs them; none with prediction_loss_only) and the metrics. Outside
  // train(), bf16_full_eval / fp16_full_eval cast the model for it (restored after).
  PredictionResult evaluation_loop(const std::shared_ptr<const data::Dataset>& dataset,
                                   const std::string& prefix, bool keep_predictions);

  std::string banner(int64_t num_examples, int64_t num_epochs) const;
  // A checkpoint folder and its manifest, verified (every file's size and CRC-32).
  struct Resumable {
    std::string dir;
    Manifest manifest;
  };
  // The checkpoint train() resumes from, verified (none: a fresh run); see train().
  std::optional<Resumable> checkpoint_to_resume(const std::optional<std::string>& requested) const;
  // checkpoint_to_resume as this process finds it, before the nodes agree (save_on_each_node).
  std::optional<Resumable> newest_or_requested_checkpoint(
      const std::optional<std::string>& requested) const;
  // Loads a verified checkpoint into the model, optimizer, schedule, state and loop position, in
  // the steps below; InputError (naming the file) for one that does not fit this run.
  void load_checkpoint(const Resumable& checkpoint, int64_t steps_per_epoch);
  // A checkpoint of this model and total batch size, with more than the model in it.
  void check_resumable(const Resumable& checkpoint) const;
  // trainer_state.json and scheduler.json, checked against the manifest and the folder's name.
  struct SavedState {
    TrainerState state;
    int64_t scheduler_last_step = 0;
    std::vector<double> base_lrs;  // empty: the optimizer's own
    // reduce_lr_on_plateau's state and the rates it had set (absent for the other schedules).
    std::optional<optim::PlateauState> plateau{};
    std::vector<double> last_lrs{};
  };
  SavedState read_saved_state(const Resumable& checkpoint) const;
  // model.safetensors (checked finite), optimizer.pt and the schedule's position.
  void load_weights_and_optimizer(const Resumable& checkpoint, const SavedState& saved);
  // Unsharded: model.safetensors (checked finite) and optimizer.pt.
  void load_model_and_optimizer(const std::string& dir);
  // The saved TrainerState with this run's step counts, and with
  // restore_callback_states_from_checkpoint the callbacks' states and the stop flags.
  void restore_state(const std::string& dir, const TrainerState& saved);
  // The callbacks' saved states and TrainerControl's flags from `saved` (source(file): a file's
  // path in the checkpoint, for messages).
  void restore_callback_states(const TrainerState& saved,
                               const std::function<std::string(const char*)>& source);
  // This process's random state, the loop's position and the losses since the last log (at
  // another world size: rank 0's random state and the mean of every rank's losses).
  void restore_rank_state(const Resumable& checkpoint, const TrainerState& saved,
                          int64_t steps_per_epoch);
  // save_checkpoint's parts: this process's rank_state_<rank>.safetensors, and (main process)
  // everything else with the manifest, moved into place as `target`.
  // save_model's writing, on the main process.
  void write_model(const std::string& dir, base::WriteBatch* batch) const;
  // Whether this process writes checkpoints and the model: the main process, or with
  // save_on_each_node the first process of each node (Transformers' should_save).
  bool saves_here() const;
  void write_rank_state(const std::string& staging) const;
  // save_on_each_node: every process's rank state, gathered, written by the first process of
  // each node beside its own ranks' (each node's checkpoint is whole).
  void share_rank_states(const std::string& staging) const;
  void write_checkpoint_files(const std::string& staging, const std::string& target);
  // A sharded run (checkpoint_sharded.cpp): this process's sharded_state_<r>_of_<N>.safetensors
  // (its slices of the parameters and, unless save_only_model, of AdamW's moments), and reading
  // them back from a checkpoint of any world size (the moments with_optimizer). Only AdamW's
  // state shards: validate() refuses another optim with fsdp, and train() an overridden
  // create_optimizer's other optimizer (std::logic_error, before the first step).
  void write_sharded_state(const std::string& staging) const;
  void load_sharded_state(const std::string& dir, const Manifest& manifest, bool with_optimizer);
  // load_sharded_state's work on this process (it then agrees with the others on success).
  void load_own_slices(const std::string& dir, const Manifest& manifest, bool with_optimizer);
  // The name of a parameter holding nan or inf (the same answer on every process), or nothing.
  std::optional<std::string> nonfinite_weights() const;
  // Throws std::runtime_error "training diverged: ..." when nonfinite_weights() names one: weights
  // that are not finite are never saved (a checkpoint, or the model at the end). Collective.
  void refuse_nonfinite_weights() const;
  // metric_for_best_model's value in an evaluation's `metrics` (InputError naming the metrics
  // there when it is not among them).
  double best_metric_value(const Metrics& metrics) const;
  // After an evaluation: whether `metrics` hold a new best metric_for_best_model.
  bool update_best_metric(const Metrics& metrics);
  // overwrite_output_dir, at the start of a fresh run: moves the checkpoint-* folders in output_dir
  // into kEarlierCheckpointsDir, stamped with the results they belong to (trainer_state.json's
  // CRC). When that folder is there already with the same stamp, an earlier overwriting run never
  // finished: the folder keeps the results' own checkpoints and the unfinished run's go; with
  // another stamp the folder is stale and goes. A set-aside a crash cut short is undone first.
  // Main process.
  void set_aside_earlier_checkpoints() const;
  // The per-step curve: record_step keeps the step's loss and gradient norm on the device;
  // flush_step_curve (every process, at a log, a save and the end) reduces the pending losses
  // over processes in one collective and appends them to step_curve_.
  void record_step();
  void flush_step_curve();
  // Removes the oldest checkpoints past save_total_limit, never the best (main process).
  void rotate_checkpoints(const std::string& just_saved) const;
  void load_best_model();
  void log(nlohmann::ordered_json logs);

  // What every process agrees on after a step's backward: whether a loss or the gradient norm
  // is not finite (under fp16 an infinite norm is the GradScaler's to handle), and the signal
  // that asked one of them to stop.
  struct StepChecks {
    bool nonfinite = false;
    int signal = 0;
    std::string what;  // "the loss", "the gradient norm"
  };
  // Reads the step's loss and norm (a host sync) and agrees with the other processes.
  StepChecks check_step(const torch::Tensor& loss, const torch::Tensor& grad_norm);
  // The label tokens (labels != -100; for causal_lm, those after each row's first, the ones the
  // loss predicts) of `batches`, summed over the processes: a 0-dim int64 on the device.
  torch::Tensor count_label_tokens(const std::vector<data::Batch>& batches);
  // A batch's input tokens as include_num_input_tokens_seen counts them (all, or non_padding: the
  // attention mask's ones), an int64 scalar on the device.
  torch::Tensor count_input_tokens(const data::Batch& batch) const;
  // Each value's maximum over the processes (the values themselves with one process).
  std::vector<double> max_over_processes(std::vector<double> values);
  // One optimization step's forward and backward: `window` micro-batches (batch_at(k) gives the
  // k-th) through training_step, gradients synchronised on the last; for causal_lm the window's
  // label tokens over every process are counted first (num_items_in_batch). Returns their loss
  // sum.
  torch::Tensor forward_backward(int64_t window,
                                 const std::function<data::Batch(int64_t)>& batch_at);
  // The gradient norm, clipped to max_grad_norm when it is > 0; on the device, not read.
  torch::Tensor clip_gradients();

  // The CUDA loop (trainer/device_step.cpp): each step's update, its non-finite skip and the
  // loss sum stay on the device, the host reads them every few steps, and with cuda_graphs the
  // whole step is replayed as a CUDA graph. Null where it does not apply (CPU, fp16, an
  // optimizer other than this trainer's AdamW on one CUDA device): the host loop then runs.
  struct DeviceLoop;
  std::shared_ptr<DeviceLoop> make_device_loop();
  // One optimization step on the device; returns its loss sum and sets grad_norm, unread.
  torch::Tensor device_step(DeviceLoop& loop, DataLoaderShard& loader,
                            AcceleratedOptimizer& optimizer, int64_t first, int64_t window,
                            torch::Tensor& grad_norm);
  // After device_step: the signal (read on the host each step with one process), and at a check
  // point (every few steps, and with `now`) the non-finite steps since the last one, reported in
  // one warning line, and nonfinite_in_a_row_.
  StepChecks device_checks(DeviceLoop& loop, bool now);

  // The counters of the CUDA caching allocator on a CUDA device, for the memory metrics (none on
  // the CPU).
  std::optional<TrainerMemoryTracker::DeviceCounters> device_memory_counters() const;
  // One attempt of the loop at train_batch_size_ (Transformers' _inner_training_loop): the
  // plan, a fresh state, the optimizer (kept from an earlier attempt: `keep_optimizer`) and the
  // schedule, the checkpoint's state, the epochs, the final log.
  TrainOutput inner_training_loop(const std::optional<Resumable>& checkpoint, bool keep_optimizer);
  // With auto_find_batch_size: inner_training_loop, again at half the batch size after each
  // out-of-memory error.
  TrainOutput find_executable_batch_size(const std::optional<Resumable>& checkpoint);

  // train()'s steps, as Transformers' _inner_training_loop names them.
  // What one run of the loop works with: the prepared loader and the step counts.
  struct TrainingPlan {
    std::shared_ptr<DataLoaderShard> loader;
    int64_t num_batches = 0;       // this process's batches per epoch
    int64_t accumulation = 1;      // gradient_accumulation_steps
    int64_t steps_per_epoch = 1;   // optimization steps
    int64_t total_batch_size = 0;  // per device x processes x accumulation
    int64_t max_steps = 0;
    int64_t num_epochs = 0;
    double num_train_samples = 0;  // for train_samples_per_second
  };
  // The loader and step counts from the arguments (InputError for an empty data set, no batch,
  // or counts that overflow).
  TrainingPlan set_initial_training_values();
  // A per-process batch size of `batch` (the argument `key`): batch itself, or with
  // accelerator_config split_batches batch / num_processes (InputError when it does not divide).
  int64_t process_batch_size(int64_t batch, const char* key) const;
  // The DataLoader options of the data-loading arguments (workers, prefetching, pinned memory).
  data::DataLoaderOptions loader_options(int64_t batch_size, bool drop_last) const;
  // A fresh TrainerState and loop position for `plan`.
  void reset_training_state(const TrainingPlan& plan);
  // create_optimizer (unless `keep_optimizer` and an earlier attempt left an optimizer and its
  // schedule: that optimizer as it is) and create_scheduler (checked to return something; over a
  // kept optimizer, with the earlier schedule's base rates), prepared.
  std::shared_ptr<AcceleratedOptimizer> create_optimizer_and_scheduler(int64_t num_training_steps,
                                                                       bool keep_optimizer = false);
  // The banner, with the resumed position (main process).
  void print_banner(const TrainingPlan& plan, const std::optional<Resumable>& checkpoint) const;
  // One epoch from its first batch, or, with resumed_steps >= 0, from the saved position.
  void run_epoch(const TrainingPlan& plan, int64_t epoch, int64_t resumed_steps,
                 AcceleratedOptimizer& optimizer, DeviceLoop* device_loop);
  // One optimization step over `window` micro-batches from batch `first`: forward, backward,
  // clipping, the checks, the update (skipped when not finite) and the schedule's step.
  StepChecks optimization_step(const TrainingPlan& plan, int64_t first, int64_t window,
                               AcceleratedOptimizer& optimizer, DeviceLoop* device_loop);
  // Throws std::runtime_error once max_nonfinite_steps steps in a row were not finite.
  void stop_on_nonfinite_steps();
  // A signal asked to stop: saves a checkpoint at this step boundary and throws Interrupted.
  [[noreturn]] void stop_at_step_boundary(int signal, int64_t max_steps);
  // Transformers' _maybe_log_save_evaluate: log (the mean loss over processes since the last
  // log), evaluate (tracking the best metric), save, as control_ says.
  void maybe_log_save_evaluate();
  // evaluate() inside the loop; with auto_find_batch_size, its out-of-memory error becomes a
  // std::runtime_error naming per_device_eval_batch_size, which the retry does not catch.
  Metrics evaluate_in_training();
  // The final log (train_runtime up to now, speeds, train_loss) and on_train_end.
  TrainOutput finish_training(const TrainingPlan& plan, const base::Stopwatch& stopwatch);

  // Calls `event` on every callback, in order.
  template <typename Event>
  void fire(Event event) {
    for (auto& callback : callbacks_) event(*callback);
  }

  std::shared_ptr<models::Model> model_;
  TrainingArguments args_;
  std::shared_ptr<const data::Dataset> train_dataset_;
  std::shared_ptr<const data::Dataset> eval_dataset_;
  data::DataCollator data_collator_;
  ComputeMetrics compute_metrics_;
  std::vector<std::shared_ptr<TrainerCallback>> callbacks_;
  TrainerState state_;
  TrainerControl control_;
  Metrics last_eval_metrics_;
  mutable std::optional<nlohmann::ordered_json> all_results_;  // what all_results.json holds
  int64_t last_eval_step_ = -1;
  std::shared_ptr<Accelerator> accelerator_;
  std::shared_ptr<models::Model> model_wrapped_;  // prepared for training (DDP, autocast)
  std::shared_ptr<models::Model> model_eval_;     // prepared for evaluation only
  std::shared_ptr<torch::optim::Optimizer> optimizer_;
  std::shared_ptr<optim::LRScheduler> lr_scheduler_;
  int64_t current_gradient_accumulation_steps_ = 1;
  torch::Tensor last_step_loss_;  // the latest optimization step's loss, on the device
  torch::Tensor grad_norm_;       // the latest step's gradient norm, on the device
  double step_lr_ = 0.0;          // the learning rate the latest step trained with

  // Where the loop stands, as a checkpoint records it. The next step starts at `epoch`'s
  // optimization step `steps_in_epoch` (an epoch-end save records the next epoch's step 0).
  struct Position {
    int64_t epoch = 0;
    int64_t steps_in_epoch = 0;
    bool inside_epoch = false;  // on_epoch_begin ran, on_epoch_end not yet
  };
  Position position_;
  torch::Tensor tr_loss_;         // this process's loss sum since the last log, on the device
  double total_loss_scalar_ = 0;  // sum of the logged (process-mean) losses
  // Transformers' current_flos (this process's since the last store_flos) and the model's
  // non-embedding parameters (-1: not counted yet).
  double current_flos_ = 0;
  int64_t non_embedding_parameters_ = -1;
  // Transformers' store_flos: every process's current_flos added to total_flos.
  void store_flos();
  int64_t last_logged_step_ = 0;
  // include_num_input_tokens_seen: when this session's training began, and the count then.
  std::chrono::steady_clock::time_point train_start_ = std::chrono::steady_clock::now();
  int64_t initial_tokens_seen_ = 0;
  int64_t nonfinite_in_a_row_ = 0;
  bool detect_overflow_ = false;  // debug underflow_overflow
  int64_t total_batch_size_ = 0;
  int64_t train_batch_size_ = 0;  // Transformers' _train_batch_size: auto_find_batch_size's
  TrainerMemoryTracker memory_tracker_;
  int64_t last_saved_step_ = -1;
  int64_t cuda_graph_replays_ = 0;
  bool in_training_loop_ = false;
  // The steps since the curve was last flushed: losses and norms on the device, the learning
  // rates and steps on the host.
  std::vector<torch::Tensor> pending_losses_, pending_norms_;
  std::vector<double> pending_steps_, pending_lrs_;
  report::StepCurve step_curve_;
};

}  // namespace trainer
