// `trainer tokenize --tokenizer_name DIR [FILE]`: the ids a tokenizer.json gives each line (the
// line break left out, a '\r' before it kept), or with --decode each line of ids as text: what a
// user runs when a tokenization looks wrong. Lines from standard input are answered one by one.
#include <cstdio>
#include <fstream>
#include <iostream>

#include <unistd.h>

#include <fmt/format.h>

#include "apps/trainer/commands.h"
#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/text.h"
#include "lib/data/text_files.h"
#include "lib/tokenizers/tokenizer.h"

namespace trainer::cli {

namespace {

// The ids of a --decode line; `line_number` and the vocabulary size name a bad one.
std::vector<int32_t> ids_of_line(const std::string& line, int64_t line_number, int64_t vocab) {
  std::vector<int32_t> ids;
  size_t at = 0;
  while (at < line.size()) {
    if (line[at] == ' ' || line[at] == '\t' || line[at] == '\r') {
      ++at;
      continue;
    }
    size_t end = line.find_first_of(" \t\r", at);
    if (end == std::string::npos) end = line.size();
    const std::string word = line.substr(at, end - at);
    const bool digits =
        word.size() <= 10 && word.find_first_not_of("0123456789") == std::string::npos;
    const int64_t id = digits ? std::stoll(word) : -1;
    if (id < 0 || id >= vocab) {
      throw InputError(fmt::format(
          "trainer tokenize --decode: line {}: {} is not an id (ids are integers 0..{}, separated "
          "by spaces)",
          line_number, base::shown_text(word), vocab - 1));
    }
    ids.push_back(static_cast<int32_t>(id));
    at = end;
  }
  return ids;
}

}  // namespace

int tokenize_command(const TokenizeOptions& options) {
  const tokenizers::Tokenizer tokenizer = tokenizers::Tokenizer::load(options.tokenizer_name);
  std::ifstream file;
  if (!options.file.empty()) {
    try {  // missing, unreadable, a folder: one line
      ::close(base::open_for_reading(options.file, "FILE "));
    } catch (const InputError& e) {
      throw InputError(std::string("trainer tokenize: ") + e.what());
    }
    file.open(options.file, std::ios::binary);
    if (!file) throw InputError(fmt::format("trainer tokenize: cannot read FILE {}", options.file));
  }
  std::istream& in = options.file.empty() ? std::cin : file;
  const bool interactive = options.file.empty();
  std::string line, out;
  int64_t line_number = 0;
  const std::string named =
      options.file.empty() ? std::string("standard input") : fmt::format("FILE '{}'", options.file);
  while (std::getline(in, line)) {
    ++line_number;
    // Text, as train_file reads it: UTF-16 or UTF-32 named (its first line holds the mark or the
    // NUL lanes), any other bytes that are not UTF-8 refused with the line they are on.
    if (line_number == 1) {
      data::refuse_wide_text(line + "\n", "trainer tokenize: " + named,
                             options.file.empty() ? "FILE" : options.file);
    }
    if (!data::is_utf8_text(line)) {
      throw InputError(fmt::format(
          "trainer tokenize: {} line {} is not UTF-8 text (invalid UTF-8 or a NUL byte): {}; give "
          "UTF-8 text",
          named, line_number, base::shown_text(line, 40)));
    }
    if (options.decode) {
      out += tokenizer.decode(ids_of_line(line, line_number, tokenizer.vocab_size()),
                              !options.special_tokens);
    } else {
      const std::vector<int32_t> ids = tokenizer.encode(line, options.special_tokens);
      for (size_t i = 0; i < ids.size(); ++i) {
        if (i > 0) out += ' ';
        out += std::to_string(ids[i]);
      }
    }
    out += '\n';
    if (interactive || out.size() > (1 << 16)) {
      if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout)) {
        return 1;  // a closed stdout (| head)
      }
      out.clear();
    }
  }
  if (in.bad())
    throw InputError(fmt::format("trainer tokenize: cannot read {}",
                                 options.file.empty() ? "standard input" : options.file));
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace trainer::cli
