// Reading a text corpus: a file or a folder walked with POSIX calls (LibTorch exports a copy of
// std::filesystem that some builds bind to), each file checked to be UTF-8 text.
#include "lib/data/text_files.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

#include <sys/stat.h>

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/text.h"
#include "lib/base/utf8.h"

namespace trainer::data {

namespace {

using Inode = std::pair<uint64_t, uint64_t>;  // st_dev, st_ino

// Every regular file under `dir` (links followed; each folder entered once, so a link to a
// parent cannot loop), with its inode.
void walk(const std::string& dir, std::set<Inode>& folders,
          std::vector<std::pair<std::string, Inode>>& files) {
  for (const std::string& name : base::list_directory(dir)) {
    const std::string path = base::join_path(dir, name);
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) continue;  // a dangling link
    Inode inode{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
    if (S_ISDIR(st.st_mode)) {
      if (folders.insert(inode).second) walk(path, folders, files);
    } else if (S_ISREG(st.st_mode)) {
      files.emplace_back(path, inode);
    }
  }
}

}  // namespace

const char* wide_encoding(std::string_view bytes) {
  auto starts = [&](std::string_view mark) { return bytes.substr(0, mark.size()) == mark; };
  using namespace std::string_view_literals;
  // A byte-order mark and at least one character after it (a lone FF FE is just bytes).
  if (bytes.size() >= 8 && (starts("\xFF\xFE\0\0"sv) || starts("\0\0\xFE\xFF"sv))) {
    return "UTF-32";
  }
  if (bytes.size() >= 4 && (starts("\xFF\xFE"sv) || starts("\xFE\xFF"sv))) return "UTF-16";
  // Without a byte-order mark: ASCII text in UTF-16 or UTF-32 has NUL bytes in fixed lanes (the
  // high bytes of each code unit) and none in the others. Strict, so that binary files (a
  // fortune .dat index of offsets) stay binary.
  const size_t n = std::min<size_t>(bytes.size(), 4096) / 4 * 4;
  if (n < 8) return nullptr;
  size_t zeros[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < n; ++i) zeros[i % 4] += bytes[i] == '\0';
  const size_t lane = n / 4;
  auto pattern = [&](const char* lanes) {  // "z" a lane of zeros, "t" a lane of text
    for (int k = 0; k < 4; ++k) {
      if (lanes[k] == 'z' ? zeros[k] < lane * 95 / 100 : zeros[k] != 0) return false;
    }
    return true;
  };
  // Named with their byte order: iconv reads a BOM-less "UTF-16" as big-endian.
  if (pattern("tzzz")) return "UTF-32LE";
  if (pattern("zzzt")) return "UTF-32BE";
  if (pattern("tztz")) return "UTF-16LE";
  if (pattern("ztzt")) return "UTF-16BE";
  return nullptr;
}

void refuse_wide_text(std::string_view bytes, const std::string& named, const std::string& path) {
  const char* encoding = wide_encoding(bytes);
  if (!encoding) return;
  throw InputError(
      fmt::format("{} is {} text; save it as UTF-8 (iconv -f {} -t UTF-8 '{}' > '{}.utf8')", named,
                  encoding, encoding, path, path));
}

bool is_utf8_text(std::string_view bytes) {
  return bytes.find('\0') == std::string_view::npos && base::is_valid_utf8(bytes);
}

TextCorpus read_text_corpus(const std::string& path, const std::string& option) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) {
    // A symlink loop or a forbidden folder is not a missing file: say which.
    throw InputError(fmt::format(
        "{} '{}' {} (give a UTF-8 text file or a folder of them)", option, path,
        path.empty() || errno == ENOENT ? std::string("does not exist")
                                        : fmt::format("cannot be read: {}", std::strerror(errno))));
  }
  TextCorpus corpus;
  auto add = [&](const std::string& file) {
    std::string bytes = base::read_file(file, SIZE_MAX, option + " ", /*allow_pipes=*/false);
    refuse_wide_text(bytes, fmt::format("{} '{}'", option, file), file);
    if (!is_utf8_text(bytes)) {
      corpus.binary_files.push_back(file);
      return;
    }
    corpus.files.push_back(file);
    corpus.offsets.push_back(static_cast<int64_t>(corpus.text.size()));
    corpus.text += bytes;
  };
  if (S_ISDIR(st.st_mode)) {
    std::set<Inode> folders{{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)}};
    std::vector<std::pair<std::string, Inode>> files;
    walk(path, folders, files);
    std::sort(files.begin(), files.end());
    std::set<Inode> seen;
    for (const auto& [file, inode] : files) {
      if (!seen.insert(inode).second) {
        ++corpus.duplicates;
        continue;
      }
      add(file);
    }
  } else {
    add(path);
    if (!corpus.binary_files.empty()) {
      throw InputError(fmt::format(
          "{} '{}' is not UTF-8 text (invalid UTF-8 or a NUL byte); give a UTF-8 text file or a "
          "folder of them",
          option, path));
    }
  }
  if (corpus.text.empty()) {
    throw InputError(fmt::format(
        "{} '{}' holds no text: {} UTF-8 files with no bytes, {} binary files skipped (give a "
        "UTF-8 text file or a folder of them)",
        option, path, corpus.files.size(), corpus.binary_files.size()));
  }
  return corpus;
}

}  // namespace trainer::data
