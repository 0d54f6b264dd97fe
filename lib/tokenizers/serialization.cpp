// tokenizer.json and tokenizer_config.json read into a tokenizer's components, as `tokenizers`'
// serde reads them: what is not supported is refused in one line naming the file and the
// component.
#include <algorithm>
#include <array>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"
#include "lib/base/utf8.h"
#include "lib/tokenizers/tokenizer_impl.h"

namespace trainer::tokenizers {

namespace {

using json = nlohmann::ordered_json;
using Impl = Tokenizer::Impl;

// A component's "type" as messages name it (cut short), or the component's JSON, cut short.
std::string json_type_name(const json& j) {
  if (j.is_object() && j.contains("type") && j["type"].is_string()) {
    return base::shown_text(j["type"].get<std::string>(), 60);
  }
  return base::shown(j);
}

// Loads tokenizer.json's components into `t`, refusing what is not supported in one line.
// model.vocab and model.merges as parse_json hands them over (JsonStream): the vocabulary's
// table, the merges' pairs, and the first entry of each that cannot be read (the message the
// Loader gives where it checks the container).
struct StreamedModel {
  Vocab vocab;
  std::string vocab_problem;
  std::vector<std::pair<std::string, std::string>> merges;
  std::string merges_problem;

  std::vector<base::JsonStream> streams() {
    base::JsonStream vocab_stream{
        {"model", "vocab"},
        [this] {
          vocab.clear(), vocab_problem.clear();
          vocab.reserve(1 << 17);  // a Llama 3 vocabulary without rehashing
        },
        [this](const std::string& token, json&& id) { add_token(token, id); }};
    base::JsonStream merges_stream{{"model", "merges"},
                                   [this] { merges.clear(), merges_problem.clear(); },
                                   [this](const std::string&, json&& merge) { add_merge(merge); }};
    return {vocab_stream, merges_stream};
  }

  void add_token(const std::string& token, const json& id) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      if (vocab_problem.empty()) {
        vocab_problem = fmt::format("model's vocab gives {} the id {} (ids are integers >= 0)",
                                    base::shown_text(token), base::shown(id));
      }
      return;
    }
    vocab.insert_or_assign(token, id.get<int32_t>());  // a token given twice: its last id
  }

  void add_merge(const json& merge) {
    if (!merges_problem.empty()) return;
    if (merge.is_string()) {
      const std::string& text = merge.get_ref<const std::string&>();
      const size_t space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
        merges_problem =
            fmt::format("merge {} of model's merges is not two tokens with a space between",
                        base::shown_text(text));
        return;
      }
      merges.emplace_back(text.substr(0, space), text.substr(space + 1));
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    } else {
      merges_problem = fmt::format("merge {} of model's merges is not \"a b\" or [\"a\", \"b\"]",
                                   base::shown(merge));
    }
  }
};

class Loader {
 public:
  Loader(Impl& t, const std::string& where, StreamedModel& streamed)
      : t_(t), where_(where), streamed_(streamed) {}

  [[noreturn]] void refuse(const std::string& what) const {
    throw InputError(fmt::format("{}: {}", where_, what));
  }

  const json& field(const json& j, const char* key, const char* within) const {
    if (!j.is_object() || !j.contains(key)) refuse(fmt::format("{} has no \"{}\"", within, key));
    return j[key];
  }

  std::string string_field(const json& j, const char* key, const char* within) const {
    const json& v = field(j, key, within);
    if (!v.is_string()) refuse(fmt::format("{}'s \"{}\" is not a string", within, key));
    return v.get<std::string>();
  }

  // A Sequence `component`'s list (its `key`: "pretokenizers", "processors"), which must be an
  // array.
  const json& sequence(const json& j, const char* component, const char* key) const {
    const std::string within = fmt::format("{} Sequence", component);
    const json& list = field(j, key, within.c_str());
    if (!list.is_array()) refuse(fmt::format("{}'s {} is not a JSON array", within, key));
    return list;
  }

  bool flag(const json& j, const char* key, bool fallback) const {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    if (!j[key].is_boolean()) refuse(fmt::format("\"{}\" is not true or false", key));
    return j[key].get<bool>();
  }

  void load(const json& root) {
    if (!root.is_object()) refuse("the file holds no JSON object");
    // tokenizers reads format 1.0 (and a file without a version); another is refused there.
    if (root.contains("version") && root["version"] != "1.0") {
      refuse(fmt::format("version {} is not supported (tokenizers reads \"1.0\")",
                         base::shown(root["version"])));
    }
    for (const char* key : {"truncation", "padding"}) {
      if (root.contains(key) && !root[key].is_null()) {
        refuse(fmt::format("{} is not supported (it must be null)", key));
      }
    }
    if (root.contains("normalizer") && !root["normalizer"].is_null()) {
      refuse(fmt::format("normalizer {} is not supported (it must be null)",
                         json_type_name(root["normalizer"])));
    }
    model(field(root, "model", "the file"));
    if (root.contains("added_tokens")) added_tokens(root["added_tokens"]);
    if (root.contains("pre_tokenizer") && !root["pre_tokenizer"].is_null()) {
      pre_tokenizer(root["pre_tokenizer"], true);
    }
    if (root.contains("post_processor") && !root["post_processor"].is_null()) {
      post_processor(root["post_processor"], true);
    }
    if (root.contains("decoder") && !root["decoder"].is_null()) decoder(root["decoder"]);
    finish();
  }

 private:
  void model(const json& m) {
    if (!m.is_object()) refuse("model is not a JSON object");
    const std::string type = m.contains("type") ? json_type_name(m) : "BPE";
    if (type != "BPE") refuse(fmt::format("model type {} is not supported (only BPE)", type));
    if (m.contains("dropout") && !m["dropout"].is_null() &&
        !(m["dropout"].is_number() && m["dropout"].get<double>() == 0)) {
      refuse(fmt::format("BPE dropout {} is not supported (it must be null)",
                         base::shown(m["dropout"])));
    }
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      if (m.contains(key) && !m[key].is_null() && m[key] != "") {
        refuse(
            fmt::format("BPE {} {} is not supported (it must be null)", key, base::shown(m[key])));
      }
    }
    if (flag(m, "byte_fallback", false)) refuse("BPE byte_fallback is not supported");
    t_.model.ignore_merges = flag(m, "ignore_merges", false);
    t_.model.fuse_unk = flag(m, "fuse_unk", false);
    // The vocabulary and the merges were read straight into streamed_ (StreamedModel): here
    // they are checked where their containers are.
    const json& vocab = field(m, "vocab", "model");
    if (!vocab.is_object()) refuse("model's vocab is not a JSON object");
    if (!streamed_.vocab_problem.empty()) refuse(streamed_.vocab_problem);
    t_.model.vocab = std::move(streamed_.vocab);
    const json& merges = field(m, "merges", "model");
    if (!merges.is_array()) refuse("model's merges is not a JSON array");
    if (!streamed_.merges_problem.empty()) refuse(streamed_.merges_problem);
    t_.model.merges.reserve(streamed_.merges.size());
    int32_t rank = 0;
    std::string joined;
    for (const auto& [a, b] : streamed_.merges) {
      joined.assign(a).append(b);
      const int32_t *ia = t_.model.vocab.find(a), *ib = t_.model.vocab.find(b),
                    *iab = t_.model.vocab.find(joined);
      if (!ia || !ib || !iab) {
        const std::string& missing = !ia ? a : !ib ? b : joined;
        refuse(fmt::format("merge {} of model's merges: {} is not in the vocab",
                           base::shown_text(a + " " + b), base::shown_text(missing)));
      }
      // A pair given twice: the last one counts, as in tokenizers' map of merges.
      t_.model.merges.insert_or_assign(Bpe::pair_key(*ia, *ib), std::pair{rank++, *iab});
    }
    if (m.contains("unk_token") && !m["unk_token"].is_null()) {
      if (!m["unk_token"].is_string()) refuse("model's unk_token is not a string");
      const int32_t* unk = t_.model.vocab.find(m["unk_token"].get<std::string>());
      if (!unk) {
        refuse(
            fmt::format("model's unk_token {} is not in the vocab", base::shown(m["unk_token"])));
      }
      t_.model.unk_id = *unk;
    }
  }

  void added_tokens(const json& list) {
    if (!list.is_array()) refuse("added_tokens is not a JSON array");
    for (const json& token : list) {
      const std::string content = string_field(token, "content", "an added token");
      const json& id = field(token, "id", "an added token");
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
        refuse(fmt::format("added token {} has the id {} (ids are integers >= 0)",
                           base::shown_text(content), base::shown(id)));
      }
      for (const char* key : {"single_word", "lstrip", "rstrip"}) {
        if (flag(token, key, false)) {
          refuse(fmt::format("added token {}: {} true is not supported", base::shown_text(content),
                             key));
        }
      }
      const int32_t i = id.get<int32_t>();
      added_.push_back({content, i, flag(token, "special", false)});
      t_.added.add(content, i, flag(token, "normalized", true));
    }
    t_.added.finish();
  }

  Splitter splitter_of(std::string_view pattern, bool is_regex) const {
    return Splitter::compile(pattern, is_regex, options_fast, where_);
  }

  void pre_tokenizer(const json& p, bool top) {
    const std::string type = json_type_name(p);
    if (type == "Sequence" && top) {
      for (const json& item : sequence(p, "pre_tokenizer", "pretokenizers")) {
        pre_tokenizer(item, false);
      }
      return;
    }
    if (t_.pre_tokenizer.byte_level) refuse("a pre_tokenizer after ByteLevel is not supported");
    PreTokenizerStage stage;
    if (type == "ByteLevel") {
      t_.pre_tokenizer.byte_level = true;
      stage.prefix_space = flag(p, "add_prefix_space", true);
      stage.split = flag(p, "use_regex", true);
      if (stage.split) stage.splitter = splitter_of(kGpt2Pattern, true);
    } else if (type == "Split") {
      const json& pattern = field(p, "pattern", "pre_tokenizer Split");
      const bool regex = pattern.is_object() && pattern.contains("Regex");
      if (!(regex || (pattern.is_object() && pattern.contains("String"))) ||
          !pattern[regex ? "Regex" : "String"].is_string()) {
        refuse("pre_tokenizer Split's pattern is not {\"Regex\": ...} or {\"String\": ...}");
      }
      const std::string behavior = string_field(p, "behavior", "pre_tokenizer Split");
      if (behavior != "Isolated" && behavior != "Removed") {
        refuse(fmt::format("pre_tokenizer Split behavior {} is not supported (Isolated, Removed)",
                           behavior));
      }
      if (flag(p, "invert", false)) refuse("pre_tokenizer Split with invert true is not supported");
      stage.removed = behavior == "Removed";
      stage.splitter = splitter_of(pattern[regex ? "Regex" : "String"].get<std::string>(), regex);
    } else {
      refuse(fmt::format(
          "pre_tokenizer {} is not supported (ByteLevel, Split, or a Sequence of them)", type));
    }
    t_.pre_tokenizer.stages.push_back(std::move(stage));
  }

  void post_processor(const json& p, bool top) {
    const std::string type = json_type_name(p);
    if (type == "Sequence" && top) {
      for (const json& item : sequence(p, "post_processor", "processors")) {
        post_processor(item, false);
      }
      return;
    }
    if (type == "ByteLevel") return;  // offsets only
    if (type != "TemplateProcessing") {
      refuse(fmt::format(
          "post_processor {} is not supported (ByteLevel, TemplateProcessing, or a Sequence)",
          type));
    }
    if (t_.post_processor.present)
      refuse("a second post_processor TemplateProcessing is not supported");
    t_.post_processor.present = true;
    const json& single = field(p, "single", "post_processor TemplateProcessing");
    const json& specials = field(p, "special_tokens", "post_processor TemplateProcessing");
    if (!single.is_array()) refuse("post_processor TemplateProcessing's single is not an array");
    for (const json& piece : single) {
      if (piece.contains("Sequence")) {
        if (piece["Sequence"].value("id", "") != "A") {
          refuse("post_processor TemplateProcessing's single names a sequence other than $A");
        }
        t_.post_processor.parts.push_back({-1});
      } else if (piece.contains("SpecialToken")) {
        const std::string name = piece["SpecialToken"].value("id", "");
        if (!specials.contains(name) || !specials[name].contains("ids") ||
            !specials[name]["ids"].is_array()) {
          refuse(fmt::format("post_processor TemplateProcessing: special token {} has no ids",
                             base::shown_text(name)));
        }
        std::vector<int32_t> ids;
        for (const json& id : specials[name]["ids"]) {
          if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
            refuse(fmt::format("post_processor TemplateProcessing: special token {} has id {}",
                               base::shown_text(name), base::shown(id)));
          }
          ids.push_back(id.get<int32_t>());
          template_tokens_.emplace_back(name, ids.back());
        }
        t_.post_processor.parts.push_back(std::move(ids));
      } else {
        refuse(fmt::format("post_processor TemplateProcessing: piece {} is not understood",
                           base::shown(piece)));
      }
    }
  }

  void decoder(const json& d) {
    const std::string type = json_type_name(d);
    if (type != "ByteLevel") refuse(fmt::format("decoder {} is not supported (ByteLevel)", type));
    t_.decoder.set_byte_level();
  }

  void finish() {
    int64_t size = 0;
    for (const auto& [token, id] : t_.model.vocab) size = std::max<int64_t>(size, int64_t{id} + 1);
    for (const auto& a : added_) size = std::max<int64_t>(size, int64_t{a.id} + 1);
    t_.tokens.assign(size, "");
    t_.has_token.assign(size, false);
    t_.special.assign(size, false);
    for (const auto& [name, id] : template_tokens_) {
      if (id >= size) {
        refuse(fmt::format(
            "post_processor TemplateProcessing: special token {} has id {}, outside the "
            "vocabulary (0..{})",
            base::shown_text(name), id, size - 1));
      }
    }
    for (const auto& [token, id] : t_.model.vocab) t_.tokens[id] = token, t_.has_token[id] = true;
    for (const auto& a : added_) {
      t_.tokens[a.id] = a.content, t_.has_token[a.id] = true, t_.special[a.id] = a.special;
    }
    t_.model.byte_level = t_.pre_tokenizer.byte_level;
    const std::array<char32_t, 256> chars = bytes_to_unicode();
    for (int b = 0; b < 256; ++b) {
      std::string text;
      base::append_utf8(text, chars[b]);
      const int32_t* id = t_.model.vocab.find(text);
      t_.model.byte_ids[b] = id ? *id : -1;
    }
  }

  struct AddedToken {
    std::string content;
    int32_t id;
    bool special;
  };

  Impl& t_;
  std::string where_;
  StreamedModel& streamed_;
  std::vector<AddedToken> added_;
  std::vector<std::pair<std::string, int32_t>> template_tokens_;  // the template's ids, by name

 public:
  bool options_fast = true;
};

// The id of a special token named in tokenizer_config.json (a string or {"content": ...}).
std::optional<int32_t> config_token(const json& config, const char* key, const Impl& t,
                                    const std::string& where) {
  if (!config.contains(key) || config[key].is_null()) return std::nullopt;
  const json& v = config[key];
  std::string token;
  if (v.is_string()) {
    token = v.get<std::string>();
  } else if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    token = v["content"].get<std::string>();
  } else {
    throw InputError(fmt::format("{}: {} is not a string or {{\"content\": ...}}", where, key));
  }
  if (auto it = t.added.ids().find(token); it != t.added.ids().end()) return it->second;
  if (const int32_t* id = t.model.vocab.find(token)) return *id;
  throw InputError(fmt::format("{}: {} {} is not a token of the tokenizer", where, key,
                               base::shown_text(token)));
}

}  // namespace

void read_tokenizer_json(std::string_view bytes, const std::string& where, bool fast_split,
                         Impl& t) {
  StreamedModel streamed;
  const json root = base::parse_json(bytes, where, streamed.streams());
  Loader loader(t, where, streamed);
  loader.options_fast = fast_split;
  loader.load(root);
}

void read_tokenizer_config(const json& config, const std::string& where, Impl& t) {
  // AutoTokenizer builds the class tokenizer_config.json names: those below use tokenizer.json
  // as it is; another (BertTokenizer, LlamaTokenizer, ...) may build a different tokenizer
  // than the one read here, and the ids would not be Transformers'.
  if (config.contains("tokenizer_class") && !config["tokenizer_class"].is_null()) {
    const json& named = config["tokenizer_class"];
    const std::vector<std::string> same = {"PreTrainedTokenizerFast", "TokenizersBackend",
                                           "GPT2Tokenizer", "GPT2TokenizerFast"};
    if (!named.is_string() ||
        std::find(same.begin(), same.end(), named.get<std::string>()) == same.end()) {
      throw InputError(
          fmt::format("{}: tokenizer_class {} is not supported (PreTrainedTokenizerFast, "
                      "TokenizersBackend, GPT2Tokenizer, GPT2TokenizerFast: the classes that use "
                      "tokenizer.json as it is)",
                      where, base::shown(named)));
    }
  }
  t.bos = config_token(config, "bos_token", t, where);
  t.eos = config_token(config, "eos_token", t, where);
  t.pad = config_token(config, "pad_token", t, where);
  t.unk = config_token(config, "unk_token", t, where);
}

}  // namespace trainer::tokenizers
