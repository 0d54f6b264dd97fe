// The Tokenizer: its files read and fingerprinted, a text through the added tokens, the
// pre-tokenizer, BPE and the template; ids back to text through the decoder; the files saved.
#include "lib/tokenizers/tokenizer.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/hf_files.h"
#include "lib/base/json_text.h"
#include "lib/base/sha256.h"
#include "lib/base/utf8.h"
#include "lib/tokenizers/tokenizer_impl.h"

namespace trainer::tokenizers {

using json = nlohmann::ordered_json;

void Tokenizer::Impl::tokenize_word(std::string_view word, std::vector<int32_t>& out) const {
  if (is_unigram) {
    unigram.tokenize(word, out, path);
  } else {
    model.tokenize(word, out);
  }
}

namespace {

// How many bytes of its word the token `id` stands for, at word[at]: a byte-level token's
// characters, a byte_fallback token's byte, the unknown token's character (a fused run of them is
// given its first), another token's own bytes.
size_t covered_bytes(const Tokenizer::Impl& t, int32_t id, std::string_view word, size_t at) {
  const std::string& token = t.tokens[static_cast<size_t>(id)];
  if (t.model.byte_level && !t.is_unigram) {
    size_t n = 0;
    for (unsigned char c : token) n += (c & 0xC0) != 0x80;
    return n;
  }
  if (t.byte_token[static_cast<size_t>(id)]) return 1;
  const std::optional<int32_t> unk = t.is_unigram ? t.unigram.unk_id : t.model.unk_id;
  if (unk && id == *unk && at < word.size()) {
    size_t length;
    base::decode_utf8(word, at, length);
    return length;
  }
  return token.size();
}

}  // namespace

void Tokenizer::Impl::encode_text(std::string_view text, std::vector<int32_t>& out,
                                  std::vector<std::pair<size_t, size_t>>* offsets) const {
  std::vector<AddedVocabulary::Piece> pieces, normalized_pieces;
  added.split_raw(text, pieces);
  const char* const begin = text.data();
  size_t base_at = 0;  // where the piece at hand starts in `text`
  // Each word's ids and, with offsets, their spans: a word's bytes are aligned to its piece's.
  const PreTokenizer::WordFn word = [&](std::string_view w, const Align* align) {
    const size_t first = out.size();
    tokenize_word(w, out);
    if (!offsets) return;
    size_t at = 0;
    for (size_t k = first; k < out.size(); ++k) {
      const size_t n =
          std::min(covered_bytes(*this, out[k], w, at), w.size() - std::min(at, w.size()));
      if (n == 0 || !align) {
        const size_t where = base_at + (align && at < w.size() ? align[at].begin : 0);
        offsets->emplace_back(where, where);
      } else {
        offsets->emplace_back(base_at + align[at].begin, base_at + align[at + n - 1].end);
      }
      at += n;
    }
    // A Unigram's unknown run is its bytes' tokens together, each spanning the whole run.
    if (is_unigram) {
      for (size_t k = first; k < out.size();) {
        size_t end = k;
        while (end < out.size() && byte_token[static_cast<size_t>(out[end])]) ++end;
        for (size_t i = k; i < end; ++i) {
          (*offsets)[i] = {(*offsets)[k].first, (*offsets)[end - 1].second};
        }
        k = end > k ? end : k + 1;
      }
    }
  };
  for (const auto& [piece, id] : pieces) {
    base_at = static_cast<size_t>(piece.data() - begin);
    if (id >= 0) {
      out.push_back(id);
      if (offsets) offsets->emplace_back(base_at, base_at + piece.size());
      continue;
    }
    const bool origin = base_at == 0;
    const bool track = offsets || (origin && origin_matters);
    if (normalizer.empty() && !added.has_normalized() && !track) {
      pre_tokenizer.split(piece, nullptr, origin, word);
      continue;
    }
    NormalizedText normalized = NormalizedText::of(piece, track);
    normalizer.apply(normalized);
    normalized_pieces.clear();
    added.split_normalized(normalized.text, normalized_pieces);
    const char* const normalized_begin = normalized.text.data();
    for (const auto& [sub, sub_id] : normalized_pieces) {
      const size_t at = static_cast<size_t>(sub.data() - normalized_begin);
      const Align* align = track ? normalized.align.data() + at : nullptr;
      if (sub_id >= 0) {
        out.push_back(sub_id);
        if (offsets) {
          offsets->emplace_back(base_at + align[0].begin, base_at + align[sub.size() - 1].end);
        }
        continue;
      }
      // Metaspace's "first": the piece whose first character still stands at the text's start.
      pre_tokenizer.split(sub, align, origin && (align ? align[0].begin == 0 : at == 0), word);
    }
  }
}

namespace {

// Reads t.json_bytes into t's components.
void read_json_bytes(const std::string& where, const Tokenizer::Options& options,
                     const ClassRebuild& rebuild, Tokenizer::Impl& t) {
  try {
    read_tokenizer_json(t.json_bytes, where, options.fast_split, rebuild, t);
  } catch (const json::exception& e) {  // a value of another type where the reader reads one
    throw InputError(fmt::format("{}: {}", where, base::json_error_text(e)));
  }
}

// What every tokenizer read ends with: the unknown token (tokenizer_config.json's, else the
// model's).
void finish(Tokenizer::Impl& t) {
  if (!t.unk) t.unk = t.is_unigram ? t.unigram.unk_id : t.model.unk_id;
}

}  // namespace

Tokenizer Tokenizer::from_json(std::string json_bytes, const std::string& where) {
  return from_json(std::move(json_bytes), where, Options{});
}

Tokenizer Tokenizer::from_json(std::string json_bytes, const std::string& where,
                               const Options& options) {
  auto impl = std::make_shared<Impl>();
  impl->path = where;
  impl->json_bytes = std::move(json_bytes);
  read_json_bytes(where, options, ClassRebuild{}, *impl);
  finish(*impl);
  Tokenizer t;
  t.impl_ = std::move(impl);
  return t;
}

Tokenizer Tokenizer::load(const std::string& path) { return load(path, Options{}); }

Tokenizer Tokenizer::load(const std::string& path, const Options& options) {
  auto impl = std::make_shared<Impl>();
  const bool folder = base::is_directory(path);
  impl->path = folder ? base::join_path(path, base::hf::kTokenizer) : path;
  if (folder && !base::is_regular_file(impl->path)) {
    throw InputError(fmt::format("tokenizer folder {} has no tokenizer.json", path));
  }
  if (!folder && !base::is_regular_file(path)) {
    throw InputError(
        fmt::format("tokenizer {} does not exist (give a folder with tokenizer.json, "
                    "or the file)",
                    path));
  }
  impl->json_bytes = base::read_file(impl->path, SIZE_MAX, "tokenizer ");
  // tokenizer_config.json first: the class it names may rebuild what tokenizer.json holds.
  impl->config_path = base::join_path(base::parent_dir(impl->path), base::hf::kTokenizerConfig);
  json config;
  ClassRebuild rebuild;
  const std::string config_where = fmt::format("tokenizer config {}", impl->config_path);
  if (base::exists(impl->config_path)) {
    impl->has_config = true;
    impl->config_bytes = base::read_file(impl->config_path, SIZE_MAX, "tokenizer config ");
    config = base::parse_json(impl->config_bytes, config_where);
    if (!config.is_object()) throw InputError(config_where + ": the file holds no JSON object");
    try {
      rebuild = class_rebuild(config, config_where);
    } catch (const json::exception& e) {
      throw InputError(fmt::format("{}: {}", config_where, base::json_error_text(e)));
    }
  }
  read_json_bytes(fmt::format("tokenizer {}", impl->path), options, rebuild, *impl);
  if (impl->has_config) read_tokenizer_config(config, config_where, *impl);
  finish(*impl);
  Tokenizer t;
  t.impl_ = std::move(impl);
  return t;
}

namespace {

// `text`, or its ill-formed bytes replaced as Python's errors="replace" does (kept in `fixed`).
std::string_view as_utf8(std::string_view text, std::string& fixed) {
  if (base::is_valid_utf8(text)) return text;
  fixed = base::replace_invalid_utf8(text);
  return fixed;
}

}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::string fixed;
  text = as_utf8(text, fixed);
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (!add_special_tokens || !impl_->post_processor.present) {
    impl_->encode_text(text, ids);
    return ids;
  }
  impl_->post_processor.apply(ids,
                              [&](std::vector<int32_t>& out) { impl_->encode_text(text, out); });
  return ids;
}

namespace {

// `tokenizers`' truncate_encodings with LongestFirst (no stride, the right side cut) to
// `max_length` ids in all.
void truncate_longest_first(std::vector<int32_t>& a, std::vector<int32_t>* b, size_t max_length) {
  const size_t total = a.size() + (b ? b->size() : 0);
  if (total <= max_length) return;
  if (!b) {
    a.resize(max_length);
    return;
  }
  // n1 the shorter: it keeps its length where the longer one can give up the rest.
  const bool swap = a.size() > b->size();
  size_t n1 = swap ? b->size() : a.size(), n2 = swap ? a.size() : b->size();
  n2 = n1 > max_length ? n1 : std::max(n1, max_length - n1);
  if (n1 + n2 > max_length) {
    n1 = max_length / 2;
    n2 = n1 + max_length % 2;
  }
  if (swap) std::swap(n1, n2);
  a.resize(std::min(a.size(), n1));
  b->resize(std::min(b->size(), n2));
}

}  // namespace

size_t Tokenizer::special_tokens_added(bool pair) const {
  return impl_->post_processor.present ? impl_->post_processor.added_tokens(pair) : 0;
}

std::vector<int32_t> Tokenizer::encode_truncated(std::string_view text,
                                                 const std::string_view* pair,
                                                 size_t max_length) const {
  const size_t added = special_tokens_added(pair != nullptr);
  if (max_length < added) {
    throw std::invalid_argument(
        fmt::format("max_length {} is shorter than the {} special tokens the tokenizer adds",
                    max_length, added));
  }
  std::string fixed_a, fixed_b;
  std::vector<int32_t> a, b;
  impl_->encode_text(as_utf8(text, fixed_a), a);
  if (pair) impl_->encode_text(as_utf8(*pair, fixed_b), b);
  truncate_longest_first(a, pair ? &b : nullptr, max_length - added);
  if (!impl_->post_processor.present) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }
  std::vector<int32_t> ids;
  if (!pair) {
    impl_->post_processor.apply(
        ids, [&](std::vector<int32_t>& out) { out.insert(out.end(), a.begin(), a.end()); });
  } else {
    impl_->post_processor.apply_pair(ids, a, b);
  }
  return ids;
}

std::vector<int32_t> Tokenizer::encode_with_offsets(
    std::string_view text, std::vector<std::pair<size_t, size_t>>& offsets) const {
  std::string fixed;
  text = as_utf8(text, fixed);
  std::vector<int32_t> ids;
  offsets.clear();
  impl_->encode_text(text, ids, &offsets);
  return ids;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  const Impl& t = *impl_;
  std::vector<std::string_view> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || id >= static_cast<int64_t>(t.tokens.size()) || !t.has_token[id]) continue;
    if (skip_special_tokens && t.special[id]) continue;
    tokens.push_back(t.tokens[id]);
  }
  return base::replace_invalid_utf8(t.decoder.decode(tokens));
}

int64_t Tokenizer::vocab_size() const { return static_cast<int64_t>(impl_->tokens.size()); }

std::optional<int32_t> Tokenizer::token_to_id(const std::string& token) const {
  const auto& added = impl_->added.ids();
  if (auto it = added.find(token); it != added.end()) return it->second;
  if (const int32_t* id = impl_->vocab().find(token)) return *id;
  return std::nullopt;
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  if (id < 0 || id >= vocab_size() || !impl_->has_token[id]) return std::nullopt;
  return impl_->tokens[id];
}

std::optional<int32_t> Tokenizer::bos_token_id() const { return impl_->bos; }
std::optional<int32_t> Tokenizer::eos_token_id() const { return impl_->eos; }
std::optional<int32_t> Tokenizer::pad_token_id() const { return impl_->pad; }
std::optional<int32_t> Tokenizer::unk_token_id() const { return impl_->unk; }
const std::string& Tokenizer::fingerprint() const {
  // Made when first asked (a cache key): 7 MB of a Llama 3 tokenizer.json hash in 20 ms, which
  // `trainer tokenize` and the commands that keep no cache need not wait for.
  std::call_once(impl_->fingerprint_once, [&t = *impl_] {
    t.fingerprint = base::sha256_hex(t.json_bytes + t.config_bytes);
  });
  return impl_->fingerprint;
}
const std::string& Tokenizer::path() const { return impl_->path; }

std::map<std::string, std::string> Tokenizer::files() const {
  std::map<std::string, std::string> files = {{base::hf::kTokenizer, impl_->json_bytes}};
  if (impl_->has_config) files[base::hf::kTokenizerConfig] = impl_->config_bytes;
  return files;
}

void Tokenizer::save(const std::string& dir) const {
  base::make_directories(dir);
  for (const auto& [name, contents] : files()) {
    base::write_file_atomic(base::join_path(dir, name), contents);
  }
}

}  // namespace trainer::tokenizers
