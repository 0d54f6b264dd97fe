// config.json's rotary embedding: Transformers 5.24's rope types and their keys, read from the
// Hub's rope_scaling or Transformers 5's rope_parameters, standardized as Transformers writes them.
#include "lib/models/hf_config_rope.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/base/json_text.h"
#include "lib/base/text.h"
#include "lib/base/warn.h"

namespace trainer::models {

const std::vector<std::string>& rope_types() {
  static const std::vector<std::string> types = {"default",  "linear", "dynamic",     "yarn",
                                                 "longrope", "llama3", "proportional"};
  return types;
}

namespace {

using json = nlohmann::ordered_json;

// A rope key's list of numbers (longrope's short_factor and long_factor), of `length`.
std::vector<double> read_factors(const base::JsonFields& rf, const json& r, const std::string& key,
                                 size_t length) {
  const json& v = r.at(key);
  if (!v.is_array() || !std::all_of(v.begin(), v.end(), [](const json& x) {
        return x.is_number() && std::isfinite(x.get<double>());
      })) {
    rf.fail(key, fmt::format("{} is not a list of numbers", base::shown(v)));
  }
  if (v.size() != length) {
    rf.fail(key, fmt::format("lists {} factors where the rotary embedding has {} frequencies "
                             "(head_dim / 2)",
                             v.size(), length));
  }
  return v.get<std::vector<double>>();
}

// The keys each rope type reads beyond rope_type, rope_theta and partial_rotary_factor
// (Transformers' _validate_<type>_rope_parameters: required, then optional).
struct RopeKeys {
  std::vector<std::string> required, optional;
};
RopeKeys rope_keys(const std::string& type) {
  if (type == "linear" || type == "dynamic") return {{"factor"}, {}};
  if (type == "yarn") {
    return {{"factor", "original_max_position_embeddings"},
            {"attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "truncate"}};
  }
  if (type == "longrope") {
    return {{"short_factor", "long_factor", "original_max_position_embeddings"},
            {"attention_factor", "factor"}};
  }
  if (type == "llama3") {
    return {{"factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"},
            {}};
  }
  if (type == "proportional") return {{}, {"factor"}};
  return {{}, {}};
}

// Whether rope type `type` reads original_max_position_embeddings.
bool reads_original(const std::string& type, bool phi3) {
  return type == "yarn" || type == "longrope" || type == "llama3" || (phi3 && type == "su");
}

// Transformers' standardize_rope_params on `r`, in place: rope_type from the old "type" when
// absent, rope_theta (`theta`) and partial_rotary_factor (`partial`, the top level's, when given)
// when absent.
void standardize(json& r, const HfConfig& c, double theta, const json* partial) {
  if (!r.contains("rope_type")) r["rope_type"] = r.contains("type") ? r["type"] : json("default");
  if (!r.contains("rope_theta")) r["rope_theta"] = theta;
  if (partial && !r.contains("partial_rotary_factor")) r["partial_rotary_factor"] = *partial;
  // Phi3Config: partial_rotary_factor always (1.0 when not given), and "su" and "yarn" are its
  // longrope.
  if (c.model_type == "phi3" && !r.contains("partial_rotary_factor")) {
    r["partial_rotary_factor"] = 1.0;
  }
}

// The type (and original_max_position_embeddings where it reads one: max_position_embeddings
// when absent; Phi3Config's own field wins), rope_theta and partial_rotary_factor, checked.
void read_type_and_base(base::JsonFields& rf, json& r, const HfConfig& c, RopeParameters& p) {
  const bool phi3 = c.model_type == "phi3";
  p.type = rf.string("rope_type");
  rf.string("type", "");
  if (phi3 && reads_original(p.type, phi3)) {
    r["original_max_position_embeddings"] = c.json.value("original_max_position_embeddings", 4096);
  } else if (reads_original(p.type, phi3) && !r.contains("original_max_position_embeddings")) {
    r["original_max_position_embeddings"] = c.max_position_embeddings;
  }
  if (phi3 && (p.type == "su" || p.type == "yarn")) r["rope_type"] = p.type = "longrope";
  const std::vector<std::string> phi3_types = {"default", "longrope"};
  const auto& types = phi3 ? phi3_types : rope_types();
  if (std::find(types.begin(), types.end(), p.type) == types.end()) {
    rf.fail("rope_type", fmt::format("\"{}\" is not supported ({}{})", p.type,
                                     fmt::join(types, ", "), phi3 ? " for phi3" : ""));
  }
  p.theta = rf.number("rope_theta");
  rf.fail_if(!(p.theta > 0), "rope_theta", fmt::format("{} is not > 0", p.theta));
  p.partial_rotary_factor = rf.number("partial_rotary_factor", 1.0);
  rf.fail_if(!(p.partial_rotary_factor > 0 && p.partial_rotary_factor <= 1),
             "partial_rotary_factor", fmt::format("{} is not in (0, 1]", p.partial_rotary_factor));
  // Llama's default rotary embedding ignores it; the scaled ones would rotate part of a head that
  // these models' attention rotates whole (Transformers fails there on the shapes).
  rf.fail_if(
      p.partial_rotary_factor != 1 && !phi3 && p.type != "default" && p.type != "proportional",
      "partial_rotary_factor",
      fmt::format("{} is not supported by {} (its attention rotates the whole head)",
                  p.partial_rotary_factor, c.model_type));
}

// The keys the type needs, its factor (null for yarn and longrope: the ratio of the lengths), and
// original_max_position_embeddings.
void read_factor(base::JsonFields& rf, const json& r, const HfConfig& c, RopeParameters& p) {
  const RopeKeys keys = rope_keys(p.type);
  for (const std::string& key : keys.required) {
    if (!r.contains(key)) {
      rf.fail(key, fmt::format("is missing (rope_type \"{}\" needs {})", p.type,
                               fmt::join(keys.required, ", ")));
    }
  }
  const bool factor_may_be_null = p.type == "yarn" || p.type == "longrope";
  if (factor_may_be_null || p.type == "proportional") {
    p.factor = rf.number("factor", p.type == "proportional" ? 1.0 : 0.0);
  } else if (!keys.required.empty()) {
    p.factor = rf.number("factor");
  }
  rf.fail_if(r.contains("factor") && !r["factor"].is_null() && !(p.factor > 0), "factor",
             fmt::format("{} is not > 0", p.factor));
  if (reads_original(p.type, c.model_type == "phi3")) {
    p.original_max_position_embeddings = rf.positive("original_max_position_embeddings", 0);
    if (p.factor == 0) {
      p.factor = static_cast<double>(c.max_position_embeddings) /
                 static_cast<double>(p.original_max_position_embeddings);
    }
  }
}

// yarn's, longrope's and llama3's own keys.
void read_type_keys(base::JsonFields& rf, json& r, const HfConfig& c, RopeParameters& p) {
  if (p.type == "yarn" || p.type == "longrope") {
    p.attention_factor = rf.number("attention_factor", 0.0);
    rf.fail_if(r.contains("attention_factor") && !r["attention_factor"].is_null() &&
                   !(p.attention_factor > 0),
               "attention_factor", fmt::format("{} is not > 0", p.attention_factor));
  }
  if (p.type == "yarn") {
    // Transformers' `beta_fast or 32`: 0 is the default too.
    p.beta_fast = rf.number("beta_fast", 0.0);
    p.beta_slow = rf.number("beta_slow", 0.0);
    if (p.beta_fast == 0) p.beta_fast = 32;
    if (p.beta_slow == 0) p.beta_slow = 1;
    rf.fail_if(!(p.beta_fast > 0 && p.beta_slow > 0), p.beta_fast > 0 ? "beta_slow" : "beta_fast",
               "is not > 0");
    p.mscale = rf.number("mscale", 0.0);
    p.mscale_all_dim = rf.number("mscale_all_dim", 0.0);
    p.truncate = rf.boolean("truncate", true);
  }
  if (p.type == "longrope") {
    const bool phi3 = c.model_type == "phi3";
    const int64_t dim = static_cast<int64_t>(static_cast<double>(c.head_dim) *
                                             (phi3 ? p.partial_rotary_factor : 1.0));
    const auto frequencies = static_cast<size_t>(dim / 2);
    p.short_factor = read_factors(rf, r, "short_factor", frequencies);
    p.long_factor = read_factors(rf, r, "long_factor", frequencies);
    rf.required("short_factor");
    rf.required("long_factor");
  }
  if (p.type == "llama3") {
    p.low_freq_factor = rf.number("low_freq_factor");
    p.high_freq_factor = rf.number("high_freq_factor");
    rf.fail_if(!(p.low_freq_factor > 0), "low_freq_factor",
               fmt::format("{} is not > 0", p.low_freq_factor));
    rf.fail_if(
        !(p.high_freq_factor > p.low_freq_factor), "high_freq_factor",
        fmt::format("{} is not > low_freq_factor {}", p.high_freq_factor, p.low_freq_factor));
  }
}

// One rotary embedding's parameters (a flat rope_parameters or rope_scaling, or one layer type's
// of gemma3_text's), standardized in place as Transformers' standardize_rope_params does. A key
// the type does not read is ignored with a warning, as Transformers warns; a missing or invalid
// one is refused.
RopeParameters read_rope_parameters(const base::JsonFields& f, const std::string& source, json& r,
                                    const std::string& where, const HfConfig& c, double theta,
                                    const json* partial) {
  if (!r.is_object()) f.fail(where, fmt::format("{} is not an object", base::shown(r)));
  standardize(r, c, theta, partial);
  base::JsonFields rf(r, source + ": " + where);
  RopeParameters p;
  read_type_and_base(rf, r, c, p);
  read_factor(rf, r, c, p);
  read_type_keys(rf, r, c, p);
  if (const std::optional<std::string> key = rf.unread()) {
    base::warn_once(
        fmt::format("{}: {}: key \"{}\" is not read by rope_type \"{}\" (ignored, as "
                    "Transformers ignores it)",
                    source, where, *key, p.type));
  }
  return p;
}
}  // namespace

// The rotary embedding, read from either spelling: the Hub's rope_scaling (which wins when given,
// as in Transformers) or rope_parameters, with rope_theta and partial_rotary_factor beside them
// (gemma3_text: one per layer type, its sliding layers' base rope_local_base_freq before
// Transformers 5, a flat rope_scaling its full-attention layers'). c.json keeps what Transformers
// 5 writes: rope_parameters, standardized, and none of the old keys.
void read_rope(base::JsonFields& f, const std::string& source, HfConfig& c, double default_theta,
               double default_local_theta) {
  const bool gemma = c.model_type == "gemma3_text";
  const double theta = f.number("rope_theta", default_theta);
  const double local_theta = gemma ? f.number("rope_local_base_freq", default_local_theta) : theta;
  f.number("partial_rotary_factor", 1.0);
  const json* partial = f.has("partial_rotary_factor") ? &f.at("partial_rotary_factor") : nullptr;
  json rope = json::object();
  std::string where = "rope_parameters";
  const bool scaling = f.has("rope_scaling") && f.at("rope_scaling") != json::object();
  if (scaling) {
    rope = f.required("rope_scaling");
    where = "rope_scaling";
  } else if (f.has("rope_parameters")) {
    rope = f.required("rope_parameters");
  }
  if (!rope.is_object()) f.fail(where, fmt::format("{} is not an object", base::shown(rope)));
  if (!gemma) {
    c.rope = read_rope_parameters(f, source, rope, where, c, theta, partial);
    c.local_rope = c.rope;
  } else {
    const bool nested = rope.contains("full_attention") || rope.contains("sliding_attention");
    if (!nested) rope = json{{"sliding_attention", json::object()}, {"full_attention", rope}};
    for (const auto& item : rope.items()) {
      if (item.key() != "full_attention" && item.key() != "sliding_attention") {
        f.fail(where, fmt::format("key \"{}\" is not supported (gemma3_text's are by layer type: "
                                  "full_attention and sliding_attention)",
                                  item.key()));
      }
    }
    if (!rope.contains("sliding_attention")) rope["sliding_attention"] = json::object();
    if (!rope.contains("full_attention")) rope["full_attention"] = json::object();
    c.rope = read_rope_parameters(f, source, rope["full_attention"], where + ".full_attention", c,
                                  theta, partial);
    c.local_rope = read_rope_parameters(f, source, rope["sliding_attention"],
                                        where + ".sliding_attention", c, local_theta, partial);
  }
  for (const char* old :
       {"rope_scaling", "rope_theta", "partial_rotary_factor", "rope_local_base_freq"}) {
    // Phi3Config reads the top-level partial_rotary_factor without taking it away.
    if (c.model_type != "phi3" || std::string(old) != "partial_rotary_factor") c.json.erase(old);
  }
  c.json["rope_parameters"] = rope;
  // The dimensions of a head that rotate: phi3 rotates the first partial_rotary_factor of each
  // (its rotary embedding has that many, for every rope type); the others the whole head.
  c.rotary_dim =
      c.model_type == "phi3"
          ? static_cast<int64_t>(static_cast<double>(c.head_dim) * c.rope.partial_rotary_factor)
          : c.head_dim;
  f.fail_if(c.rotary_dim < 2, "partial_rotary_factor",
            fmt::format("{} leaves fewer than 2 of head_dim {} to rotate",
                        c.rope.partial_rotary_factor, c.head_dim));
}

}  // namespace trainer::models
