// config.json's rotary embedding (hf_config.cpp's reader of it): internal to lib/models.
#pragma once

#include <string>

#include "lib/base/json_fields.h"
#include "lib/models/hf_config.h"

namespace trainer::models {

// The rotary embedding, read from either spelling: the Hub's rope_scaling (which wins when given,
// as in Transformers) or rope_parameters, with rope_theta and partial_rotary_factor beside them
// (gemma3_text: one per layer type, its sliding layers' base rope_local_base_freq before
// Transformers 5, a flat rope_scaling its full-attention layers'). Sets c.rope, c.local_rope and
// c.rotary_dim; c.json keeps what Transformers 5 writes: rope_parameters, standardized, and none
// of the old keys. `c` must have its model_type, head_dim, max_position_embeddings and (phi3) its
// original_max_position_embeddings read. Throws InputError naming the key.
void read_rope(base::JsonFields& f, const std::string& source, HfConfig& c, double default_theta,
               double default_local_theta);

}  // namespace trainer::models
