// tokenizer.json and tokenizer_config.json read into a tokenizer's components, as `tokenizers`'
// serde reads them (and as Transformers' tokenizer classes rebuild them around the vocabulary):
// what is not supported is refused in one line naming the file and the component.
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

// Loads tokenizer.json's components into `t`, refusing what is not supported in one line.
// model.vocab and model.merges as parse_json hands them over (JsonStream): the vocabulary's
// table, the merges' pairs, and the first entry of each that cannot be read (the message the
// Loader gives where it checks the container).
struct StreamedModel {
  Vocab vocab;
  std::vector<std::pair<std::string, double>> pieces;  // a Unigram's vocab, in order
  std::string vocab_problem;
  std::vector<std::pair<std::string, std::string>> merges;
  std::string merges_problem;

  std::vector<base::JsonStream> streams() {
    base::JsonStream vocab_stream{
        {"model", "vocab"},
        [this] {
          vocab.clear(), pieces.clear(), vocab_problem.clear();
          vocab.reserve(1 << 17);  // a Llama 3 vocabulary without rehashing
        },
        [this](const std::string& token, json&& id) { add_token(token, id); }};
    base::JsonStream merges_stream{{"model", "merges"},
                                   [this] { merges.clear(), merges_problem.clear(); },
                                   [this](const std::string&, json&& merge) { add_merge(merge); }};
    return {vocab_stream, merges_stream};
  }

  void add_token(const std::string& token, const json& id) {
    if (id.is_array()) return add_piece(id);
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      if (vocab_problem.empty()) {
        vocab_problem = fmt::format("model's vocab gives {} the id {} (ids are integers >= 0)",
                                    base::shown_text(token), base::shown(id));
      }
      return;
    }
    vocab.insert_or_assign(token, id.get<int32_t>());  // a token given twice: its last id
  }

  // A Unigram piece: [piece, score].
  void add_piece(const json& piece) {
    if (piece.size() != 2 || !piece[0].is_string() || !piece[1].is_number()) {
      if (vocab_problem.empty()) {
        vocab_problem =
            fmt::format("model's vocab entry {} is not [piece, score]", base::shown(piece));
      }
      return;
    }
    pieces.emplace_back(piece[0].get<std::string>(), piece[1].get<double>());
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
  Loader(Impl& t, const std::string& where, StreamedModel& streamed, const ClassRebuild& rebuild)
      : t_(t), reader_(where), streamed_(streamed), rebuild_(rebuild) {}

  [[noreturn]] void refuse(const std::string& what) const { reader_.refuse(what); }
  bool flag(const json& j, const char* key, bool fallback) const {
    return reader_.flag(j, key, fallback);
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
      t_.normalizer = Normalizer::from_json(root["normalizer"], reader_);
    }
    model(reader_.field(root, "model", "the file"));
    if (root.contains("pre_tokenizer") && !root["pre_tokenizer"].is_null()) {
      t_.pre_tokenizer.read(root["pre_tokenizer"], reader_, options_fast);
    }
    if (root.contains("post_processor") && !root["post_processor"].is_null()) {
      post_processor(root["post_processor"], true);
    }
    if (root.contains("decoder") && !root["decoder"].is_null()) {
      t_.decoder = Decoder::from_json(root["decoder"], reader_);
    }
    rebuild();
    // Added tokens come last, as tokenizers adds them to the tokenizer it has built: a
    // normalized one is matched (and decoded) in its normalized form.
    if (root.contains("added_tokens")) added_tokens(root["added_tokens"]);
    finish();
  }

 private:
  void model(const json& m) {
    if (!m.is_object()) refuse("model is not a JSON object");
    const std::string type = m.contains("type") ? JsonReader::type_name(m) : "BPE";
    if (type == "Unigram") return unigram(m);
    if (type != "BPE") {
      refuse(fmt::format("model type {} is not supported (BPE, Unigram)", type));
    }
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
    t_.model.byte_fallback = flag(m, "byte_fallback", false);
    t_.model.ignore_merges = flag(m, "ignore_merges", false);
    t_.model.fuse_unk = flag(m, "fuse_unk", false);
    // The vocabulary and the merges were read straight into streamed_ (StreamedModel): here
    // they are checked where their containers are.
    const json& vocab = reader_.field(m, "vocab", "model");
    if (!vocab.is_object()) refuse("model's vocab is not a JSON object");
    if (!streamed_.vocab_problem.empty()) refuse(streamed_.vocab_problem);
    t_.model.vocab = std::move(streamed_.vocab);
    const json& merges = reader_.field(m, "merges", "model");
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
    model_size_ = static_cast<int64_t>(t_.model.vocab.size());
  }

  void unigram(const json& m) {
    t_.is_unigram = true;
    const json& vocab = reader_.field(m, "vocab", "model");
    if (!vocab.is_array()) refuse("model Unigram's vocab is not a JSON array of [piece, score]");
    if (!streamed_.vocab_problem.empty()) refuse(streamed_.vocab_problem);
    for (auto& [piece, score] : streamed_.pieces) t_.unigram.add(std::move(piece), score);
    t_.unigram.byte_fallback = flag(m, "byte_fallback", false);
    if (m.contains("unk_id") && !m["unk_id"].is_null()) {
      const json& unk = m["unk_id"];
      if (!unk.is_number_unsigned() || unk.get<uint64_t>() >= t_.unigram.scores.size()) {
        refuse(fmt::format("model Unigram's unk_id {} is not the id of one of its {} pieces",
                           base::shown(unk), t_.unigram.scores.size()));
      }
      t_.unigram.unk_id = unk.get<int32_t>();
    }
    t_.unigram.finish();
    model_size_ = static_cast<int64_t>(t_.unigram.scores.size());
  }

  // Transformers' tokenizer classes that build their own normalizer, pre-tokenizer, decoder and
  // BPE settings around tokenizer.json's vocabulary and merges (ClassRebuild says which).
  void rebuild() {
    if (rebuild_.kind == ClassRebuild::kNone) return;
    if (t_.is_unigram) {
      refuse(fmt::format("tokenizer_class {} builds a BPE model, and this file's is Unigram",
                         rebuild_.name));
    }
    t_.pre_tokenizer = PreTokenizer{};
    t_.model.ignore_merges = false;  // what each class's BPE(...) leaves it at
    if (rebuild_.kind == ClassRebuild::kLlama) {
      // LlamaTokenizer: no normalizer, Metaspace without splitting, every byte by fallback.
      t_.normalizer = Normalizer{};
      t_.pre_tokenizer.add_metaspace(rebuild_.prepend, false);
      t_.decoder = Decoder::sentencepiece(rebuild_.prepend != PrependScheme::kNever);
      t_.model.fuse_unk = true, t_.model.byte_fallback = true, t_.model.unk_id.reset();
    } else if (rebuild_.kind == ClassRebuild::kGemma) {
      // GemmaTokenizer: spaces as "▁" by the normalizer, a word ending at each space.
      t_.normalizer = Normalizer::replace_spaces();
      json split = {
          {"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "MergedWithPrevious"}};
      t_.pre_tokenizer.read(split, reader_, options_fast);
      t_.decoder = Decoder::sentencepiece(false);
      t_.model.fuse_unk = true, t_.model.byte_fallback = true;
      const int32_t* unk = t_.model.vocab.find(rebuild_.unk_token);
      if (unk) {
        t_.model.unk_id = *unk;
      } else {
        refuse(fmt::format("GemmaTokenizer's unk_token {} is not in the vocab",
                           base::shown_text(rebuild_.unk_token)));
      }
    } else {  // Qwen2Tokenizer: NFC, its split pattern, byte-level
      t_.normalizer = Normalizer::nfc();
      json split = {
          {"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"}, {"pattern", {{"Regex", kQwen2Pattern}}}, {"behavior", "Isolated"}},
            {{"type", "ByteLevel"},
             {"add_prefix_space", rebuild_.add_prefix_space},
             {"use_regex", false}}}}};
      t_.pre_tokenizer.read(split, reader_, options_fast);
      t_.decoder = Decoder::byte_level();
      t_.model.fuse_unk = false, t_.model.byte_fallback = false, t_.model.unk_id.reset();
    }
  }

  // The added tokens, in order; each one's id is its content's in the vocab, else the one an
  // earlier token of the same content got, else the next after the vocab and those added (what
  // the file says it is only names it, as in tokenizers).
  void added_tokens(const json& list) {
    if (!list.is_array()) refuse("added_tokens is not a JSON array");
    int64_t next = model_size_;
    for (const json& token : list) {
      const std::string content = reader_.string_field(token, "content", "an added token");
      if (token.contains("id") && !token["id"].is_null() &&
          (!token["id"].is_number_integer() || token["id"].get<int64_t>() < 0 ||
           token["id"].get<int64_t>() > INT32_MAX)) {
        refuse(fmt::format("added token {} has the id {} (ids are integers >= 0)",
                           base::shown_text(content), base::shown(token["id"])));
      }
      if (content.empty()) continue;
      int64_t id;
      if (auto it = t_.added.ids().find(content); it != t_.added.ids().end()) {
        id = it->second;
      } else if (const int32_t* in_vocab = t_.vocab().find(content)) {
        id = *in_vocab;
      } else {
        id = next;
      }
      if (id > INT32_MAX - 1) refuse("added_tokens: more ids than an int32 holds");
      if (id >= model_size_) next = std::max(next, id + 1);
      const bool normalized = flag(token, "normalized", true) && !t_.normalizer.empty();
      AddedVocabulary::Token entry;
      entry.content = normalized ? t_.normalizer.normalize(content) : content;
      entry.id = static_cast<int32_t>(id);
      entry.single_word = flag(token, "single_word", false);
      entry.lstrip = flag(token, "lstrip", false);
      entry.rstrip = flag(token, "rstrip", false);
      added_.push_back(
          {entry.content, entry.id, flag(token, "special", false) && entry.content == content});
      t_.added.add(content, std::move(entry), normalized);
    }
    t_.added.finish();
  }

  void post_processor(const json& p, bool top) {
    const std::string type = JsonReader::type_name(p);
    if (type == "Sequence" && top) {
      for (const json& item : reader_.sequence(p, "post_processor", "processors")) {
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
    t_.post_processor = read_template_processing(p, reader_, template_tokens_);
  }

  void finish() {
    int64_t size = 0;
    for (const auto& [token, id] : t_.vocab()) size = std::max<int64_t>(size, int64_t{id} + 1);
    for (const auto& a : added_) size = std::max<int64_t>(size, int64_t{a.id} + 1);
    t_.tokens.assign(size, "");
    t_.has_token.assign(size, false);
    t_.special.assign(size, false);
    t_.byte_token.assign(size, false);
    for (const auto& [name, id] : template_tokens_) {
      if (id >= size) {
        refuse(fmt::format(
            "post_processor TemplateProcessing: special token {} has id {}, outside the "
            "vocabulary (0..{})",
            base::shown_text(name), id, size - 1));
      }
    }
    for (const auto& [token, id] : t_.vocab()) t_.tokens[id] = token, t_.has_token[id] = true;
    for (const auto& a : added_) {
      t_.tokens[a.id] = a.content, t_.has_token[a.id] = true, t_.special[a.id] = a.special;
    }
    t_.model.byte_level = t_.pre_tokenizer.byte_level;
    t_.origin_matters = t_.pre_tokenizer.origin_matters();
    const std::array<char32_t, 256> chars = bytes_to_unicode();
    t_.model.fallback_ids = byte_fallback_ids(t_.vocab());
    const bool fallback = t_.model.byte_fallback || t_.unigram.byte_fallback;
    for (int b = 0; b < 256; ++b) {
      std::string text;
      base::append_utf8(text, chars[b]);
      const int32_t* id = t_.model.vocab.find(text);
      t_.model.byte_ids[b] = id ? *id : -1;
      if (fallback && t_.model.fallback_ids[b] >= 0) t_.byte_token[t_.model.fallback_ids[b]] = true;
    }
  }

  struct AddedToken {
    std::string content;
    int32_t id;
    bool special;
  };

  Impl& t_;
  JsonReader reader_;
  StreamedModel& streamed_;
  const ClassRebuild& rebuild_;
  int64_t model_size_ = 0;  // the model's vocabulary size, where added tokens' ids start
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
  if (const int32_t* id = t.vocab().find(token)) return *id;
  throw InputError(fmt::format("{}: {} {} is not a token of the tokenizer", where, key,
                               base::shown_text(token)));
}

}  // namespace

void read_tokenizer_json(std::string_view bytes, const std::string& where, bool fast_split,
                         const ClassRebuild& rebuild, Impl& t) {
  StreamedModel streamed;
  const json root = base::parse_json(bytes, where, streamed.streams());
  Loader loader(t, where, streamed, rebuild);
  loader.options_fast = fast_split;
  loader.load(root);
}

ClassRebuild class_rebuild(const json& config, const std::string& where) {
  ClassRebuild rebuild;
  if (!config.contains("tokenizer_class") || config["tokenizer_class"].is_null()) return rebuild;
  const json& named = config["tokenizer_class"];
  // AutoTokenizer builds the class tokenizer_config.json names: these use tokenizer.json as it
  // is; Transformers 5's LlamaTokenizer, GemmaTokenizer and Qwen2Tokenizer keep its vocabulary,
  // merges and template and build the rest themselves; another may build a tokenizer other than
  // the one read here, and the ids would not be Transformers'.
  const std::vector<std::string> same = {"PreTrainedTokenizerFast", "TokenizersBackend",
                                         "GPT2Tokenizer", "GPT2TokenizerFast"};
  const std::string name = named.is_string() ? named.get<std::string>() : "";
  const auto strip_fast = [&](const char* base) {
    return name == base || name == std::string(base) + "Fast";
  };
  JsonReader reader(where);
  if (std::find(same.begin(), same.end(), name) != same.end()) return rebuild;
  rebuild.name = name;
  if (strip_fast("LlamaTokenizer")) {
    rebuild.kind = ClassRebuild::kLlama;
    // _get_prepend_scheme: add_prefix_space (true unless given) false: never; else legacy
    // (false unless given): always, else first.
    const bool prefix = reader.flag(config, "add_prefix_space", true);
    const bool legacy = reader.flag(config, "legacy", false);
    rebuild.prepend = !prefix  ? PrependScheme::kNever
                      : legacy ? PrependScheme::kAlways
                               : PrependScheme::kFirst;
  } else if (strip_fast("GemmaTokenizer")) {
    rebuild.kind = ClassRebuild::kGemma;
    if (config.contains("unk_token") && !config["unk_token"].is_null()) {
      const json& unk = config["unk_token"];
      rebuild.unk_token = unk.is_object() && unk.contains("content") ? unk["content"] : unk;
    }
  } else if (strip_fast("Qwen2Tokenizer")) {
    rebuild.kind = ClassRebuild::kQwen2;
    rebuild.add_prefix_space = reader.flag(config, "add_prefix_space", false);
  } else {
    reader.refuse(fmt::format(
        "tokenizer_class {} is not supported (PreTrainedTokenizerFast, TokenizersBackend, "
        "GPT2Tokenizer: tokenizer.json as it is; LlamaTokenizer, GemmaTokenizer, Qwen2Tokenizer "
        "and their Fast names: rebuilt around its vocabulary as Transformers 5 does)",
        base::shown(named)));
  }
  return rebuild;
}

void read_tokenizer_config(const json& config, const std::string& where, Impl& t) {
  t.bos = config_token(config, "bos_token", t, where);
  t.eos = config_token(config, "eos_token", t, where);
  t.pad = config_token(config, "pad_token", t, where);
  t.unk = config_token(config, "unk_token", t, where);
  // add_bos_token or add_eos_token given: Transformers 5 makes the template of them
  // (update_post_processor), in place of tokenizer.json's.
  if (config.contains("add_bos_token") || config.contains("add_eos_token")) {
    JsonReader reader(where);
    const bool bos = reader.flag(config, "add_bos_token", false) && t.bos;
    const bool eos = reader.flag(config, "add_eos_token", false) && t.eos;
    t.post_processor = TemplateProcessing{};
    t.post_processor.present = true;
    auto& single = t.post_processor.parts;
    if (bos) single.push_back({*t.bos});
    single.push_back({TemplateProcessing::kTextA});
    if (eos) single.push_back({*t.eos});
    // pair: the single template, then (bos) $B (eos).
    t.post_processor.pair_parts = single;
    if (bos) t.post_processor.pair_parts.push_back({*t.bos});
    t.post_processor.pair_parts.push_back({TemplateProcessing::kTextB});
    if (eos) t.post_processor.pair_parts.push_back({*t.eos});
  }
}

}  // namespace trainer::tokenizers
