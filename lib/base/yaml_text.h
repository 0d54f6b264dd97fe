// YAML configuration files (TRL's `--config recipe.yaml`) read into the JSON values the config
// readers check: one document, its scalars typed as PyYAML's safe_load types them (YAML 1.1:
// yes/no are booleans, 1e-5 is text but 1.0e-5 a number).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace trainer::base {

// The one document of `text` as JSON: mappings as objects (keys as text, in their order; `<<`
// merges as PyYAML's), sequences as arrays, scalars as PyYAML's safe_load resolves them (null,
// booleans, integers, floats with inf and nan, text; a quoted scalar or !!str is text). Throws
// InputError as one line "<what>:LINE:COLUMN: <why>" for a syntax error, a key given twice in a
// mapping, a tag PyYAML's safe_load does not construct, containers nested deeper than max_depth,
// aliases that expand past 100,000 values, or a second document. An empty document is null.
nlohmann::ordered_json parse_yaml(std::string_view text, const std::string& what, int max_depth);

// A YAML plain scalar as PyYAML's safe_load resolves it (YAML 1.1's resolver): null, a boolean, an
// integer, a float, or the text itself. Throws InputError for an integer past 64 bits.
nlohmann::ordered_json yaml_plain_scalar(const std::string& text);

}  // namespace trainer::base
