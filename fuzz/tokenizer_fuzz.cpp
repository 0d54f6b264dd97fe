// libFuzzer target for tokenizer.json (tokenizers::Tokenizer::from_json): only trainer::InputError
// may come out of reading it; an accepted tokenizer encodes texts (invalid UTF-8 and added-token
// look-alikes included) into ids below its vocabulary size, in both split modes alike, with byte
// offsets inside the text, and decodes any ids into valid UTF-8.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "lib/base/errors.h"
#include "lib/base/utf8.h"
#include "lib/tokenizers/tokenizer.h"

namespace {

void fail(const char* what) {
  std::fprintf(stderr, "tokenizer fuzz: %s\n", what);
  abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using trainer::tokenizers::Tokenizer;
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<Tokenizer> tokenizers;
  try {
    for (bool fast : {true, false})
      tokenizers.push_back(Tokenizer::from_json(text, "fuzz", {fast}));
  } catch (const trainer::InputError&) {
    if (!tokenizers.empty()) fail("the ICU-regex mode refused what the scanner mode accepted");
    return 0;
  }
  const std::vector<std::string> samples = {
      "Hello, world! It's 2026.\n\n  tabs\there", "\xF0\x9F\x98\x80 \xC3\xA9t\xC3\xA9 \xE2\x80\xA8",
      std::string("\xFF\xFE\x00 bad \xC3", 9), "<|endoftext|><s></s>'S 'll 123456", ""};
  for (const std::string& sample : samples) {
    std::vector<std::vector<int32_t>> both;
    for (const Tokenizer& t : tokenizers) {
      try {
        both.push_back(t.encode(sample));
      } catch (const trainer::InputError&) {  // a Split pattern past ICU's time limit
        return 0;
      }
      for (int32_t id : both.back()) {
        if (id < 0 || id >= t.vocab_size()) fail("an id outside the vocabulary");
      }
      if (!trainer::base::is_valid_utf8(t.decode(both.back()))) fail("decode gave invalid UTF-8");
      std::vector<std::pair<size_t, size_t>> offsets;
      const std::vector<int32_t> ids = t.encode_with_offsets(sample, offsets);
      if (offsets.size() != ids.size()) fail("an offset missing");
      const size_t length = trainer::base::replace_invalid_utf8(sample).size();
      for (const auto& [begin, end] : offsets) {
        if (begin > end || end > length) fail("an offset outside the text");
      }
    }
    if (both[0] != both[1]) fail("the scanners and ICU's regex split a text differently");
  }
  std::vector<int32_t> any;
  for (size_t i = 0; i + 1 < size && i < 64; i += 2) any.push_back((data[i] << 8) | data[i + 1]);
  any.push_back(-1);
  any.push_back(INT32_MAX);
  if (!trainer::base::is_valid_utf8(tokenizers[0].decode(any, true))) fail("decode: invalid UTF-8");
  return 0;
}
