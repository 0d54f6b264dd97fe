// libFuzzer target for run_clm's data files (data::parse_lm_bytes, what read_lm_file reads): the
// first byte picks .txt, .json or .jsonl and keep_linebreaks, the rest is the file. Only
// trainer::InputError may come out; every example read is valid UTF-8, and the text loader's
// lines, with their breaks kept, are the file again (universal newlines aside).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "lib/base/errors.h"
#include "lib/base/utf8.h"
#include "lib/data/lm_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const char* const kExtensions[] = {"txt", "json", "jsonl"};
  const std::string extension = kExtensions[data[0] % 3];
  const bool keep_linebreaks = (data[0] & 4) == 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<std::string> examples;
  try {
    examples = trainer::data::parse_lm_bytes(bytes, extension, "fuzz." + extension, "text",
                                             keep_linebreaks);
  } catch (const trainer::InputError&) {
    return 0;
  }
  std::string joined;
  for (const std::string& e : examples) {
    if (!trainer::base::is_valid_utf8(e)) {
      std::fprintf(stderr, "lm_files fuzz: an example is not valid UTF-8\n");
      abort();
    }
    joined += e;
  }
  if (extension == "txt" && keep_linebreaks) {
    std::string expected;  // universal newlines: "\r\n" and a lone "\r" read as "\n"
    for (size_t i = 0; i < bytes.size(); ++i) {
      if (bytes[i] == '\r') {
        expected += '\n';
        if (i + 1 < bytes.size() && bytes[i + 1] == '\n') ++i;
      } else {
        expected += bytes[i];
      }
    }
    if (joined != expected) {
      std::fprintf(stderr, "lm_files fuzz: the lines with their breaks are not the file\n");
      abort();
    }
  }
  return 0;
}
