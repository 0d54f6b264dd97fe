// The `trainer` program run inside the test process: argv from a plain command line, and the
// run with its standard streams captured.
#include "tests/program_in_process.h"

#include <cstdio>
#include <iostream>

#include <fcntl.h>
#include <unistd.h>

#include "apps/trainer/commands.h"
#include "lib/runtime/torch_logs.h"

namespace trainer::testing {

std::optional<std::vector<std::string>> plain_command_words(const std::string& line,
                                                            const std::string& program) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(word), word.clear(), in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\'') {
      const size_t end = line.find('\'', i + 1);
      if (end == std::string::npos) return std::nullopt;
      word += line.substr(i + 1, end - i - 1);
      i = end;
    } else if (c == '"') {
      for (++i; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] == '$' || line[i] == '`') return std::nullopt;
        if (line[i] == '\\' && i + 1 < line.size() &&
            std::string("\"\\$`").find(line[i + 1]) != std::string::npos)
          ++i;
        word += line[i];
      }
      if (i == line.size()) return std::nullopt;
    } else if (c == '\\' && i + 1 < line.size()) {
      word += line[++i];
    } else if (std::string("|&;<>()$`*?[").find(c) != std::string::npos) {
      return std::nullopt;
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(word);
  if (words.empty() || words[0] != program) return std::nullopt;
  return words;
}

namespace {

// Reads a whole file.
std::string read_all(int fd) {
  std::string text;
  char buffer[4096];
  ::lseek(fd, 0, SEEK_SET);
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) text.append(buffer, n);
  return text;
}

// An unlinked temporary file's descriptor.
int scratch_file() {
  char name[] = "/tmp/trainer-in-process-XXXXXX";
  const int fd = ::mkstemp(name);
  if (fd >= 0) ::unlink(name);
  return fd;
}

void flush_all() {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
}

}  // namespace

ProcessResult run_trainer_in_process(const std::vector<std::string>& args) {
  static const bool routed = [] {
    runtime::route_torch_logs();  // as main does: LibTorch's warnings as our one-line warnings
    return true;
  }();
  (void)routed;
  std::vector<std::string> argv = {"trainer"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> pointers;
  for (auto& arg : argv) pointers.push_back(arg.data());
  pointers.push_back(nullptr);

  ProcessResult result;
  const int out = scratch_file(), err = scratch_file();
  EXPECT_TRUE(out >= 0 && err >= 0);
  if (out < 0 || err < 0) return result;
  flush_all();
  const int saved_out = ::dup(1), saved_err = ::dup(2);
  ::dup2(out, 1);
  ::dup2(err, 2);
  result.exit_code = cli::run_program(static_cast<int>(argv.size()), pointers.data());
  flush_all();
  ::dup2(saved_out, 1);
  ::dup2(saved_err, 2);
  ::close(saved_out);
  ::close(saved_err);
  result.out = read_all(out);
  result.err = read_all(err);
  ::close(out);
  ::close(err);
  return result;
}

}  // namespace trainer::testing
