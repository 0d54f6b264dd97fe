// GRPO's prompts prepared as GRPOTrainer's _tokenize_prompts does it, and GRPOConfig's
// generation plan.
#include "trl/grpo_data.h"

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/tokenizers/chat_template.h"
#include "lib/tokenizers/tokenizer.h"

namespace trainer::trl {

GrpoData prepare_grpo_dataset(const std::vector<nlohmann::ordered_json>& input,
                              const tokenizers::Tokenizer& tokenizer,
                              const tokenizers::ChatTemplate* chat, const GrpoDataOptions& options,
                              const std::string& source) {
  if (input.empty()) throw InputError(fmt::format("{}: no records", source));
  GrpoData data;
  records::TemplateInputs inputs;
  inputs.kwargs = options.chat_template_kwargs.is_object() ? options.chat_template_kwargs
                                                           : nlohmann::ordered_json::object();
  for (size_t i = 0; i < input.size(); ++i) {
    const nlohmann::ordered_json& record = input[i];
    const std::string where = records::row_name(source, i);
    const nlohmann::ordered_json* prompt =
        record.is_object() ? records::value_of(record, "prompt") : nullptr;
    if (!prompt) {
      throw InputError(fmt::format(
          "{}: GRPO takes prompt-only data, a \"prompt\" column (a text or a conversation); the "
          "record has {}",
          where, record.is_object() ? records::columns_of(record) : "no columns"));
    }
    const bool conversational =
        records::is_conversational(nlohmann::ordered_json{{"prompt", *prompt}});
    if (i == 0) {
      data.conversational = conversational;
      if (conversational) records::require_chat_template(chat, tokenizer, where, "conversational");
    }
    if (!conversational && !prompt->is_string()) {
      throw InputError(fmt::format(
          "{}: \"prompt\" is {}; GRPO's prompt is a text or a list of {{role, content}} "
          "messages",
          where, prompt->type_name()));
    }
    if (conversational != data.conversational) {
      throw InputError(
          fmt::format("{}: the prompt is {} while row 1's is {} (every prompt must be alike)",
                      where, conversational ? "a conversation" : "a text",
                      data.conversational ? "a conversation" : "a text"));
    }
    GrpoRow row;
    row.prompt_ids = records::prompt_ids(tokenizer, chat, *prompt, inputs, where);
    if (row.prompt_ids.empty()) {
      throw InputError(fmt::format("{}: the prompt gives no tokens", where));
    }
    row.record = record.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    data.tokens += static_cast<int64_t>(row.prompt_ids.size());
    data.rows.push_back(std::move(row));
  }
  data.examples = static_cast<int64_t>(input.size());
  return data;
}

GenerationPlan grpo_generation_plan(int64_t per_device_train_batch_size, int64_t processes,
                                    int64_t gradient_accumulation_steps,
                                    std::optional<int64_t> generation_batch_size,
                                    std::optional<int64_t> steps_per_generation,
                                    int64_t num_generations) {
  GenerationPlan plan;
  const int64_t global = per_device_train_batch_size * processes;
  if (generation_batch_size && steps_per_generation) {
    throw InputError(
        "argument generation_batch_size: 'generation_batch_size' and 'steps_per_generation' can "
        "not be both configured at the same time");
  }
  if (generation_batch_size) {
    if (*generation_batch_size % global != 0) {
      throw InputError(fmt::format(
          "argument generation_batch_size: generation_batch_size ({}) must be divisible by the "
          "global batch size ({})",
          *generation_batch_size, global));
    }
    plan.generation_batch_size = *generation_batch_size;
    plan.steps_per_generation = *generation_batch_size / global;
  } else {
    plan.steps_per_generation = steps_per_generation.value_or(gradient_accumulation_steps);
    plan.generation_batch_size = global * plan.steps_per_generation;
  }
  if (plan.generation_batch_size % num_generations != 0) {
    throw InputError(
        fmt::format("argument num_generations: generation_batch_size ({}) must be divisible by "
                    "num_generations ({})",
                    plan.generation_batch_size, num_generations));
  }
  return plan;
}

}  // namespace trainer::trl
