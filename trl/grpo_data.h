// GRPOTrainer's data, torch-free: TRL's prompt-only records (a "prompt" text, or a conversation
// through the chat template with chat_template_kwargs) tokenized as GRPOTrainer tokenizes them (no
// truncation), each row keeping its record for the reward functions; and the generation plan
// GRPOConfig derives (generation_batch_size, steps_per_generation) with its refusals.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trl/records.h"

namespace trainer::trl {

// TRL's common data fields (unused: GRPO never cuts its prompts) and the template's variables.
struct GrpoDataOptions : TrlDataOptions {
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
};

struct GrpoRow {
  std::vector<int32_t> prompt_ids;
  std::string record;  // the record as read (compact JSON): the prompt and every other column
};

inline int64_t row_length(const GrpoRow& row) {
  return static_cast<int64_t>(row.prompt_ids.size());
}

struct GrpoData {
  std::vector<GrpoRow> rows;
  bool conversational = false;  // the prompts are conversations
  int64_t examples = 0;         // records read
  int64_t tokens = 0;           // prompt tokens over the rows
};

// Every record's "prompt" tokenized: a text with the tokenizer's special tokens, a conversation
// through `chat` with the generation prompt and `options.chat_template_kwargs` as variables
// (TRL decides which from the first record; every record must be alike). InputError naming the
// row for a record without a prompt, of the other shape, a conversation without a template, or a
// prompt that gives no tokens.
GrpoData prepare_grpo_dataset(const std::vector<nlohmann::ordered_json>& input,
                              const tokenizers::Tokenizer& tokenizer,
                              const tokenizers::ChatTemplate* chat, const GrpoDataOptions& options,
                              const std::string& source);

// GRPOConfig.__post_init__'s generation batch over `processes`: generation_batch_size and
// steps_per_generation, one from the other (steps_per_generation defaults to
// gradient_accumulation_steps), with TRL's refusals: both given, a generation batch that is not
// a multiple of the global batch, or of num_generations.
struct GenerationPlan {
  int64_t generation_batch_size = 0;  // over every process
  int64_t steps_per_generation = 0;
};
GenerationPlan grpo_generation_plan(int64_t per_device_train_batch_size, int64_t processes,
                                    int64_t gradient_accumulation_steps,
                                    std::optional<int64_t> generation_batch_size,
                                    std::optional<int64_t> steps_per_generation,
                                    int64_t num_generations);

}  // namespace trainer::trl
