// Post-processors of tokenizer.json: TemplateProcessing's `single` and `pair` templates, which put
// the special tokens around a text's ids (and a pair's) when it is encoded with
// add_special_tokens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainer::tokenizers {

struct TemplateProcessing {
  // The pieces' placeholders: the first text ($A) and the pair's second ($B).
  static constexpr int32_t kTextA = -1;
  static constexpr int32_t kTextB = -2;

  bool present = false;
  // The template's pieces in order: {kTextA} for the text, else a special token's ids.
  std::vector<std::vector<int32_t>> parts;
  // The pair's template: {kTextA}, {kTextB} and special tokens' ids (tokenizer.json's `pair`; a
  // file without one: `single` followed by $B).
  std::vector<std::vector<int32_t>> pair_parts;

  // The ids of the template with `text` (a call appending the text's ids) in place of $A.
  template <typename EncodeText>
  void apply(std::vector<int32_t>& ids, EncodeText&& text) const {
    for (const auto& part : parts) {
      if (part.size() == 1 && part[0] == kTextA) {
        text(ids);
      } else {
        ids.insert(ids.end(), part.begin(), part.end());
      }
    }
  }

  // The ids of the pair's template with `a` and `b` in place of $A and $B.
  void apply_pair(std::vector<int32_t>& ids, const std::vector<int32_t>& a,
                  const std::vector<int32_t>& b) const {
    for (const auto& part : pair_parts) {
      if (part.size() == 1 && (part[0] == kTextA || part[0] == kTextB)) {
        const auto& text = part[0] == kTextA ? a : b;
        ids.insert(ids.end(), text.begin(), text.end());
      } else {
        ids.insert(ids.end(), part.begin(), part.end());
      }
    }
  }

  // How many special tokens the template adds (`tokenizers`' added_tokens(is_pair)).
  size_t added_tokens(bool pair) const {
    size_t count = 0;
    for (const auto& part : pair ? pair_parts : parts) {
      if (!(part.size() == 1 && (part[0] == kTextA || part[0] == kTextB))) count += part.size();
    }
    return count;
  }
};

class JsonReader;

// tokenizer.json's post_processor of type TemplateProcessing `p`: its `single` ($A and special
// tokens) and `pair` ($A, $B and special tokens) templates; each special token's (name, id) is
// added to `tokens`. Refuses (reader.refuse) a template that is not an array, a sequence other
// than $A (and $B in `pair`), a special token without ids in special_tokens, a piece of another
// kind.
TemplateProcessing read_template_processing(const nlohmann::ordered_json& p,
                                            const JsonReader& reader,
                                            std::vector<std::pair<std::string, int32_t>>& tokens);

}  // namespace trainer::tokenizers
