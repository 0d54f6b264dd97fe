// RewardTrainer's data preparation (trl/trainer/reward_trainer.py: _prepare_dataset's maps in
// order: the EOS of plain data, tokenize, then the max_length filter), on DPO's checks of a
// preference record's shape.
#include "trl/reward_data.h"

#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"
#include "lib/tokenizers/chat_template.h"
#include "lib/tokenizers/tokenizer.h"
#include "trl/records.h"

namespace trainer::trl {
namespace {

using Json = nlohmann::ordered_json;

// The record's margin: a finite number, when the data has margins.
double margin_of(const Json& row, const std::string& at) {
  const Json* margin = records::value_of(row, "margin");
  if (!margin) {
    throw InputError(fmt::format(
        "{} has no 'margin', which an earlier row has; TRL's RewardTrainer subtracts every "
        "pair's margin from its reward gap (give every row one, or none)",
        at));
  }
  if (!margin->is_number() || !std::isfinite(margin->get<double>())) {
    throw InputError(fmt::format("{}: 'margin' is {} ({}), not a finite number", at,
                                 base::a_type(*margin), base::shown(*margin)));
  }
  return margin->get<double>();
}

// A plain side that is empty: TRL would score the EOS (or the prompt) alone.
void check_not_empty(const Json& row, const std::string& at) {
  for (const char* column : {"chosen", "rejected"}) {
    const Json& side = row[column];
    if (side.is_string() && side.get_ref<const std::string&>().empty()) {
      throw InputError(fmt::format(
          "{}: '{}' is an empty text: the reward model would score {} alone; give every pair "
          "two completions",
          at, column, row.contains("prompt") ? "the prompt and the EOS" : "the EOS"));
    }
  }
}

}  // namespace

RewardData prepare_reward_dataset(const std::vector<Json>& input,
                                  const tokenizers::Tokenizer& tokenizer,
                                  const tokenizers::ChatTemplate* chat_template,
                                  const RewardDataOptions& options, const std::string& source) {
  records::check_input(input, options.eos_token, tokenizer, source);
  RewardData data;
  data.examples = static_cast<int64_t>(input.size());
  PreferenceRecords shaped = preference_records(input, source, "RewardTrainer", /*extract=*/false);
  data.shape = shaped.shape;
  data.implicit_prompt = shaped.implicit_prompt;
  for (const Json& row : shaped.rows) {
    data.margins = data.margins || records::value_of(row, "margin") != nullptr;
  }
  const std::string first = records::row_name(source, 0);
  const bool conversational = data.shape == DpoShape::kConversational;
  if (conversational) {
    records::require_chat_template(chat_template, tokenizer, first, "conversational");
  }
  const std::string eos =
      conversational ? ""
                     : records::eos_text(options.eos_token, tokenizer, first,
                                         "plain preference data", "chosen and rejected texts");
  for (size_t i = 0; i < shaped.rows.size(); ++i) {
    Json& row = shaped.rows[i];
    const std::string at = records::row_name(source, i);
    check_not_empty(row, at);
    const records::TemplateInputs inputs = records::template_inputs(row, std::nullopt, at);
    RewardRow out;
    if (data.margins) out.margin = margin_of(row, at);
    if (!eos.empty()) {
      for (const char* column : {"chosen", "rejected"}) {
        std::string& text = row[column].get_ref<std::string&>();
        if (!base::ends_with(text, eos)) text += eos;
      }
    }
    // No prompt: the whole sequence is the completion alone.
    const Json prompt = row.contains("prompt") ? row["prompt"]
                        : conversational       ? Json::array()
                                               : Json("");
    out.chosen_ids = records::prompt_completion_ids(tokenizer, chat_template, prompt, row["chosen"],
                                                    inputs, nullptr, at);
    out.rejected_ids = records::prompt_completion_ids(tokenizer, chat_template, prompt,
                                                      row["rejected"], inputs, nullptr, at);
    if (options.max_length && row_length(out) > *options.max_length) {
      ++data.dropped;
      continue;
    }
    data.tokens += static_cast<int64_t>(out.chosen_ids.size() + out.rejected_ids.size());
    data.rows.push_back(std::move(out));
  }
  if (data.rows.empty() && data.dropped > 0) {
    throw InputError(fmt::format(
        "{}: every one of the {} pairs has a side longer than max_length {} tokens, and TRL's "
        "RewardTrainer drops such pairs (it never cuts them): raise max_length",
        source, data.examples, options.max_length.value_or(0)));
  }
  return data;
}

}  // namespace trainer::trl
