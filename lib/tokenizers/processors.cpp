// TemplateProcessing's templates read from tokenizer.json.
#include "lib/tokenizers/processors.h"

#include <fmt/format.h>

#include "lib/base/json_text.h"
#include "lib/base/text.h"
#include "lib/tokenizers/json_reader.h"

namespace trainer::tokenizers {

namespace {

using json = nlohmann::ordered_json;

// The ids of the template's special token `name`, each added to `tokens`.
std::vector<int32_t> special_token_ids(const std::string& name, const json& specials,
                                       const JsonReader& reader,
                                       std::vector<std::pair<std::string, int32_t>>& tokens) {
  if (!specials.contains(name) || !specials[name].contains("ids") ||
      !specials[name]["ids"].is_array()) {
    reader.refuse(fmt::format("post_processor TemplateProcessing: special token {} has no ids",
                              base::shown_text(name)));
  }
  std::vector<int32_t> ids;
  for (const json& id : specials[name]["ids"]) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      reader.refuse(fmt::format("post_processor TemplateProcessing: special token {} has id {}",
                                base::shown_text(name), base::shown(id)));
    }
    ids.push_back(id.get<int32_t>());
    tokens.emplace_back(name, ids.back());
  }
  return ids;
}

// A template's pieces (`name`: single, or pair, whose pieces may name $B too).
std::vector<std::vector<int32_t>> template_pieces(
    const json& pieces, const json& specials, const std::string& name, const JsonReader& reader,
    std::vector<std::pair<std::string, int32_t>>& tokens) {
  if (!pieces.is_array()) {
    reader.refuse(fmt::format("post_processor TemplateProcessing's {} is not an array", name));
  }
  std::vector<std::vector<int32_t>> parts;
  for (const json& piece : pieces) {
    if (piece.contains("Sequence")) {
      const std::string id = piece["Sequence"].value("id", "");
      if (id != "A" && (name == "single" || id != "B")) {
        reader.refuse(
            fmt::format("post_processor TemplateProcessing's {} names a sequence other than {}",
                        name, name == "single" ? "$A" : "$A and $B"));
      }
      parts.push_back({id == "A" ? TemplateProcessing::kTextA : TemplateProcessing::kTextB});
    } else if (piece.contains("SpecialToken")) {
      parts.push_back(
          special_token_ids(piece["SpecialToken"].value("id", ""), specials, reader, tokens));
    } else {
      reader.refuse(fmt::format("post_processor TemplateProcessing: piece {} is not understood",
                                base::shown(piece)));
    }
  }
  return parts;
}

}  // namespace

TemplateProcessing read_template_processing(const json& p, const JsonReader& reader,
                                            std::vector<std::pair<std::string, int32_t>>& tokens) {
  TemplateProcessing t;
  t.present = true;
  const json& specials = reader.field(p, "special_tokens", "post_processor TemplateProcessing");
  t.parts = template_pieces(reader.field(p, "single", "post_processor TemplateProcessing"),
                            specials, "single", reader, tokens);
  if (p.contains("pair") && !p["pair"].is_null()) {
    t.pair_parts = template_pieces(p["pair"], specials, "pair", reader, tokens);
  } else {
    t.pair_parts = t.parts;
    t.pair_parts.push_back({TemplateProcessing::kTextB});
  }
  return t;
}

}  // namespace trainer::tokenizers
