// The table of TrainingArguments: each row is one argument's C++ type, name, default and help,
// in Transformers' order where Transformers has it. The class's fields and setters
// (training_args.h), the JSON and `--name value` conversions, `--help`, training_args.json and
// docs/arguments.md all come from these rows: a new argument is one row here (and its check in
// validate()). X-macro: define X(type, name, default, help) and expand TRAINER_ARGUMENTS(X).
#pragma once

// clang-format off
#define TRAINER_ARGUMENTS(X) \
  X(std::string, output_dir, "trainer_output",                                                     \
    "Where trainer_state.json, training_args.json, model.safetensors and the results go.")         \
  X(bool, overwrite_output_dir, false,                                                             \
    "Train into an output_dir that already holds files, replacing an earlier run's results.")      \
  X(bool, do_train, false,                                                                         \
    "Accepted for compatibility; `trainer train` always trains.")                                  \
  X(bool, do_eval, false,                                                                          \
    "Evaluate after training even when eval_strategy is \"no\".")                                  \
  X(double, num_train_epochs, 3.0,                                                                 \
    "Number of epochs (a fraction ends mid-epoch).")                                               \
  X(int64_t, max_steps, -1,                                                                        \
    "If > 0: total optimization steps, overriding num_train_epochs.")                              \
  X(int64_t, per_device_train_batch_size, 8,                                                       \
    "Training batch size per process.")                                                            \
  X(int64_t, per_device_eval_batch_size, 8,                                                        \
    "Evaluation batch size per process.")                                                          \
  X(double, learning_rate, 5e-5,                                                                   \
    "Initial AdamW learning rate.")                                                                \
  X(double, weight_decay, 0.0,                                                                     \
    "AdamW weight decay, applied to all parameters but biases and norms.")                         \
  X(double, adam_beta1, 0.9,                                                                       \
    "AdamW beta1.")                                                                                \
  X(double, adam_beta2, 0.999,                                                                     \
    "AdamW beta2.")                                                                                \
  X(double, adam_epsilon, 1e-8,                                                                    \
    "AdamW epsilon.")                                                                              \
  X(double, max_grad_norm, 1.0,                                                                    \
    "Gradient clipping norm (0 disables clipping).")                                               \
  X(std::string, optim, "adamw_torch_fused",                                                       \
    "The optimizer: adamw_torch_fused (Transformers' default), adamw_torch (the same update), "    \
    "adafactor (Transformers' Adafactor: factored second moments), sgd, adagrad or rmsprop; with " \
    "fsdp only the two AdamWs.")                                                                   \
  X(std::optional<std::string>, optim_args, std::nullopt,                                          \
    "The optimizer's options as key=value,key=value: sgd momentum, dampening, weight_decay, "      \
    "nesterov; adagrad lr_decay, weight_decay, eps; rmsprop momentum, alpha, eps, weight_decay, "  \
    "centered (as Transformers reads them; its weight_decay has no effect there, each parameter "  \
    "group setting its own: set weight_decay).")                                                   \
  X(bool, skip_memory_metrics, true,                                                               \
    "false: add the memory each stage allocated and peaked at to the metrics (init_mem_cpu_*, "    \
    "train_mem_cpu_*, eval_mem_cpu_*; *_gpu_* on CUDA), as Transformers' TrainerMemoryTracker.")    \
  X(int64_t, gradient_accumulation_steps, 1,                                                       \
    "Batches accumulated before each optimizer step.")                                             \
  X(bool, auto_find_batch_size, false,                                                             \
    "On running out of memory in training, halve per_device_train_batch_size and start the "       \
    "training loop again (one process only; on CPU a request larger than the memory available "    \
    "is refused before the kernel's OOM killer would end the run).")                               \
  X(std::optional<bool>, activation_checkpointing, std::nullopt,                                   \
    "Recompute each transformer block's activations in backward instead of keeping them "          \
    "(less memory, about one more forward of time; null: gradient_checkpointing, else false).")    \
  X(nlohmann::ordered_json, activation_checkpointing_kwargs, nlohmann::ordered_json::object(),      \
    "Options of activation_checkpointing: every_n_layers 1 (checkpoint blocks 0, n, 2n, ...); "     \
    "use_reentrant (accepted, either way the same gradients).")                                    \
  X(std::optional<bool>, gradient_checkpointing, std::nullopt,                                     \
    "Transformers' older name of activation_checkpointing (used when that is null).")              \
  X(nlohmann::ordered_json, gradient_checkpointing_kwargs, nlohmann::ordered_json::object(),        \
    "Transformers' older name of activation_checkpointing_kwargs (used when that is empty).")      \
  X(std::optional<bool>, use_liger_kernel, std::nullopt,                                           \
    "A language model's training loss as Liger's fused linear cross-entropy: the output layer "    \
    "and the loss computed a chunk of tokens at a time, never the whole [tokens, vocabulary] "     \
    "logits (null: on, as true; false: Transformers' plain logits and loss).")                     \
  X(std::string, lr_scheduler_type, "linear",                                                      \
    "Transformers' learning-rate schedule: linear, cosine, cosine_with_restarts, polynomial, "     \
    "constant, constant_with_warmup, inverse_sqrt, reduce_lr_on_plateau (the rate cut when "       \
    "metric_for_best_model stops improving, stepped after each evaluation in training: needs "     \
    "an eval_strategy), cosine_with_min_lr, cosine_warmup_with_min_lr or warmup_stable_decay; "    \
    "its options in lr_scheduler_kwargs.")                                                         \
  X(nlohmann::ordered_json, lr_scheduler_kwargs, nlohmann::ordered_json::object(),                 \
    "Options of lr_scheduler_type, as Transformers' schedule functions take them: num_cycles "     \
    "(the cosines, warmup_stable_decay); lr_end (absolute) and power (polynomial); timescale "     \
    "(inverse_sqrt); min_lr or min_lr_rate (cosine_with_min_lr, cosine_warmup_with_min_lr, "       \
    "with warmup_lr_rate); num_decay_steps (required), num_stable_steps, warmup_type and "         \
    "decay_type (linear, cosine, 1-sqrt), min_lr_ratio (warmup_stable_decay); mode, factor, "      \
    "patience, threshold, threshold_mode, cooldown, min_lr, eps (reduce_lr_on_plateau, torch's "   \
    "ReduceLROnPlateau). constant and constant_with_warmup take none.")                            \
  X(int64_t, warmup_steps, 0,                                                                      \
    "Linear warmup steps (overrides warmup_ratio when > 0).")                                      \
  X(double, warmup_ratio, 0.0,                                                                     \
    "Fraction of the total steps used for linear warmup.")                                         \
  X(std::string, logging_strategy, "steps",                                                        \
    "no, steps or epoch.")                                                                         \
  X(double, logging_steps, 500,                                                                    \
    "Log every N steps (a value below 1 is a fraction of the total).")                             \
  X(bool, logging_first_step, false,                                                               \
    "Also log the first step.")                                                                    \
  X(std::string, eval_strategy, "no",                                                              \
    "no, steps or epoch (old name: evaluation_strategy).")                                         \
  X(std::optional<double>, eval_steps, std::nullopt,                                               \
    "Evaluate every N steps (default: logging_steps), and at the last step when N does not "       \
    "divide it.")                                                                                  \
  X(double, eval_delay, 0,                                                                         \
    "Epochs or steps (as eval_strategy counts) to wait before the first evaluation: evaluations "  \
    "before it are skipped.")                                                                      \
  X(bool, eval_on_start, false,                                                                    \
    "Evaluate once before the first step (a sanity check, logged at step 0).")                     \
  X(bool, prediction_loss_only, false,                                                             \
    "Evaluation and prediction return only the loss: no outputs are gathered and "                 \
    "compute_metrics (accuracy, rmse, mae) is not called.")                                        \
  X(bool, eval_do_concat_batches, true,                                                            \
    "false: predict keeps each batch's outputs apart (compute_metrics gets them per batch; "       \
    "trainer predict writes predictions_<batch>.npy).")                                            \
  X(bool, eval_use_gather_object, false,                                                           \
    "Accepted: the outputs are tensors, gathered as tensors either way.")                          \
  X(std::optional<int64_t>, eval_accumulation_steps, std::nullopt,                                 \
    "Move the outputs gathered so far to the CPU every N evaluation batches (null: at the end; "   \
    "on the CPU the same).")                                                                       \
  X(std::vector<std::string>, include_for_metrics, {},                                             \
    "What compute_metrics gets beside the outputs and labels: inputs (the batches' model "         \
    "inputs), loss (each example's batch loss).")                                                  \
  X(bool, batch_eval_metrics, false,                                                               \
    "Call compute_metrics after each evaluation batch (compute_result false, then true on the "    \
    "last), keeping running sums instead of every output.")                                        \
  X(bool, bf16_full_eval, false,                                                                   \
    "Evaluate and predict outside training with the model cast to bf16 (not autocast); its "       \
    "weights are restored afterwards.")                                                            \
  X(bool, fp16_full_eval, false,                                                                   \
    "Evaluate and predict outside training with the model cast to fp16 (not autocast); its "       \
    "weights are restored afterwards.")                                                            \
  X(bool, do_predict, false,                                                                       \
    "After training, predict on the eval split as trainer predict does (predict_results.json, "    \
    "predictions.npy, label_ids.npy).")                                                            \
  X(std::string, save_strategy, "steps",                                                           \
    "When to save a checkpoint-<step> folder: no, steps, epoch, or best (when "                    \
    "metric_for_best_model improves).")                                                            \
  X(double, save_steps, 500,                                                                       \
    "Save every N steps with save_strategy steps (a value below 1 is a fraction of the "           \
    "total).")                                                                                     \
  X(std::optional<int64_t>, save_total_limit, std::nullopt,                                        \
    "Keep at most N checkpoints: the newest, and the best one with load_best_model_at_end "        \
    "(null: keep all).")                                                                           \
  X(bool, save_only_model, false,                                                                  \
    "Checkpoints hold the model only, no optimizer, schedule or random state (they cannot be "     \
    "resumed).")                                                                                   \
  X(bool, save_on_each_node, false,                                                                \
    "Nodes without a shared file system: the first process of every node writes the checkpoints "  \
    "(with every rank's state) and the model, so each node resumes from its own copy.")            \
  X(bool, load_best_model_at_end, false,                                                           \
    "Load the checkpoint with the best metric_for_best_model when training ends (needs "           \
    "save_strategy to match eval_strategy).")                                                      \
  X(std::optional<std::string>, metric_for_best_model, std::nullopt,                               \
    "Metric that picks the best checkpoint, e.g. loss or accuracy (default with "                  \
    "load_best_model_at_end: loss).")                                                              \
  X(std::optional<bool>, greater_is_better, std::nullopt,                                          \
    "Whether a greater metric_for_best_model is better (default: false for names ending in "       \
    "loss, else true).")                                                                           \
  X(std::optional<std::string>, resume_from_checkpoint, std::nullopt,                              \
    "Resume training from a checkpoint folder, or true for the newest good checkpoint in "         \
    "output_dir.")                                                                                 \
  X(bool, ignore_data_skip, false,                                                                 \
    "On resume, start the interrupted epoch from its beginning instead of skipping the "           \
    "batches already trained on.")                                                                 \
  X(int64_t, max_nonfinite_steps, 10,                                                              \
    "Stop with an error after this many steps in a row with a non-finite loss or gradient "        \
    "norm (each one's update is skipped); 0: never stop.")                                         \
  X(std::optional<int64_t>, early_stopping_patience, std::nullopt,                                 \
    "Stop training after this many evaluations without improving metric_for_best_model "           \
    "(Transformers' EarlyStoppingCallback; null: off).")                                           \
  X(double, early_stopping_threshold, 0.0,                                                         \
    "How much metric_for_best_model must improve to count, with early_stopping_patience.")         \
  X(int64_t, seed, 42,                                                                             \
    "Seed for model initialisation, dropout and (without data_seed) shuffling.")                   \
  X(std::optional<int64_t>, data_seed, std::nullopt,                                               \
    "Seed for shuffling the training data (default: seed).")                                       \
  X(bool, use_cpu, false,                                                                          \
    "Train on the CPU even where CUDA is available.")                                              \
  X(bool, bf16, false,                                                                             \
    "bf16 mixed precision (autocast), on CPU and CUDA.")                                           \
  X(bool, fp16, false,                                                                             \
    "fp16 mixed precision with loss scaling (CUDA only).")                                         \
  X(std::optional<bool>, tf32, std::nullopt,                                                       \
    "TF32 tensor-core math for float32 matrix products and convolutions (CUDA only; null: "        \
    "LibTorch's default, off).")                                                                   \
  X(bool, cuda_graphs, false,                                                                      \
    "Capture the whole training step (forward, backward, optimizer) as a CUDA graph after 3 "      \
    "warm-up steps and replay it; falls back to eager steps, with a warning, where it cannot "     \
    "(CPU, several processes, fp16, gradient accumulation, a step that syncs).")                   \
  X(bool, data_on_device, true,                                                                    \
    "On CUDA, keep a data set that fits on the device and sample, gather and normalise "           \
    "batches there (false: host memory, each batch copied over).")                                 \
  X(std::optional<std::string>, ddp_backend, std::nullopt,                                         \
    "Process-group backend with several processes: gloo or nccl (default: nccl on CUDA, gloo "     \
    "on CPU).")                                                                                    \
  X(int64_t, ddp_timeout, 1800,                                                                    \
    "Seconds the rendezvous and each collective may take before the run fails.")                   \
  X(std::optional<int64_t>, ddp_bucket_cap_mb, std::nullopt,                                       \
    "DDP gradient bucket size in MiB (default: 25, as PyTorch).")                                  \
  X(std::optional<bool>, ddp_find_unused_parameters, std::nullopt,                                 \
    "Let DDP look for parameters the forward did not use (default: false).")                       \
  X(std::optional<bool>, ddp_broadcast_buffers, std::nullopt,                                      \
    "Broadcast rank 0's buffers at every training forward (default: true).")                       \
  X(std::string, fsdp, "",                                                                         \
    "Sharded data parallel instead of DDP, as Transformers' words: full_shard (ZeRO stage 3: "     \
    "parameters, gradients and AdamW state sharded), shard_grad_op (stage 2: gradients and "        \
    "state), shard_optimizer (stage 1: state), no_shard (DDP); with auto_wrap, one unit per "       \
    "transformer block; offload (CPU offload: where the state already is on CPU).")                \
  X(nlohmann::ordered_json, fsdp_config, nlohmann::ordered_json::object(),                         \
    "FSDP's options: min_num_params, transformer_layer_cls_to_wrap (LlamaDecoderLayer, "           \
    "Qwen2DecoderLayer, Qwen3DecoderLayer, MistralDecoderLayer, Gemma3DecoderLayer, "              \
    "Phi3DecoderLayer, Gemma2DecoderLayer, Olmo2DecoderLayer, SmolLM3DecoderLayer, "               \
    "GraniteDecoderLayer, MixtralDecoderLayer, Qwen3MoeDecoderLayer, GPT2Block, "                  \
    "Block), backward_prefetch backward_pre|no_prefetch, forward_prefetch, "                       \
    "limit_all_gathers, sync_module_states, use_orig_params, state_dict_type "                     \
    "FULL_STATE_DICT|SHARDED_STATE_DICT (the \"fsdp_\" prefix of Accelerate's keys is accepted).")  \
  X(nlohmann::ordered_json, deepspeed, nlohmann::ordered_json(),                                  \
    "A DeepSpeed JSON config (its file's path, or the object) run on this sharding: "              \
    "zero_optimization.stage 0 (DDP), 1, 2, 3 (shard_optimizer, shard_grad_op, full_shard "         \
    "auto_wrap), offload device cpu; \"auto\" values filled from these arguments, and a value "    \
    "that differs from a given argument refused (one not given takes the config's); not with "     \
    "fsdp (docs/distributed.md).")                                                                 \
  X(bool, dataloader_drop_last, false,                                                             \
    "Drop the last incomplete training batch.")                                                    \
  X(int64_t, dataloader_num_workers, 0,                                                            \
    "Threads that prepare batches in the background (gathering and collating the examples), "      \
    "delivering them in order: the same batches as 0, which prepares them on the main thread.")    \
  X(bool, dataloader_pin_memory, true,                                                             \
    "On CUDA, batches prepared in page-locked host memory, copied to the device without "          \
    "blocking; on CPU nothing (there is no device copy).")                                         \
  X(bool, dataloader_persistent_workers, false,                                                    \
    "Keep the dataloader_num_workers threads across epochs and evaluations instead of starting "   \
    "them for each pass.")                                                                         \
  X(std::optional<int64_t>, dataloader_prefetch_factor, std::nullopt,                              \
    "Batches each worker prepares ahead (prefetch_factor x num_workers in all; null: 2); needs "   \
    "dataloader_num_workers > 0.")                                                                 \
  X(std::optional<std::string>, dataloader_multiprocessing_context, std::nullopt,                  \
    "fork, spawn or forkserver: accepted with dataloader_num_workers > 0 and without effect, "     \
    "the workers being threads of the process, not processes.")                                    \
  X(bool, dataloader_in_order, true,                                                               \
    "Batches in the sampler's order. false allows them out of order as they are ready; the "       \
    "workers here deliver them in order either way.")                                              \
  X(std::string, train_sampling_strategy, "random",                                                \
    "The training order: random (torch.randperm seeded by data_seed, else seed, plus the "         \
    "epoch), sequential, or group_by_length (Transformers' LengthGroupedSampler: megabatches "     \
    "of 50 x train batch x gradient_accumulation_steps sorted by length, the longest first; "      \
    "evaluation then groups by length too).")                                                      \
  X(bool, group_by_length, false,                                                                 \
    "Transformers' older spelling of train_sampling_strategy group_by_length (true sets it), as "  \
    "recipes still carry it.")                                                                     \
  X(std::string, length_column_name, "length",                                                     \
    "Accepted: the data sets here have no length column, so group_by_length takes a row's "        \
    "number of tokens (input elements), as Transformers does without the column.")                 \
  X(nlohmann::ordered_json, accelerator_config, nlohmann::ordered_json::object(),                  \
    "Accelerate's AcceleratorConfig: split_batches (the batch sizes are the global ones, split "   \
    "over the processes), dispatch_batches, even_batches (default true: the last round padded "    \
    "with samples from the start), use_seedable_sampler, non_blocking, "                           \
    "gradient_accumulation_kwargs {num_steps, ...}, use_configured_state.")                        \
  X(bool, remove_unused_columns, true,                                                             \
    "Accepted for compatibility; batches keep what the collator builds.")                          \
  X(bool, disable_tqdm, false,                                                                     \
    "No progress bar, only the log lines.")                                                        \
  X(std::vector<std::string>, report_to, {"none"},                                                 \
    "Integrations to report the logs to: tensorboard (event files under logging_dir), jsonl "      \
    "(output_dir/log_history.jsonl, one line per log as it happens), all, or none.")               \
  X(std::optional<std::string>, logging_dir, std::nullopt,                                         \
    "Where report_to tensorboard writes (default: $TENSORBOARD_LOGGING_DIR, else "                 \
    "output_dir/runs/<Mon DD_HH-MM-SS>_<host>).")                                                  \
  X(std::optional<std::string>, run_name, std::nullopt,                                            \
    "Name of the run (default: output_dir).")                                                      \
  X(std::string, model_name, "basic_net",                                                          \
    "Model to train, by name: basic_net (the tutorial's), mlp, resnet, or gpt (a "                 \
    "decoder-only transformer, for dataset_name text).")                                           \
  X(nlohmann::ordered_json, model_config, nlohmann::ordered_json::object(),                        \
    "The model's options: mlp {hidden_sizes [128], activation relu|gelu|tanh, dropout 0}; "        \
    "resnet {width 16, stages 3, blocks_per_stage 2}; gpt {n_layer 4, n_head 4, n_embd 128, "      \
    "block_size (the data's context_length), dropout 0, bias true}; basic_net {fused true: "       \
    "false runs LibTorch's plain ops, as PyTorch's BasicNet}; a TorchScript model {outputs "       \
    "logits|log_probs}.")                                                                          \
  X(std::optional<std::string>, model_name_or_path, std::nullopt,                                  \
    "A Hugging Face model folder (config.json, model.safetensors: gpt2 or llama), or a "           \
    "TorchScript module (*.pt, saved from Python with torch.jit.script) to train instead of a "    \
    "model_name; output_dir gets it back in the same form with the trained weights.")              \
  X(std::string, dataset_name, "fashion_mnist",                                                    \
    "fashion_mnist or mnist (MNIST-format files), csv (a table with a header), or text "           \
    "(byte-level language modeling on a UTF-8 file or folder); for sft and dpo (TRL's "            \
    "dataset_name), a .json/.jsonl file or a folder of them, split by name.")                      \
  X(nlohmann::ordered_json, dataset_config, nlohmann::ordered_json::object(),                      \
    "The data set's options: csv {path (required), label \"label\", features (default: all "       \
    "other columns), task classification|regression, validation_fraction 0.2, seed 42}; text "     \
    "{path /usr/share/games/fortunes, context_length 128, stride (context_length), "               \
    "validation_fraction 0.1, seed 42}; none for fashion_mnist and mnist. For sft and dpo, TRL's " \
    "name of a configuration: dataset_name's subfolder of that name (default: the folder itself).")\
  X(std::string, dataset_dir, "",                                                                  \
    "Directory with the four IDX files (default for fashion_mnist: "                               \
    "/usr/share/datasets/fashion-mnist); for csv, where a relative path is found; for text, "      \
    "the corpus, instead of dataset_config's path.")                                               \
  X(std::string, dataset_train_split, "train",                                                     \
    "sft, dpo (TRL's ScriptArguments): the split of dataset_name trained on: a folder's "          \
    "files split by name as datasets splits them (train*.jsonl, train/, "                          \
    "data/train-00000-of-00001.jsonl).")                                                           \
  X(std::string, dataset_test_split, "test",                                                       \
    "sft, dpo: the split of dataset_name evaluated on when eval_strategy is not no (\"test\": "    \
    "else a validation split, as before this argument).")                                          \
  X(bool, dataset_streaming, false,                                                                \
    "sft, dpo: false only (the data is read whole, prepared once per node and cached).")           \
  X(bool, ignore_bias_buffers, false,                                                              \
    "sft, dpo: accepted (TRL's DDP fix for boolean buffers; no model here has any).")              \
  X(std::string, model_revision, "main",                                                           \
    "sft, dpo (TRL's ModelConfig): accepted; a local model folder has one revision (another "      \
    "name than main is warned about and ignored).")                                                \
  X(std::optional<std::string>, attn_implementation, std::nullopt,                                 \
    "sft, dpo: eager or sdpa (the same attention here, masked softmax in full; null: that); "      \
    "flash_attention_2 and the other kernels are refused.")                                        \
  X(std::string, lora_task_type, "CAUSAL_LM",                                                      \
    "sft, dpo: LoRA's task type: CAUSAL_LM only.")                                                 \
  X(std::vector<std::string>, lora_target_parameters, {},                                          \
    "sft, dpo: [] or null only (PEFT's adapters on parameters of Mixture-of-Experts layers).")     \
  X(bool, use_dora, false,                                                                         \
    "sft, dpo: false only (DoRA's magnitude vectors are not implemented).")                        \
  X(bool, load_in_8bit, false,                                                                     \
    "sft, dpo: false only (bitsandbytes' 8-bit weights need its CUDA kernels).")                   \
  X(bool, load_in_4bit, false,                                                                     \
    "sft, dpo: false only (bitsandbytes' 4-bit weights need its CUDA kernels).")                   \
  X(std::string, bnb_4bit_quant_type, "nf4",                                                       \
    "sft, dpo: nf4 or fp4, accepted (used only by load_in_4bit).")                                 \
  X(bool, use_bnb_nested_quant, false,                                                             \
    "sft, dpo: false only (used only by load_in_4bit).")                                           \
  X(std::optional<std::string>, bnb_4bit_quant_storage, std::nullopt,                              \
    "sft, dpo: accepted (used only by load_in_4bit).")                                             \
  X(std::optional<int64_t>, max_train_samples, std::nullopt,                                       \
    "Use only the first N training examples.")                                                     \
  X(std::optional<int64_t>, max_eval_samples, std::nullopt,                                        \
    "Use only the first N evaluation examples.")                                                   \
  X(std::optional<std::string>, train_file, std::nullopt,                                          \
    "run_clm's training text: .txt (one example a line), .json or .jsonl (JSON Lines with a "      \
    "text column); tokenized and cut into block_size blocks for causal language modeling.")        \
  X(std::optional<std::string>, validation_file, std::nullopt,                                     \
    "run_clm's evaluation text, as train_file (default: validation_split_percentage of it).")      \
  X(double, validation_split_percentage, 5,                                                        \
    "Percent of train_file's examples held out for evaluation when there is no "                   \
    "validation_file (the first ones, as datasets' train[:p%]).")                                  \
  X(std::optional<int64_t>, block_size, std::nullopt,                                              \
    "Tokens per training block (default: min(1024, the model's positions)).")                      \
  X(bool, keep_linebreaks, true,                                                                   \
    "Keep each .txt line's line break in its text.")                                               \
  X(std::string, text_column_name, "text",                                                         \
    "The column of a .json/.jsonl data file that holds the text.")                                 \
  X(std::optional<std::string>, tokenizer_name, std::nullopt,                                      \
    "A folder (or file) holding tokenizer.json (default: model_name_or_path or config_name).")     \
  X(std::optional<std::string>, config_name, std::nullopt,                                         \
    "A Hugging Face config.json (or its folder) of a fresh, randomly initialised model.")          \
  X(std::optional<std::string>, model_type, std::nullopt,                                          \
    "gpt2, llama, qwen2, qwen3, mistral, gemma3_text, phi3, gemma2, olmo2, smollm3, granite, "    \
    "mixtral or qwen3_moe: a fresh model from Transformers' defaults overlaid with "               \
    "model_config's config.json keys (for pretraining from scratch).")                             \
  X(std::string, torch_dtype, "auto",                                                              \
    "The weights' type of a Hugging Face model: auto (config.json's dtype), float32, "             \
    "bfloat16 or float16 (TRL's ModelConfig name: dtype, null meaning auto).")                     \
  X(std::optional<int64_t>, preprocessing_num_workers, std::nullopt,                               \
    "Accepted for compatibility with run_clm.py; tokenization runs in one process per node.")      \
  X(bool, overwrite_cache, false,                                                                  \
    "Tokenize the data files again rather than reading the node's cache.")                         \
  X(std::string, save_safetensors_max_shard_size, "50GB",                                         \
    "Above this size model.safetensors is written as shards with an index, as save_pretrained "    \
    "does (50GB, 500MB, 5GiB, or bytes).")                                                         \
  X(bool, use_peft, false,                                                                         \
    "Train LoRA adapters (PEFT's LoraConfig below) instead of every weight; also on when "         \
    "target_modules is given.")                                                                    \
  X(int64_t, lora_r, 8,                                                                            \
    "LoRA: the adapters' rank (PEFT's r).")                                                        \
  X(double, lora_alpha, 8,                                                                         \
    "LoRA: the adapters' scale is lora_alpha / lora_r (/ sqrt(lora_r) with use_rslora).")          \
  X(double, lora_dropout, 0.0,                                                                     \
    "LoRA: dropout on the adapters' input while training.")                                        \
  X(std::vector<std::string>, target_modules, {},                                                  \
    "LoRA: the linear layers that get adapters, by name or last name (q_proj,v_proj), or "         \
    "all-linear (default: PEFT's for the model type: llama, qwen2, qwen3, mistral, gemma2, "      \
    "gemma3_text q_proj,v_proj; gpt2 c_attn; none for phi3, olmo2, smollm3, granite; TRL's "      \
    "ModelConfig name: lora_target_modules).")                                                     \
  X(std::string, bias, "none",                                                                     \
    "LoRA: which biases train: none, all, or lora_only (those of the adapted layers).")            \
  X(std::vector<std::string>, modules_to_save, {},                                                 \
    "LoRA: modules trained in full and saved with the adapter (e.g. lm_head; TRL's ModelConfig "   \
    "name: lora_modules_to_save).")                                                                \
  X(bool, use_rslora, false,                                                                       \
    "LoRA: rank-stabilised scaling, lora_alpha / sqrt(lora_r).")                                   \
  X(std::string, init_lora_weights, "true",                                                        \
    "LoRA: true (A Kaiming-uniform, B zeros: the model starts as the base), gaussian (A "          \
    "normal(0, 1/r), B zeros) or false (both random).")                                            \
  X(double, label_smoothing_factor, 0.0,                                                           \
    "Transformers' LabelSmoother: the loss against labels smoothed by this epsilon ((1 - epsilon) " \
    "of the label's log-probability, epsilon of the mean over all classes or tokens), for "        \
    "classification and language models.")                                                         \
  X(std::optional<double>, neftune_noise_alpha, std::nullopt,                                      \
    "NEFTune: uniform noise of scale alpha / sqrt(tokens x hidden size) added to a Hugging Face "  \
    "model's input embeddings while training (null: off).")                                        \
  X(bool, average_tokens_across_devices, true,                                                     \
    "A token-level loss divided by the label tokens of every process's micro-batches (false: by "  \
    "this process's own, as if each trained alone).")                                              \
  X(std::vector<std::string>, label_names, {},                                                     \
    "The batch keys that hold the labels ([]: labels; the batches here carry one, so only labels " \
    "or label).")                                                                                  \
  X(std::string, log_level, "passive",                                                             \
    "The main process's log level: debug, info (the training banner and checkpoint lines), "       \
    "warning (passive: as warning), error or critical (warnings silenced).")                       \
  X(std::string, log_level_replica, "warning",                                                     \
    "The log level of the other processes (as log_level).")                                        \
  X(bool, log_on_each_node, true,                                                                  \
    "With several nodes, each node's first process logs at log_level (false: only the first "      \
    "node's).")                                                                                    \
  X(bool, logging_nan_inf_filter, true,                                                           \
    "A step whose loss (or gradient norm) is NaN or inf adds the average of the logged window's "  \
    "other steps to the logged loss (false: the NaN or inf is logged).")                           \
  X(std::string, include_num_input_tokens_seen, "no",                                              \
    "no, all (every input token, padding too) or non_padding: num_input_tokens_seen (over every "  \
    "process) in the logs and train_tokens_per_second in the train metrics (true: all, false: "    \
    "no).")                                                                                        \
  X(bool, full_determinism, false,                                                                 \
    "Deterministic algorithms only (LibTorch's use_deterministic_algorithms, "                     \
    "CUBLAS_WORKSPACE_CONFIG on CUDA) besides seed: reproducible runs on CUDA, at some speed.")    \
  X(bool, restore_callback_states_from_checkpoint, false,                                          \
    "On resume, restore the stateful callbacks (early stopping's patience count) saved in the "    \
    "checkpoint's trainer_state.json.")                                                            \
  X(std::optional<int64_t>, torch_empty_cache_steps, std::nullopt,                                 \
    "Every N steps return the CUDA caching allocator's free blocks to the device (less memory "    \
    "held, slower; nothing on CPU).")                                                              \
  X(bool, use_cache, false,                                                                        \
    "A Hugging Face model's config.json use_cache, as saved with the trained weights (training "   \
    "never keeps a KV cache).")                                                                    \
  X(std::optional<bool>, ddp_static_graph, std::nullopt,                                           \
    "DDP's static_graph: the model uses the same parameters every step, so DDP learns the graph "  \
    "once (null: false).")                                                                         \
  X(int64_t, local_rank, -1,                                                                       \
    "The process's rank on its node; the environment's LOCAL_RANK (set by the launcher) replaces " \
    "it, as in Transformers.")                                                                     \
  X(std::vector<std::string>, debug, {},                                                           \
    "underflow_overflow: stop at the first transformer block (or model output) whose activations " \
    "hold inf or NaN, naming it and the step (a string of options or a list).")                    \
  X(bool, enable_jit_checkpoint, false,                                                            \
    "Accepted: a SIGTERM or SIGINT always saves a checkpoint at the step boundary and stops here, " \
    "as Transformers' JIT checkpoint does.")                                                       \
  X(bool, push_to_hub, false,                                                                      \
    "Accepted as false only: no Hugging Face Hub here (save to output_dir and upload it "          \
    "yourself).")                                                                                  \
  X(std::optional<std::string>, hub_token, std::nullopt,                                           \
    "Accepted as null only (no Hub here).")                                                        \
  X(std::optional<bool>, hub_private_repo, std::nullopt,                                           \
    "Accepted as null only (no Hub here).")                                                        \
  X(std::optional<std::string>, hub_model_id, std::nullopt,                                        \
    "Accepted as null only (no Hub here).")                                                        \
  X(std::string, hub_strategy, "every_save",                                                       \
    "Accepted as every_save only (no Hub here).")                                                  \
  X(bool, hub_always_push, false,                                                                  \
    "Accepted as false only (no Hub here).")                                                       \
  X(std::optional<std::string>, hub_revision, std::nullopt,                                        \
    "Accepted as null only (no Hub here).")                                                        \
  X(bool, torch_compile, false,                                                                    \
    "Accepted as false only: torch.compile is Python's (TorchDynamo); the C++ kernels here run as " \
    "they are.")                                                                                   \
  X(std::optional<std::string>, torch_compile_backend, std::nullopt,                               \
    "Accepted as null only (no torch.compile here).")                                              \
  X(std::optional<std::string>, torch_compile_mode, std::nullopt,                                  \
    "Accepted as null only (no torch.compile here).")                                              \
  X(std::string, project, "huggingface",                                                           \
    "Accepted, any name: the project of trackio's and W&B's reports, which are Python "            \
    "integrations not built here.")                                                                \
  X(std::optional<std::string>, trackio_space_id, std::nullopt,                                    \
    "Accepted as null only (no trackio here).")                                                    \
  X(std::optional<std::string>, trackio_bucket_id, std::nullopt,                                   \
    "Accepted as null only (no trackio here).")                                                    \
  X(std::optional<std::string>, trackio_static_space_id, std::nullopt,                             \
    "Accepted as null only (no trackio here).")                                                    \
  X(std::vector<std::string>, optim_target_modules, {},                                            \
    "Accepted as null only: it names the modules of GaLore's, APOLLO's and similar optimizers, "   \
    "not built here.")                                                                             \
  X(nlohmann::ordered_json, liger_kernel_config, nlohmann::ordered_json::object(),                 \
    "Accepted as null or {} only: Liger's kernels beyond use_liger_kernel's fused linear "         \
    "cross-entropy are Triton's (GPU Python).")                                                    \
  X(nlohmann::ordered_json, parallelism_config, nlohmann::ordered_json::object(),                  \
    "Accepted as null or {} only: Accelerate's tensor, context and sequence parallelism are not "  \
    "built here (data parallelism and sharding are: fsdp, deepspeed).")

// clang-format on

// TRL's configs' own arguments.
#include "trainer/trl_args_table.h"
