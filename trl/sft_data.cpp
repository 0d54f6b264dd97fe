// SFTTrainer's data preparation (trl/trainer/sft_trainer.py: the checks of __init__, then
// _prepare_dataset's maps in order: ChatML, EOS, tokenize, labels, truncate and drop, pack).
#include "trl/sft_data.h"

#include <algorithm>
#include <regex>
#include <utility>

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/text.h"
#include "lib/base/warn.h"
#include "lib/tokenizers/chat_template.h"
#include "lib/tokenizers/tokenizer.h"
#include "trl/sft_records.h"

namespace trainer::trl {

namespace {

using Json = nlohmann::ordered_json;
constexpr int32_t kIgnoreIndex = -100;

// TRL's has_generation_markers: {% generation %} with any whitespace control.
bool has_generation_markers(const std::string& source) {
  static const std::regex markers(R"(\{%-?\s*generation\s*-?%\})");
  return std::regex_search(source, markers);
}

// The options TRL refuses, whatever the data (TRL finds some only when it gets to them).
void check_options(const SftDataOptions& options) {
  if (options.truncation_mode != "keep_start" && options.truncation_mode != "keep_end") {
    throw InputError(fmt::format(
        "truncation_mode '{}' is not keep_start or keep_end (TRL: Unsupported truncation mode)",
        options.truncation_mode));
  }
  if (options.max_length && *options.max_length < 1) {
    throw InputError(fmt::format(
        "max_length {} is not a number of tokens; give one of at least 1, or null for no "
        "truncation",
        *options.max_length));
  }
  if (options.packing && !options.max_length) {
    throw InputError(
        "packing needs a max_length, the length of the packed rows (TRL: When packing is "
        "enabled, `max_length` can't be `None`.)");
  }
}

// The first prompt that is not a prefix of its prompt + completion, and how many are not.
struct PrefixMisses {
  int64_t count = 0;
  int64_t first_row = 0;
  std::string left_out;  // the first one's prompt tokens past the common prefix, decoded
};

}  // namespace

const char* shape_name(SftShape shape) {
  switch (shape) {
    case SftShape::kLanguageModeling:
      return "language modeling";
    case SftShape::kConversational:
      return "conversational";
    case SftShape::kPromptCompletion:
      return "prompt-completion";
    case SftShape::kConversationalPromptCompletion:
      return "conversational prompt-completion";
  }
  return "unknown";
}

SftData prepare_sft_dataset(const std::vector<Json>& input, const tokenizers::Tokenizer& tokenizer,
                            const tokenizers::ChatTemplate* chat_template,
                            const SftDataOptions& options, const std::string& source) {
  SftDataOptions o = options;
  if (o.packing_strategy == "bfd-requeue") {  // SFTConfig.__post_init__
    base::warn(
        "packing_strategy bfd-requeue has been renamed bfd_split and will be removed in TRL "
        "2.0; packing with bfd_split");
    o.packing_strategy = "bfd_split";
  }
  check_packing_strategy(o.packing_strategy);
  check_options(o);
  auto where = [&](size_t i) { return fmt::format("{} row {}", source, i + 1); };
  if (input.empty()) throw InputError(fmt::format("{} holds no records", source));
  if (o.eos_token && !tokenizer.token_to_id(*o.eos_token)) {
    throw InputError(fmt::format(
        "eos_token '{}' is not in the vocabulary of the tokenizer {} (TRL requires the eos_token "
        "to be a token of it)",
        *o.eos_token, tokenizer.path()));
  }
  // SFTTrainer.__init__ looks at the records as they come (before the ChatML conversion).
  const bool conversational_sample = records::is_conversational(input[0]);
  const bool completion_only_loss = o.completion_only_loss.value_or(
      input[0].contains("prompt") && input[0].contains("completion"));
  const SftShape first_shape = [&] {
    Json first = input[0];
    if (records::is_conversational_from_value(first)) records::convert_to_chatml(first);
    return records::shape_of(first, o.dataset_text_field, where(0));
  }();
  const bool conversational = first_shape == SftShape::kConversational ||
                              first_shape == SftShape::kConversationalPromptCompletion;
  if (o.assistant_only_loss && (!conversational_sample || !conversational)) {
    throw InputError(fmt::format(
        "{}: assistant_only_loss needs conversational data ('messages', or 'prompt' and "
        "'completion' lists of messages){} (TRL: You set `assistant_only_loss=True`, but the "
        "dataset is not conversational)",
        where(0),
        records::is_conversational_from_value(input[0])
            ? ", and TRL checks 'conversations' of {from, value} before it converts them: give "
              "'messages' of {role, content}"
            : ""));
  }

  // _prepare_dataset: ChatML, when the first record is from/value.
  std::vector<Json> rows = input;
  if (records::is_conversational_from_value(rows[0])) {
    for (Json& row : rows) records::convert_to_chatml(row);
  }
  SftData data;
  data.examples = static_cast<int64_t>(rows.size());
  data.shape = first_shape;
  for (size_t i = 0; i < rows.size(); ++i) {
    records::check_shape(rows[i], data.shape, o.dataset_text_field, where(i), i == 0);
  }
  const bool prompt_completion = data.shape == SftShape::kPromptCompletion ||
                                 data.shape == SftShape::kConversationalPromptCompletion;
  if (conversational && !chat_template) {
    throw InputError(fmt::format(
        "{} is {}, but the tokenizer {} has no chat template (no chat_template.jinja, no "
        "chat_template in tokenizer_config.json); give one with chat_template_path",
        where(0), shape_name(data.shape), tokenizer.path()));
  }
  if (o.assistant_only_loss && !has_generation_markers(chat_template->source())) {
    throw InputError(fmt::format(
        "assistant_only_loss needs a chat template with {{% generation %}} blocks around the "
        "assistant's tokens, and {} has none (TRL swaps in its own training template for the "
        "model families it knows, and refuses the others); give a training template with "
        "chat_template_path, such as TRL's chat_templates/*_training.jinja",
        chat_template->name()));
  }
  // add_eos (non-conversational data): the eos token's text ends each text, or completion.
  std::string eos;
  if (!conversational) {
    if (o.eos_token) {
      eos = *o.eos_token;
    } else if (auto id = tokenizer.eos_token_id()) {
      eos = tokenizer.id_to_token(*id).value_or("");
    }
    if (eos.empty()) {
      throw InputError(fmt::format(
          "{} is {}, whose texts TRL ends with the tokenizer's eos_token, and the tokenizer {} "
          "has none; set eos_token",
          where(0), shape_name(data.shape), tokenizer.path()));
    }
  }

  PrefixMisses misses;
  std::vector<SftRow> prepared;
  prepared.reserve(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const Json& row = rows[i];
    const std::string at = where(i);
    const records::TemplateInputs inputs =
        records::template_inputs(row, o.eos_token, at);  // tools parsed for every record
    SftRow out;
    std::vector<int8_t> assistant;
    std::vector<int8_t>* mask = o.assistant_only_loss ? &assistant : nullptr;
    int64_t prompt_length = -1;  // prompt-completion: where the completion starts
    if (prompt_completion) {
      std::vector<int32_t> prompt_ids;
      if (conversational) {
        prompt_ids =
            records::chat_ids(*chat_template, tokenizer, row["prompt"], inputs, true, nullptr, at);
        Json both = row["prompt"];
        for (const Json& message : row["completion"]) both.push_back(message);
        out.input_ids = records::chat_ids(*chat_template, tokenizer, both, inputs, false, mask, at);
      } else {
        // add_eos: `if dataset_text_field in example and not text.endswith(eos)` comes first (the
        // EOS then goes on that text, which prompt-completion data does not read), `elif
        // "completion" in example`. A null text counts as none (TRL fails on None.endswith).
        const auto text = row.find(o.dataset_text_field);
        const bool text_takes_eos = text != row.end() && text->is_string() &&
                                    !base::ends_with(text->get_ref<const std::string&>(), eos);
        std::string completion = row["completion"].get<std::string>();
        if (!text_takes_eos && !base::ends_with(completion, eos)) completion += eos;
        const std::string& prompt = row["prompt"].get_ref<const std::string&>();
        prompt_ids = tokenizer.encode(prompt, /*add_special_tokens=*/true);
        out.input_ids = tokenizer.encode(prompt + completion, /*add_special_tokens=*/true);
      }
      // common_prefix_length
      size_t common = 0;
      while (common < prompt_ids.size() && common < out.input_ids.size() &&
             prompt_ids[common] == out.input_ids[common]) {
        ++common;
      }
      if (common < prompt_ids.size() && misses.count++ == 0) {
        misses.first_row = static_cast<int64_t>(i) + 1;
        misses.left_out = tokenizer.decode(std::vector<int32_t>(
            prompt_ids.begin() + static_cast<std::ptrdiff_t>(common), prompt_ids.end()));
      }
      prompt_length = static_cast<int64_t>(common);
    } else if (conversational) {
      out.input_ids =
          records::chat_ids(*chat_template, tokenizer, row["messages"], inputs, false, mask, at);
    } else {
      std::string text = row[o.dataset_text_field].get<std::string>();
      if (!base::ends_with(text, eos)) text += eos;
      out.input_ids = tokenizer.encode(text, /*add_special_tokens=*/true);
    }
    if (mask && std::find(assistant.begin(), assistant.end(), 1) == assistant.end()) {
      throw InputError(fmt::format(
          "{}: You're using `assistant_only_loss=True`, but this example has no assistant "
          "tokens (TRL's RuntimeError): the chat template's {{% generation %}} blocks mark none "
          "of its tokens; give the row an assistant message, or use a template with "
          "{{% generation %}} around the assistant's turns",
          at));
    }
    // build_labels: -100 where a mask that applies is 0.
    out.labels = out.input_ids;
    for (size_t t = 0; t < out.labels.size(); ++t) {
      const bool outside_completion =
          completion_only_loss && prompt_length >= 0 && static_cast<int64_t>(t) < prompt_length;
      const bool outside_assistant = mask && assistant[t] == 0;
      if (outside_completion || outside_assistant) out.labels[t] = kIgnoreIndex;
    }
    if (o.max_length && static_cast<int64_t>(out.input_ids.size()) > *o.max_length) {
      ++data.truncated;
    }
    prepared.push_back(std::move(out));
  }
  if (misses.count > 0) {
    base::warn(
        "{}: the tokenized prompt is not a prefix of the tokenized prompt+completion in {} of {} "
        "rows (first: row {}), usually because the chat template renders the prompt alone "
        "differently or because tokens merge across the boundary; as TRL does, the completion "
        "starts where they diverge, and the end of the prompt ({}) is left out of the training "
        "sequence",
        source, misses.count, rows.size(), misses.first_row, base::shown_text(misses.left_out));
  }

  if (o.max_length && !o.packing) {
    const auto n = static_cast<size_t>(*o.max_length);
    for (SftRow& row : prepared) {
      if (row.input_ids.size() <= n) continue;
      if (o.truncation_mode == "keep_start") {
        row.input_ids.resize(n);
        row.labels.resize(n);
      } else {
        row.input_ids.erase(row.input_ids.begin(), row.input_ids.end() - n);
        row.labels.erase(row.labels.begin(), row.labels.end() - n);
      }
    }
    // Rows left fully masked (a prompt alone filling max_length) contribute no loss: dropped.
    const size_t before = prepared.size();
    prepared.erase(std::remove_if(prepared.begin(), prepared.end(),
                                  [](const SftRow& row) {
                                    return std::all_of(row.labels.begin(), row.labels.end(),
                                                       [](int32_t l) { return l == kIgnoreIndex; });
                                  }),
                   prepared.end());
    data.dropped = static_cast<int64_t>(before - prepared.size());
  }
  data.rows = o.packing ? pack_rows(std::move(prepared), *o.max_length, o.packing_strategy)
                        : std::move(prepared);
  for (const SftRow& row : data.rows) data.tokens += static_cast<int64_t>(row.input_ids.size());
  return data;
}

}  // namespace trainer::trl
