// `trainer generate`: sampling bytes from a trained gpt run, seeded (nanoGPT's sample.py for a
// run that `trainer train` wrote).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Generator.h>

#include "apps/trainer/cli.h"
#include "lib/models/generation_config.h"
#include "lib/models/gpt.h"
#include "lib/models/hf_causal_lm.h"
#include "lib/models/pretrained_source.h"
#include "lib/tokenizers/tokenizer.h"

namespace trainer {

// The prompt (or, when empty, nothing: sampling starts after a newline) followed by
// options.max_new_tokens bytes sampled from `model` with options' temperature, top_k and seed,
// each step seeing the last data_context - 1 bytes (data_context: the length of the blocks it was
// trained on; see SamplingOptions::context).
std::string sample_text(models::Gpt& model, const cli::GenerateOptions& options,
                        int64_t data_context);

// Rebuilds the run's model from OUTPUT_DIR/training_args.json (model_name gpt, model_config, the
// data's context length), loads OUTPUT_DIR/model.safetensors, and prints the prompt followed by
// max_new_tokens sampled bytes to stdout; returns 0. Throws InputError (one line) for a missing
// folder or file, a run of another model, or weights that do not fit the configuration.
int generate_text(const cli::GenerateOptions& options);

// A Hugging Face folder's model (or an adapter over its base), tokenizer and generation config,
// loaded once, with the sampling settings (the command line's, else generation_config.json's,
// else Transformers' defaults): what generate and chat run.
struct HfSession {
  // Throws InputError for a folder that does not load or a tokenizer larger than the model.
  HfSession(const models::PretrainedSource& source, const cli::GenerateOptions& options);

  // `ids` followed by up to max_new_tokens tokens, greedy or sampled with the KV cache, ending at
  // an EOS token (kept) or the model's last position; `on_token` sees each new token as it comes.
  std::vector<int64_t> generate(std::vector<int64_t> ids,
                                const std::function<void(int64_t)>& on_token);

  cli::GenerateOptions options, warpers;
  std::shared_ptr<models::Model> loaded;
  models::HfCausalLM* model = nullptr;
  tokenizers::Tokenizer tokenizer;
  models::GenerationConfig generation;
  bool sample = false;
  std::vector<int64_t> eos;
  at::Generator generator;
};

// The ids of `message` as a user turn (after --system's, when given) through the folder's chat
// template (or --chat_template), with the generation prompt, tokenized without special tokens
// as apply_chat_template(tokenize=True) does (apps/trainer/chat.cpp). Throws InputError for a
// folder without a template, a template that refuses the conversation, or a prompt longer than
// the model's positions.
std::vector<int32_t> chat_prompt_ids(const HfSession& session, const std::string& tokenizer_dir,
                                     const cli::GenerateOptions& options,
                                     const std::string& message);

}  // namespace trainer
