// Decoders: each step maps the list of tokens to a new list, as `tokenizers`' decode_chain does;
// the last list is joined.
#include "lib/tokenizers/decoders.h"

#include <array>
#include <unordered_map>

#include <fmt/format.h>

#include "lib/base/text.h"
#include "lib/base/utf8.h"
#include "lib/tokenizers/pre_tokenizers.h"

namespace trainer::tokenizers {

struct Decoder::Step {
  virtual ~Step() = default;
  virtual void apply(std::vector<std::string>& tokens) const = 0;
};

namespace {

using json = nlohmann::ordered_json;

struct ByteLevel : Decoder::Step {
  std::unordered_map<char32_t, uint8_t> char_bytes;
  ByteLevel() {
    const std::array<char32_t, 256> chars = bytes_to_unicode();
    for (int b = 0; b < 256; ++b) char_bytes[chars[b]] = static_cast<uint8_t>(b);
  }
  // A token whose characters all stand for bytes is those bytes; any other stays as it is.
  void apply(std::vector<std::string>& tokens) const override {
    for (std::string& token : tokens) {
      std::string decoded;
      bool all = true;
      for (size_t i = 0; i < token.size() && all;) {
        size_t length;
        auto it = char_bytes.find(base::decode_utf8(token, i, length));
        if (it == char_bytes.end()) {
          all = false;
        } else {
          decoded += static_cast<char>(it->second);
        }
        i += length;
      }
      if (all) token = std::move(decoded);
    }
  }
};

struct Replace : Decoder::Step {
  Normalizer normalizer;  // the same Replace as the normalizer's, token by token
  void apply(std::vector<std::string>& tokens) const override {
    for (std::string& token : tokens) token = normalizer.normalize(token);
  }
};

// "<0xXX>": its byte (-1: not such a token). Rust's u8::from_str_radix reads the two characters
// (either case, or a '+' and one digit).
int byte_token(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  int value = 0;
  for (size_t k = 3; k < 5; ++k) {
    const char c = t[k];
    if (k == 3 && c == '+') continue;
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
    if (d < 0) return -1;
    value = value * 16 + d;
  }
  return value;
}

struct ByteFallback : Decoder::Step {
  // Runs of byte tokens become their bytes when those are UTF-8, else one U+FFFD a byte.
  void apply(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string run;
    size_t run_tokens = 0;
    auto flush = [&] {
      if (run_tokens == 0) return;
      if (base::is_valid_utf8(run)) {
        out.push_back(run);
      } else {
        for (size_t k = 0; k < run_tokens; ++k) out.emplace_back("\xEF\xBF\xBD");
      }
      run.clear(), run_tokens = 0;
    };
    for (std::string& token : tokens) {
      const int byte = byte_token(token);
      if (byte >= 0) {
        run += static_cast<char>(byte);
        ++run_tokens;
        continue;
      }
      flush();
      out.push_back(std::move(token));
    }
    flush();
    tokens = std::move(out);
  }
};

struct Fuse : Decoder::Step {
  void apply(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& token : tokens) all += token;
    tokens.assign(1, std::move(all));
  }
};

struct Strip : Decoder::Step {
  std::string content;  // one character
  size_t start = 0, stop = 0;
  void apply(std::vector<std::string>& tokens) const override {
    for (std::string& token : tokens) {
      size_t begin = 0, end = token.size();
      for (size_t k = 0; k < start && token.compare(begin, content.size(), content) == 0; ++k) {
        begin += content.size();
      }
      for (size_t k = 0; k < stop && end >= begin + content.size() &&
                         token.compare(end - content.size(), content.size(), content) == 0;
           ++k) {
        end -= content.size();
      }
      token = token.substr(begin, end - begin);
    }
  }
};

struct Metaspace : Decoder::Step {
  std::string replacement;
  bool prefix = true;  // prepend_scheme is not never: the first token's replacements are dropped
  void apply(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& token = tokens[i];
      size_t from = 0;
      for (size_t at = token.find(replacement); at != std::string::npos;
           at = token.find(replacement, from)) {
        out.append(token, from, at - from);
        if (!(i == 0 && prefix)) out += ' ';
        from = at + replacement.size();
      }
      out.append(token, from);
      tokens[i] = std::move(out);
    }
  }
};

void read_into(const json& j, const JsonReader& reader,
               std::vector<std::unique_ptr<Decoder::Step>>& steps);

std::unique_ptr<Decoder::Step> read_metaspace(const json& j, const JsonReader& reader) {
  auto s = std::make_unique<Metaspace>();
  s->replacement = reader.string_field(j, "replacement", "decoder Metaspace");
  const std::string scheme = j.contains("prepend_scheme") && j["prepend_scheme"].is_string()
                                 ? j["prepend_scheme"].get<std::string>()
                                 : "always";
  s->prefix = scheme != "never";
  return s;
}

void read_into(const json& j, const JsonReader& reader,
               std::vector<std::unique_ptr<Decoder::Step>>& steps) {
  const std::string type = JsonReader::type_name(j);
  if (type == "Sequence") {
    for (const json& item : reader.sequence(j, "decoder", "decoders"))
      read_into(item, reader, steps);
  } else if (type == "ByteLevel") {
    steps.push_back(std::make_unique<ByteLevel>());
  } else if (type == "Replace") {
    auto s = std::make_unique<Replace>();
    s->normalizer = Normalizer::from_json(j, reader);  // {"type": "Replace", ...} reads alike
    steps.push_back(std::move(s));
  } else if (type == "ByteFallback") {
    steps.push_back(std::make_unique<ByteFallback>());
  } else if (type == "Fuse") {
    steps.push_back(std::make_unique<Fuse>());
  } else if (type == "Strip") {
    auto s = std::make_unique<Strip>();
    s->content = reader.character_field(j, "content", "decoder Strip");
    for (const char* key : {"start", "stop"}) {
      const json& v = reader.field(j, key, "decoder Strip");
      if (!v.is_number_integer() || v.get<int64_t>() < 0) {
        reader.refuse(fmt::format("decoder Strip's \"{}\" is not an integer >= 0", key));
      }
    }
    s->start = j["start"].get<size_t>(), s->stop = j["stop"].get<size_t>();
    steps.push_back(std::move(s));
  } else if (type == "Metaspace") {
    steps.push_back(read_metaspace(j, reader));
  } else {
    reader.refuse(fmt::format(
        "decoder {} is not supported (ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, "
        "or a Sequence of them)",
        type));
  }
}

}  // namespace

Decoder::Decoder() = default;
Decoder::Decoder(Decoder&&) noexcept = default;
Decoder& Decoder::operator=(Decoder&&) noexcept = default;
Decoder::~Decoder() = default;

Decoder Decoder::from_json(const json& j, const JsonReader& reader) {
  Decoder d;
  d.present_ = true;
  read_into(j, reader, d.steps_);
  return d;
}

Decoder Decoder::sentencepiece(bool strip) {
  JsonReader reader("Transformers' LlamaTokenizer");
  json chain = json::parse(R"({"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
    {"type": "ByteFallback"}, {"type": "Fuse"}]})");
  if (strip)
    chain["decoders"].push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  return from_json(chain, reader);
}

Decoder Decoder::byte_level() {
  Decoder d;
  d.present_ = true;
  d.steps_.push_back(std::make_unique<ByteLevel>());
  return d;
}

std::string Decoder::decode(const std::vector<std::string_view>& tokens) const {
  std::string bytes;
  if (!present_) {  // no decoder: the tokens joined by spaces
    for (size_t k = 0; k < tokens.size(); ++k) {
      if (k > 0) bytes += ' ';
      bytes += tokens[k];
    }
    return bytes;
  }
  std::vector<std::string> list(tokens.begin(), tokens.end());
  for (const auto& step : steps_) step->apply(list);
  for (const std::string& token : list) bytes += token;
  return bytes;
}

}  // namespace trainer::tokenizers
