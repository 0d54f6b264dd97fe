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
#include "trl/sft_records.h"

namespace trainer::trl {

namespace {

using Json = nlohmann::ordered_json;

constexpr const char* kShapes =
    "TRL's DPOTrainer reads 'chosen' and 'rejected' (two texts, or two lists of {role, content} "
    "messages), with a 'prompt' of the same kind, or without one when row 1 has none (the prompt "
    "is then their common start)";

// The value of `key`, or nullptr when the record lacks it or holds null there (`datasets` fills a
// column a record lacks with null).
const Json* value_of(const Json& record, const std::string& key) {
  auto found = record.find(key);
  return found == record.end() || found->is_null() ? nullptr : &*found;
}

std::string columns_of(const Json& record) {
  std::string out;
  for (const auto& item : record.items()) {
    if (item.value().is_null()) continue;
    out += (out.empty() ? "'" : ", '") + item.key() + "'";
  }
  return out.empty() ? "none" : out;
}

const char* kind_of(DpoShape shape) {
  return shape == DpoShape::kPlain ? "a text" : "a list of messages";
}

// The kind of `column` of `record`: a text, or a non-empty list of message objects (the first
// with a "role", as TRL's is_conversational looks at it). InputError naming `where` otherwise.
DpoShape column_shape(const Json& record, const std::string& column, const std::string& where) {
  const Json* value = value_of(record, column);
  if (!value) {
    throw InputError(fmt::format("{} has no '{}' (its columns: {}); {}", where, column,
                                 columns_of(record), kShapes));
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
        sharegpt ? "; TRL's DPOTrainer does not convert ShareGPT's {from, value} messages (it "
                   "fails on them): give {role, content}"
                 : ""));
  }
  return DpoShape::kConversational;
}

// The record's shape, its columns checked: "prompt" (unless `implicit`), "chosen", "rejected".
DpoShape row_shape(const Json& record, bool implicit, const std::string& where) {
  if (!value_of(record, "chosen") && !value_of(record, "rejected") &&
      (implicit || !value_of(record, "prompt"))) {
    throw InputError(
        fmt::format("{} is no shape of preference data TRL knows (its columns: {}); {}", where,
                    columns_of(record), kShapes));
  }
  std::vector<std::pair<const char*, DpoShape>> shapes;
  for (const char* column : {"prompt", "chosen", "rejected"}) {
    if (implicit && column == std::string("prompt")) continue;
    shapes.emplace_back(column, column_shape(record, column, where));
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

void check_options(const DpoDataOptions& options) {
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
}

size_t common_prefix_length(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

}  // namespace

const char* dpo_shape_name(DpoShape shape) {
  return shape == DpoShape::kPlain ? "plain" : "conversational";
}

DpoData prepare_dpo_dataset(const std::vector<Json>& input, const tokenizers::Tokenizer& tokenizer,
                            const tokenizers::ChatTemplate* chat_template,
                            const DpoDataOptions& options, const std::string& source) {
  check_options(options);
  auto where = [&](size_t i) { return fmt::format("{} row {}", source, i + 1); };
  if (input.empty()) throw InputError(fmt::format("{} holds no records", source));
  if (options.eos_token && !tokenizer.token_to_id(*options.eos_token)) {
    throw InputError(fmt::format(
        "eos_token '{}' is not in the vocabulary of the tokenizer {} (TRL requires the eos_token "
        "to be a token of it)",
        *options.eos_token, tokenizer.path()));
  }
  DpoData data;
  data.examples = static_cast<int64_t>(input.size());
  // `"prompt" not in first_example`: `datasets` gives every record every column (null where a
  // record lacks it), so one record with a prompt makes the prompt explicit.
  data.implicit_prompt = !input[0].contains("prompt");
  std::vector<Json> rows;
  rows.reserve(input.size());
  for (size_t i = 0; i < input.size(); ++i) {
    const std::string at = where(i);
    if (!input[i].is_object()) {
      throw InputError(fmt::format("{} is {} ({}), not a record (a JSON object)", at,
                                   base::a_type(input[i]), base::shown(input[i])));
    }
    const DpoShape shape = row_shape(input[i], data.implicit_prompt, at);
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
    if (data.implicit_prompt) extract_prompt(row, shape, at);
    rows.push_back(std::move(row));
  }
  const bool conversational = data.shape == DpoShape::kConversational;
  if (conversational && !chat_template) {
    throw InputError(fmt::format(
        "{} is conversational, but the tokenizer {} has no chat template (no "
        "chat_template.jinja, no chat_template in tokenizer_config.json); give one with "
        "chat_template_path",
        where(0), tokenizer.path()));
  }
  // add_eos (plain data): the eos token's text ends chosen and rejected.
  std::string eos;
  if (!conversational) {
    if (options.eos_token) {
      eos = *options.eos_token;
    } else if (auto id = tokenizer.eos_token_id()) {
      eos = tokenizer.id_to_token(*id).value_or("");
    }
    if (eos.empty()) {
      throw InputError(fmt::format(
          "{} is plain preference data, whose chosen and rejected texts TRL ends with the "
          "tokenizer's eos_token, and the tokenizer {} has none; set eos_token",
          where(0), tokenizer.path()));
    }
  }

  int64_t misses = 0, first_miss = 0;
  std::string left_out;  // the first miss's prompt tokens past the common prefix, decoded
  for (size_t i = 0; i < rows.size(); ++i) {
    Json& row = rows[i];
    const std::string at = where(i);
    const records::TemplateInputs inputs = records::template_inputs(row, std::nullopt, at);
    std::vector<int32_t> prompt_ids, chosen_ids, rejected_ids;
    if (conversational) {
      const Json& prompt = row["prompt"];
      auto both = [&](const char* column) {
        Json messages = prompt;
        for (const Json& message : row[column]) messages.push_back(message);
        return records::chat_ids(*chat_template, tokenizer, messages, inputs, false, nullptr, at);
      };
      prompt_ids = records::chat_ids(*chat_template, tokenizer, prompt, inputs, true, nullptr, at);
      chosen_ids = both("chosen");
      rejected_ids = both("rejected");
    } else {
      const std::string& prompt = row["prompt"].get_ref<const std::string&>();
      for (const char* column : {"chosen", "rejected"}) {
        std::string& text = row[column].get_ref<std::string&>();
        if (!base::ends_with(text, eos)) text += eos;
      }
      prompt_ids = tokenizer.encode(prompt, /*add_special_tokens=*/true);
      chosen_ids = tokenizer.encode(prompt + row["chosen"].get<std::string>(), true);
      rejected_ids = tokenizer.encode(prompt + row["rejected"].get<std::string>(), true);
    }
    const size_t prompt_len = std::min(common_prefix_length(prompt_ids, chosen_ids),
                                       common_prefix_length(prompt_ids, rejected_ids));
    if (prompt_len < prompt_ids.size() && misses++ == 0) {
      first_miss = static_cast<int64_t>(i) + 1;
      left_out = tokenizer.decode(std::vector<int32_t>(
          prompt_ids.begin() + static_cast<std::ptrdiff_t>(prompt_len), prompt_ids.end()));
    }
    DpoRow out;
    const auto cut = static_cast<std::ptrdiff_t>(prompt_len);
    out.prompt_ids.assign(prompt_ids.begin(), prompt_ids.begin() + cut);
    out.chosen_ids.assign(chosen_ids.begin() + cut, chosen_ids.end());
    out.rejected_ids.assign(rejected_ids.begin() + cut, rejected_ids.end());
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
  if (misses > 0) {
    base::warn(
        "{}: the tokenized prompt is not a prefix of the tokenized prompt+chosen or "
        "prompt+rejected in {} of {} rows (first: row {}), usually because the chat template "
        "renders the prompt alone differently or because tokens merge across the boundary; as "
        "TRL does, the completions start where they diverge, and the end of the prompt ({}) is "
        "left out of the training sequence",
        source, misses, rows.size(), first_miss, base::shown_text(left_out));
  }
  return data;
}

}  // namespace trainer::trl
