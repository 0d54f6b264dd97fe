// Post-processors of tokenizer.json: TemplateProcessing's `single` template, which puts the
// special tokens around the text's ids when a text is encoded with add_special_tokens.
#pragma once

#include <cstdint>
#include <vector>

namespace trainer::tokenizers {

struct TemplateProcessing {
  bool present = false;
  // The template's pieces in order: {-1} for the text ($A), else a special token's ids.
  std::vector<std::vector<int32_t>> parts;

  // The ids of the template with `text` (a call appending the text's ids) in place of $A.
  template <typename EncodeText>
  void apply(std::vector<int32_t>& ids, EncodeText&& text) const {
    for (const auto& part : parts) {
      if (part.size() == 1 && part[0] == -1) {
        text(ids);
      } else {
        ids.insert(ids.end(), part.begin(), part.end());
      }
    }
  }
};

}  // namespace trainer::tokenizers
