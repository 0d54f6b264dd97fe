// `trainer generate`: sampling bytes from a trained gpt run, seeded (nanoGPT's sample.py for a
// run that `trainer train` wrote).
#pragma once

#include <string>

#include "apps/cli.h"

namespace trainer {

// Rebuilds the run's model from OUTPUT_DIR/training_args.json (model_name gpt, model_config, the
// data's context length), loads OUTPUT_DIR/model.safetensors, and prints the prompt followed by
// max_new_tokens sampled bytes to stdout; returns 0. Throws InputError (one line) for a missing
// folder or file, a run of another model, or weights that do not fit the configuration.
int generate_text(const cli::GenerateOptions& options);

}  // namespace trainer
