// DPOTrainer's data preparation (trl/trainer/dpo_trainer.py: _prepare_dataset's maps in order:
// extract_prompt, EOS, tokenize, then the filter of prompts that fill max_length), with each
// record's shape checked first.
#include "trl/dpo_data.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"
#include "lib/base/utf8.h"
#include "lib/base/warn.h"
#include "lib/tokenizers/chat_template.h"
#include "lib/tokenizers/tokenizer.h"
#include "trl/records.h"

namespace trainer::trl {

namespace {

using Json = nlohmann::ordered_json;
using records::columns_of;
using records::value_of;

// How preference data is read (`format`: whose, and whether an implicit prompt is extracted).
struct PreferenceFormat {
  const char* trainer;  // "DPOTrainer", "RewardTrainer"
  bool extract;         // an implicit prompt is the common start of chosen and rejected
};

std::string shapes_text(const PreferenceFormat& format) {
  return fmt::format(
      "TRL's {} reads 'chosen' and 'rejected' (two texts, or two lists of {{role, content}} "
      "messages), with a 'prompt' of the same kind, or without one when row 1 has none{}",
      format.trainer, format.extract ? " (the prompt is then their common start)" : "");
}

const char* kind_of(DpoShape shape) {
  return shape == DpoShape::kPlain ? "a text" : "a list of messages";
}

// The kind of `column` of `record`: a text, or a non-empty list of message objects (the first
// with a "role", as TRL's is_conversational looks at it). InputError naming `where` otherwise.
DpoShape column_shape(const Json& record, const std::string& column, const std::string& where,
                      const PreferenceFormat& format) {
  const Json* value = value_of(record, column);
  if (!value) {
    throw InputError(fmt::format("{} has no '{}' (its columns: {}); {}", where, column,
                                 columns_of(record), shapes_text(format)));
  }
  if (value->is_string()) return DpoShape::kPlain;
  if (!value->is_array()) {
    throw InputError(fmt::format("{}: '{}' is {} ({}), not a text or a list of messages", where,
                                 column, base::a_type(*value), base::shown(*value)));
  }
  if (value->empty()) {
    throw InputError(fmt::format(
        "{}: '{}' is an empty list; a conversation holds at least one message", where, column));
  }
  for (size_t i = 0; i < value->size(); ++i) {
    const Json& message = (*value)[i];
    if (message.is_object() && (i > 0 || message.contains("role"))) continue;
    const bool sharegpt = message.is_object() && message.contains("from");
    throw InputError(fmt::format(
        "{}: message {} of '{}' is {} ({}), not a message (an object with 'role' and "
        "'content'){}",
        where, i + 1, column, base::a_type(message), base::shown(message),
        sharegpt ? fmt::format("; TRL's {} does not convert ShareGPT's {{from, value}} messages "
                               "(it fails on them): give {{role, content}}",
                               format.trainer)
                 : std::string()));
  }
  return DpoShape::kConversational;
}

// The record's shape, its columns checked: "prompt" (unless `implicit`), "chosen", "rejected".
DpoShape row_shape(const Json& record, bool implicit, const std::string& where,
                   const PreferenceFormat& format) {
  if (!value_of(record, "chosen") && !value_of(record, "rejected") &&
      (implicit || !value_of(record, "prompt"))) {
    throw InputError(
        fmt::format("{} is no shape of preference data TRL knows (its columns: {}); {}", where,
                    columns_of(record), shapes_text(format)));
  }
  std::vector<std::pair<const char*, DpoShape>> shapes;
  for (const char* column : {"prompt", "chosen", "rejected"}) {
    if (implicit && column == std::string("prompt")) continue;
    shapes.emplace_back(column, column_shape(record, column, where, format));
  }
  for (const auto& [column, shape] : shapes) {
    if (shape == shapes[0].second) continue;
    throw InputError(fmt::format(
        "{}: '{}' is {} and '{}' {}; a row's prompt, chosen and rejected are all texts or all "
        "lists of messages (TRL's is_conversational looks at one of them, which one left to "
        "Python's set order)",
        where, shapes[0].first, kind_of(shapes[0].second), column, kind_of(shape)));
  }
  return shapes[0].second;
}

// Byte offsets of the code points of `text` (Python's str indices), then its size.
std::vector<size_t> code_points(const std::string& text) {
  std::vector<size_t> starts;
  for (size_t at = 0; at < text.size(); at += base::utf8_at(text, at).length) {
    starts.push_back(at);
  }
  starts.push_back(text.size());
  return starts;
}

// TRL's extract_prompt, in place: "prompt" the common start of "chosen" and "rejected", which
// keep the rest. Python's index rules, including the loop variable left at the last index when
// no element differs, and index -1 (the last element) when the first differs and the chosen text
// ends with a space.
void extract_prompt(Json& record, DpoShape shape, const std::string& where) {
  Json& chosen = record["chosen"];
  Json& rejected = record["rejected"];
  if (shape == DpoShape::kConversational) {
    const size_t n = std::min(chosen.size(), rejected.size());  // both non-empty (column_shape)
    size_t idx = 0;
    // Python's dict equality: key order does not matter (nlohmann::json's maps are sorted).
    while (idx < n && nlohmann::json(chosen[idx]) == nlohmann::json(rejected[idx])) ++idx;
    if (idx == n) --idx;  // no difference: the loop variable stays at its last value
    if (idx == 0) {
      throw InputError(fmt::format(
          "{}: 'chosen' and 'rejected' share no first message{}, so the prompt TRL's "
          "extract_prompt finds in them (their common start) is empty, which TRL fails on; give "
          "a 'prompt' column, or pairs that start with the same turns",
          where, n == 1 && chosen[0] == rejected[0] ? " before their last" : ""));
    }
    const auto at = static_cast<std::ptrdiff_t>(idx);
    Json prompt(Json::value_t::array);
    prompt.get_ref<Json::array_t&>().assign(chosen.begin(), chosen.begin() + at);
    chosen.erase(chosen.begin(), chosen.begin() + at);
    rejected.erase(rejected.begin(), rejected.begin() + at);
    record["prompt"] = std::move(prompt);  // last: a new key moves the record's values
    return;
  }
  const std::string c = chosen.get<std::string>();
  const std::string r = rejected.get<std::string>();
  const std::vector<size_t> cp = code_points(c), rp = code_points(r);
  const size_t nc = cp.size() - 1, nr = rp.size() - 1, n = std::min(nc, nr);
  if (n == 0) {
    throw InputError(fmt::format(
        "{}: '{}' is an empty text, and TRL's extract_prompt (row 1 has no 'prompt') fails on "
        "it (UnboundLocalError) as it looks for the common start of chosen and rejected",
        where, nc == 0 ? "chosen" : "rejected"));
  }
  auto char_of = [](const std::string& s, const std::vector<size_t>& p, size_t i) {
    return std::string_view(s).substr(p[i], p[i + 1] - p[i]);
  };
  std::ptrdiff_t idx = 0;
  bool differ = false;
  for (; idx < static_cast<std::ptrdiff_t>(n); ++idx) {
    const auto i = static_cast<size_t>(idx);
    if (char_of(c, cp, i) == char_of(r, rp, i)) continue;
    const size_t before = idx == 0 ? nc - 1 : i - 1;  // chosen[idx - 1]: -1 is the last
    if (char_of(c, cp, before) == " ") --idx;
    differ = true;
    break;
  }
  if (!differ) idx = static_cast<std::ptrdiff_t>(n) - 1;
  // s[:idx] and s[idx:], a negative idx counted from each text's own end.
  const size_t kc = idx < 0 ? nc - 1 : static_cast<size_t>(idx);
  const size_t kr = idx < 0 ? nr - 1 : static_cast<size_t>(idx);
  chosen = c.substr(cp[kc]);
  rejected = r.substr(rp[kr]);
  record["prompt"] = c.substr(0, cp[kc]);  // last: a new key moves the record's values
}

}  // namespace

PreferenceRecords preference_records(const std::vector<Json>& input, const std::string& source,
                                     const char* trainer, bool extract) {
  const PreferenceFormat format{trainer, extract};
  PreferenceRecords data;
  // `"prompt" not in first_example`: `datasets` gives every record every column (null where a
  // record lacks it), so one record with a prompt makes the prompt explicit.
  data.implicit_prompt = !input[0].contains("prompt");
  data.rows.reserve(input.size());
  for (size_t i = 0; i < input.size(); ++i) {
    const std::string at = records::row_name(source, i);
    if (!input[i].is_object()) {
      throw InputError(fmt::format("{} is {} ({}), not a record (a JSON object)", at,
                                   base::a_type(input[i]), base::shown(input[i])));
    }
    const DpoShape shape = row_shape(input[i], data.implicit_prompt, at, format);
    if (i == 0) {
      data.shape = shape;
    } else if (shape != data.shape) {
      throw InputError(fmt::format(
          "{} is {} preference data ('chosen' is {}), and row 1 is {} ('chosen' is {}); every "
          "row holds what row 1 holds",
          at, dpo_shape_name(shape), kind_of(shape), dpo_shape_name(data.shape),
          kind_of(data.shape)));
    }
    Json row = input[i];
    if (data.implicit_prompt && extract) extract_prompt(row, shape, at);
    data.rows.push_back(std::move(row));
  }
  return data;
}

namespace {

// One pair tokenized (add_eos on plain completions first: `eos` not empty) and cut where the
// prompt stops starting both sequences.
DpoRow tokenized_pair(Json& row, const std::string& eos, const tokenizers::Tokenizer& tokenizer,
                      const tokenizers::ChatTemplate* chat, size_t i, records::PrefixMisses& misses,
                      const std::string& at) {
  const records::TemplateInputs inputs = records::template_inputs(row, std::nullopt, at);
  if (!eos.empty()) {
    for (const char* column : {"chosen", "rejected"}) {
      std::string& text = row[column].get_ref<std::string&>();
      if (!base::ends_with(text, eos)) text += eos;
    }
  }
  const Json& prompt = row["prompt"];
  const std::vector<int32_t> prompt_ids = records::prompt_ids(tokenizer, chat, prompt, inputs, at);
  const std::vector<int32_t> chosen_ids =
      records::prompt_completion_ids(tokenizer, chat, prompt, row["chosen"], inputs, nullptr, at);
  const std::vector<int32_t> rejected_ids =
      records::prompt_completion_ids(tokenizer, chat, prompt, row["rejected"], inputs, nullptr, at);
  const size_t prompt_len = std::min(records::common_prefix_length(prompt_ids, chosen_ids),
                                     records::common_prefix_length(prompt_ids, rejected_ids));
  misses.note(i, prompt_ids, prompt_len, tokenizer);
  DpoRow out;
  const auto cut = static_cast<std::ptrdiff_t>(prompt_len);
  out.prompt_ids.assign(prompt_ids.begin(), prompt_ids.begin() + cut);
  out.chosen_ids.assign(chosen_ids.begin() + cut, chosen_ids.end());
  out.rejected_ids.assign(rejected_ids.begin() + cut, rejected_ids.end());
  return out;
}

}  // namespace

const char* dpo_shape_name(DpoShape shape) {
  return shape == DpoShape::kPlain ? "plain" : "conversational";
}

DpoData prepare_dpo_dataset(const std::vector<Json>& input, const tokenizers::Tokenizer& tokenizer,
                            const tokenizers::ChatTemplate* chat_template,
                            const DpoDataOptions& options, const std::string& source) {
  records::check_truncation(options.truncation_mode, options.max_length);
  records::check_input(input, options.eos_token, tokenizer, source);
  DpoData data;
  data.examples = static_cast<int64_t>(input.size());
  PreferenceRecords shaped = preference_records(input, source, "DPOTrainer", /*extract=*/true);
  data.shape = shaped.shape;
  data.implicit_prompt = shaped.implicit_prompt;
  std::vector<Json>& rows = shaped.rows;
  const std::string first = records::row_name(source, 0);
  const bool conversational = data.shape == DpoShape::kConversational;
  if (conversational)
    records::require_chat_template(chat_template, tokenizer, first, "conversational");
  // add_eos (plain data): the eos token's text ends chosen and rejected.
  const std::string eos =
      conversational ? ""
                     : records::eos_text(options.eos_token, tokenizer, first,
                                         "plain preference data", "chosen and rejected texts");
  records::PrefixMisses misses;
  for (size_t i = 0; i < rows.size(); ++i) {
    DpoRow out = tokenized_pair(rows[i], eos, tokenizer, chat_template, i, misses,
                                records::row_name(source, i));
    // keep_start with a prompt that fills max_length leaves no completion token: TRL's filter.
    if (options.max_length && options.truncation_mode == "keep_start" &&
        static_cast<int64_t>(out.prompt_ids.size()) >= *options.max_length) {
      ++data.dropped;
      continue;
    }
    data.identical += out.chosen_ids == out.rejected_ids;
    data.tokens += static_cast<int64_t>(2 * out.prompt_ids.size() + out.chosen_ids.size() +
                                        out.rejected_ids.size());
    data.rows.push_back(std::move(out));
  }
  if (data.rows.empty() && data.dropped > 0) {
    // The cause, not the symptom ("the training dataset is empty").
    throw InputError(fmt::format(
        "{}: every one of the {} pairs has a prompt of max_length {} tokens or more, and TRL "
        "drops such pairs under keep_start (they would keep no completion token): raise "
        "max_length, or give truncation_mode keep_end",
        source, data.dropped, *options.max_length));
  }
  misses.warn(source, rows.size(), "the tokenized prompt+chosen or prompt+rejected",
              "the completions start");
  return data;
}

}  // namespace trainer::trl
