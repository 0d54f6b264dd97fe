// The corpus of a byte-level language-modeling data set: one UTF-8 text file, or every text file
// under a folder, read in path order (torch-free; lib/data/text.h cuts it into blocks).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace trainer::data {

struct TextCorpus {
  std::string text;                       // the files' bytes, concatenated in path order
  std::vector<std::string> files;         // the files read, in that order
  std::vector<int64_t> offsets;           // where each of them starts in `text`
  std::vector<std::string> binary_files;  // skipped: not UTF-8 text
  int64_t duplicates = 0;                 // skipped: other paths (links) to a file already read
};

// True when `bytes` is valid UTF-8 (no overlong forms, surrogates or code points past U+10FFFF)
// and holds no NUL byte: what this data set calls text. Binary files (Debian's fortune *.dat
// indexes, images, archives) fail one or the other.
bool is_utf8_text(std::string_view bytes);

// "UTF-16" or "UTF-32" for text in those encodings with a byte-order mark, "UTF-16LE",
// "UTF-16BE", "UTF-32LE" or "UTF-32BE" for ASCII text without one (NUL bytes in fixed lanes beside
// each letter), else nullptr.
const char* wide_encoding(std::string_view bytes);

// Throws InputError "<named> is <encoding> text; save it as UTF-8 (iconv ... '<path>' > ...)" when
// wide_encoding(bytes) names one; `named` is how the message starts ("CSV file /x").
void refuse_wide_text(std::string_view bytes, const std::string& named, const std::string& path);

// Reads `path`: a file (which must be UTF-8 text), or a folder, whose regular files are all read,
// recursively, in the byte order of their paths. In a folder, symbolic links are followed, a
// file reached twice (fortunes' *.u8 links beside the files they name) is read once, under its
// first path, and a file that is not UTF-8 text is skipped without a message (the caller says
// how many were, from binary_files). `option` names the setting in errors ("dataset_config:
// path"). Throws InputError naming the path when it does not exist or cannot be read, when a lone
// file is not UTF-8 text, or when no text is found (an empty corpus).
TextCorpus read_text_corpus(const std::string& path, const std::string& option = "path");

}  // namespace trainer::data
