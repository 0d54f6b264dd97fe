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

bool is_utf8_text(std::string_view bytes) {
  for (size_t i = 0; i < bytes.size();) {
    if (bytes[i] == '\0') return false;
    const size_t length = base::utf8_sequence_length(bytes, i);
    if (length == 0) return false;
    i += length;
  }
  return true;
}

TextCorpus read_text_corpus(const std::string& path, const std::string& option) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) {
    throw InputError(fmt::format(
        "{} '{}' does not exist (give a UTF-8 text file or a folder of them)", option, path));
  }
  TextCorpus corpus;
  auto add = [&](const std::string& file) {
    std::string bytes = base::read_file(file, SIZE_MAX, option + " ");
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
