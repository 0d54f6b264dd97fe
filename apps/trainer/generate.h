// `trainer generate`: sampling bytes from a trained gpt run, seeded (nanoGPT's sample.py for a
// run that `trainer train` wrote).
#pragma once

#include <string>

#include "apps/trainer/cli.h"
#include "lib/models/gpt.h"

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

}  // namespace trainer
