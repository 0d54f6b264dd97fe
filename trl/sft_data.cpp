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
#include "trl/records.h"

namespace trainer::trl {

namespace {

using Json = nlohmann::ordered_json;
constexpr int32_t kIgnoreIndex = -100;

// TRL's has_generation_markers: {% generation %} with any whitespace control.
bool has_generation_markers(const std::string& source) {
  static const std::regex markers(R"(\{%-?\s*generation\s*-?%\})");
  return std::regex_search(source, markers);
}

// SFTConfig as __post_init__ leaves it (bfd-requeue renamed), with the options TRL refuses
// whatever the data (TRL finds some only when it gets to them).
SftDataOptions checked_options(const SftDataOptions& options) {
  SftDataOptions o = options;
  if (o.packing_strategy == "bfd-requeue") {
    base::warn(
        "packing_strategy bfd-requeue has been renamed bfd_split and will be removed in TRL "
        "2.0; packing with bfd_split");
    o.packing_strategy = "bfd_split";
  }
  check_packing_strategy(o.packing_strategy);
  records::check_truncation(o.truncation_mode, o.max_length);
  if (o.packing && !o.max_length) {
    throw InputError(
        "packing needs a max_length, the length of the packed rows (TRL: When packing is "
        "enabled, `max_length` can't be `None`.)");
  }
  return o;
}

// What SFTTrainer decides from the first record before it prepares the rest.
struct Plan {
  SftShape shape = SftShape::kLanguageModeling;
  bool conversational = false, prompt_completion = false, completion_only_loss = false;
  std::string eos;  // add_eos's text (non-conversational data)
};

Plan plan_of(const std::vector<Json>& input, const SftDataOptions& o,
             const tokenizers::Tokenizer& tokenizer, const tokenizers::ChatTemplate* chat_template,
             const std::string& source) {
  const std::string first = records::row_name(source, 0);
  // SFTTrainer.__init__ looks at the records as they come (before the ChatML conversion).
  const bool conversational_sample = records::is_conversational(input[0]);
  Plan plan;
  plan.completion_only_loss = o.completion_only_loss.value_or(input[0].contains("prompt") &&
                                                              input[0].contains("completion"));
  Json converted = input[0];
  if (records::is_conversational_from_value(converted)) records::convert_to_chatml(converted);
  plan.shape = records::shape_of(converted, o.dataset_text_field, first);
  plan.conversational = plan.shape == SftShape::kConversational ||
                        plan.shape == SftShape::kConversationalPromptCompletion;
  plan.prompt_completion = plan.shape == SftShape::kPromptCompletion ||
                           plan.shape == SftShape::kConversationalPromptCompletion;
  if (o.assistant_only_loss && (!conversational_sample || !plan.conversational)) {
    throw InputError(fmt::format(
        "{}: assistant_only_loss needs conversational data ('messages', or 'prompt' and "
        "'completion' lists of messages){} (TRL: You set `assistant_only_loss=True`, but the "
        "dataset is not conversational)",
        first,
        records::is_conversational_from_value(input[0])
            ? ", and TRL checks 'conversations' of {from, value} before it converts them: give "
              "'messages' of {role, content}"
            : ""));
  }
  return plan;
}

// The checks that follow the shape's: the template conversational data need (with {% generation
// %} blocks for assistant_only_loss), and add_eos's text for the others.
void check_template_and_eos(Plan& plan, const SftDataOptions& o,
                            const tokenizers::Tokenizer& tokenizer,
                            const tokenizers::ChatTemplate* chat_template,
                            const std::string& first) {
  if (plan.conversational) {
    records::require_chat_template(chat_template, tokenizer, first, shape_name(plan.shape));
  }
  if (o.assistant_only_loss && !has_generation_markers(chat_template->source())) {
    throw InputError(fmt::format(
        "assistant_only_loss needs a chat template with {{% generation %}} blocks around the "
        "assistant's tokens, and {} has none (TRL swaps in its own training template for the "
        "model families it knows, and refuses the others); give a training template with "
        "chat_template_path, such as TRL's chat_templates/*_training.jinja",
        chat_template->name()));
  }
  if (!plan.conversational) {
    plan.eos = records::eos_text(o.eos_token, tokenizer, first, shape_name(plan.shape), "texts");
  }
}

// One record's ids, its completion's start (prompt-completion data; -1 otherwise) and its
// assistant mask (assistant_only_loss), as TRL's tokenize_fn makes them.
struct Tokenized {
  std::vector<int32_t> ids;
  int64_t prompt_length = -1;
  std::vector<int8_t> assistant;
};

Tokenized tokenized_row(const Json& row, const Plan& plan, const SftDataOptions& o,
                        const tokenizers::Tokenizer& tokenizer,
                        const tokenizers::ChatTemplate* chat, size_t i,
                        records::PrefixMisses& misses, const std::string& at) {
  const records::TemplateInputs inputs =
      records::template_inputs(row, o.eos_token, at);  // tools parsed for every record
  Tokenized out;
  std::vector<int8_t>* mask = o.assistant_only_loss ? &out.assistant : nullptr;
  if (plan.prompt_completion) {
    Json completion = row["completion"];
    if (!plan.conversational) {
      // add_eos: `if dataset_text_field in example and not text.endswith(eos)` comes first (the
      // EOS then goes on that text, which prompt-completion data does not read), `elif
      // "completion" in example`. A null text counts as none (TRL fails on None.endswith).
      const auto text = row.find(o.dataset_text_field);
      const bool text_takes_eos = text != row.end() && text->is_string() &&
                                  !base::ends_with(text->get_ref<const std::string&>(), plan.eos);
      std::string& c = completion.get_ref<std::string&>();
      if (!text_takes_eos && !base::ends_with(c, plan.eos)) c += plan.eos;
    }
    const std::vector<int32_t> prompt_ids =
        records::prompt_ids(tokenizer, chat, row["prompt"], inputs, at);
    out.ids = records::prompt_completion_ids(tokenizer, chat, row["prompt"], completion, inputs,
                                             mask, at);
    const size_t common = records::common_prefix_length(prompt_ids, out.ids);
    misses.note(i, prompt_ids, common, tokenizer);
    out.prompt_length = static_cast<int64_t>(common);
  } else if (plan.conversational) {
    out.ids = records::chat_ids(*chat, tokenizer, row["messages"], inputs, false, mask, at);
  } else {
    std::string text = row[o.dataset_text_field].get<std::string>();
    if (!base::ends_with(text, plan.eos)) text += plan.eos;
    out.ids = tokenizer.encode(text, /*add_special_tokens=*/true);
  }
  if (mask && std::find(out.assistant.begin(), out.assistant.end(), 1) == out.assistant.end()) {
    throw InputError(fmt::format(
        "{}: You're using `assistant_only_loss=True`, but this example has no assistant "
        "tokens (TRL's RuntimeError): the chat template's {{% generation %}} blocks mark none "
        "of its tokens; give the row an assistant message, or use a template with "
        "{{% generation %}} around the assistant's turns",
        at));
  }
  return out;
}

// TRL's build_labels: the ids, -100 where a mask that applies is 0 (before the completion with
// completion_only_loss, outside the assistant's tokens with assistant_only_loss).
SftRow labelled(Tokenized t, const Plan& plan, const SftDataOptions& o) {
  SftRow row;
  row.labels = t.ids;
  for (size_t k = 0; k < row.labels.size(); ++k) {
    const bool outside_completion = plan.completion_only_loss && t.prompt_length >= 0 &&
                                    static_cast<int64_t>(k) < t.prompt_length;
    const bool outside_assistant = o.assistant_only_loss && t.assistant[k] == 0;
    if (outside_completion || outside_assistant) row.labels[k] = kIgnoreIndex;
  }
  row.input_ids = std::move(t.ids);
  return row;
}

// Without packing and with a max_length: each row truncated as truncation_mode says, then the
// rows left without a label (a prompt alone filling max_length) dropped, as TRL drops them.
void truncate_and_drop(std::vector<SftRow>& rows, const SftDataOptions& o, SftData& data) {
  const auto n = static_cast<size_t>(*o.max_length);
  for (SftRow& row : rows) {
    if (row.input_ids.size() <= n) continue;
    if (o.truncation_mode == "keep_start") {
      row.input_ids.resize(n);
      row.labels.resize(n);
    } else {
      row.input_ids.erase(row.input_ids.begin(), row.input_ids.end() - n);
      row.labels.erase(row.labels.begin(), row.labels.end() - n);
    }
  }
  const size_t before = rows.size();
  rows.erase(std::remove_if(rows.begin(), rows.end(),
                            [](const SftRow& row) {
                              return std::all_of(row.labels.begin(), row.labels.end(),
                                                 [](int32_t l) { return l == kIgnoreIndex; });
                            }),
             rows.end());
  data.dropped = static_cast<int64_t>(before - rows.size());
}

}  // namespace

SftData prepare_sft_dataset(const std::vector<Json>& input, const tokenizers::Tokenizer& tokenizer,
                            const tokenizers::ChatTemplate* chat_template,
                            const SftDataOptions& options, const std::string& source) {
  const SftDataOptions o = checked_options(options);
  records::check_input(input, o.eos_token, tokenizer, source);
  Plan plan = plan_of(input, o, tokenizer, chat_template, source);
  // _prepare_dataset: ChatML, when the first record is from/value; every record of the shape.
  std::vector<Json> rows = input;
  if (records::is_conversational_from_value(rows[0])) {
    for (Json& row : rows) records::convert_to_chatml(row);
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    records::check_shape(rows[i], plan.shape, o.dataset_text_field, records::row_name(source, i),
                         i == 0);
  }
  check_template_and_eos(plan, o, tokenizer, chat_template, records::row_name(source, 0));

  SftData data;
  data.examples = static_cast<int64_t>(rows.size());
  data.shape = plan.shape;
  records::PrefixMisses misses;
  std::vector<SftRow> prepared;
  prepared.reserve(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    prepared.push_back(labelled(tokenized_row(rows[i], plan, o, tokenizer, chat_template, i, misses,
                                              records::row_name(source, i)),
                                plan, o));
    if (o.max_length && static_cast<int64_t>(prepared.back().input_ids.size()) > *o.max_length) {
      ++data.truncated;
    }
  }
  misses.warn(source, rows.size(), "the tokenized prompt+completion", "the completion starts");
  if (o.max_length && !o.packing) truncate_and_drop(prepared, o, data);
  data.rows = o.packing ? pack_rows(std::move(prepared), *o.max_length, o.packing_strategy)
                        : std::move(prepared);
  for (const SftRow& row : data.rows) data.tokens += static_cast<int64_t>(row.input_ids.size());
  return data;
}

}  // namespace trainer::trl
