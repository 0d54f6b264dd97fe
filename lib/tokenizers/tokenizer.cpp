// The Tokenizer: its files read and fingerprinted, a text through the added tokens, the
// pre-tokenizer, BPE and the template; ids back to text through the decoder; the files saved.
#include "lib/tokenizers/tokenizer.h"

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

void Tokenizer::Impl::encode_text(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<AddedVocabulary::Piece> pieces;
  added.split(text, pieces);
  const auto word = [&](std::string_view w) { model.tokenize(w, out); };
  for (const auto& [piece, id] : pieces) {
    if (id >= 0) {
      out.push_back(id);
    } else {
      pre_tokenizer.split(piece, word);
    }
  }
}

void Tokenizer::Impl::encode_text(std::string_view text, std::vector<int32_t>& out,
                                  std::vector<std::pair<size_t, size_t>>& offsets) const {
  std::vector<AddedVocabulary::Piece> pieces;
  added.split(text, pieces);
  const char* const begin = text.data();
  for (const auto& [piece, id] : pieces) {
    size_t at = static_cast<size_t>(piece.data() - begin);
    if (id >= 0) {
      out.push_back(id);
      offsets.emplace_back(at, at + piece.size());
      continue;
    }
    pre_tokenizer.split(piece, [&](std::string_view w) {
      const size_t first = out.size();
      model.tokenize(w, out);
      // A word is a view of the text, but for ByteLevel's prefix space (then: where it stood).
      if (w.data() >= begin && w.data() + w.size() <= begin + text.size())
        at = static_cast<size_t>(w.data() - begin);
      const size_t end = std::min(text.size(), at + w.size());
      for (size_t k = first; k < out.size(); ++k) {
        const std::string& token = tokens[static_cast<size_t>(out[k])];
        size_t n = 0;
        if (model.byte_level) {
          for (unsigned char c : token) n += (c & 0xC0) != 0x80;
        } else {
          n = token.size();
        }
        offsets.emplace_back(std::min(at, end), std::min(at + n, end));
        at += n;
      }
    });
  }
}

namespace {

// Reads t.json_bytes into t's components.
void read_json_bytes(const std::string& where, const Tokenizer::Options& options,
                     Tokenizer::Impl& t) {
  try {
    read_tokenizer_json(t.json_bytes, where, options.fast_split, t);
  } catch (const json::exception& e) {  // a value of another type where the reader reads one
    throw InputError(fmt::format("{}: {}", where, base::json_error_text(e)));
  }
}

// What every tokenizer read ends with: the unknown token (tokenizer_config.json's, else the
// model's).
void finish(Tokenizer::Impl& t) {
  if (!t.unk) t.unk = t.model.unk_id;
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
  read_json_bytes(where, options, *impl);
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
  read_json_bytes(fmt::format("tokenizer {}", impl->path), options, *impl);

  impl->config_path = base::join_path(base::parent_dir(impl->path), base::hf::kTokenizerConfig);
  if (base::exists(impl->config_path)) {
    impl->has_config = true;
    impl->config_bytes = base::read_file(impl->config_path, SIZE_MAX, "tokenizer config ");
    const std::string config_where = fmt::format("tokenizer config {}", impl->config_path);
    const json config = base::parse_json(impl->config_bytes, config_where);
    if (!config.is_object()) throw InputError(config_where + ": the file holds no JSON object");
    read_tokenizer_config(config, config_where, *impl);
  }
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

std::vector<int32_t> Tokenizer::encode_with_offsets(
    std::string_view text, std::vector<std::pair<size_t, size_t>>& offsets) const {
  std::string fixed;
  text = as_utf8(text, fixed);
  std::vector<int32_t> ids;
  offsets.clear();
  impl_->encode_text(text, ids, offsets);
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
  if (const int32_t* id = impl_->model.vocab.find(token)) return *id;
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
