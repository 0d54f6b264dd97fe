// File helpers: whole-file reads with clear errors and atomic writes.
#include "lib/base/files.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <regex>

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <ftw.h>
#include <poll.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/base/errors.h"
#include "lib/base/json_text.h"

namespace trainer::base {

int open_for_reading(const std::string& path, const std::string& label, bool allow_pipes) {
  // O_NONBLOCK: a FIFO in the file's place must not block the open.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    throw InputError(fmt::format("cannot open {}{}: {}", label, path, std::strerror(errno)));
  }
  struct stat info {};
  ::fstat(fd, &info);
  // A directory or a device read as a file would fail late or never end (/dev/zero); a pipe is
  // fine where it is asked for (trainer train /dev/stdin < config.json).
  if (!S_ISREG(info.st_mode) && !(allow_pipes && S_ISFIFO(info.st_mode))) {
    ::close(fd);
    throw InputError(fmt::format(
        "cannot read {}{}: it is {}, not a file", label, path,
        S_ISDIR(info.st_mode) ? "a directory"
                              : (allow_pipes ? "a device or socket" : "a device, pipe or socket")));
  }
  return fd;
}

bool is_directory(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

bool is_regular_file(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

bool exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 || (errno != ENOENT && errno != ENOTDIR);
}

std::string path_problem(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0) return "";
  if (errno == ENOENT || errno == ENOTDIR) return "does not exist";
  return fmt::format("cannot be read: {}", std::strerror(errno));
}

std::string read_file(const std::string& path, size_t max_bytes, const std::string& label,
                      bool allow_pipes) {
  int fd = open_for_reading(path, label, allow_pipes);
  struct stat info {};
  ::fstat(fd, &info);
  std::string content;
  if (S_ISREG(info.st_mode)) content.reserve(std::min<size_t>(info.st_size, max_bytes));
  char buffer[1 << 16];
  // A FIFO in a folder may have no writer at all; a pipe from the shell (/dev/stdin, a symlink to
  // pipe:[...]) has one, however slow.
  struct stat node {};
  const bool named_fifo = ::lstat(path.c_str(), &node) == 0 && S_ISFIFO(node.st_mode);
  while (true) {
    // Opened without waiting for a writer, a pipe reads as empty until one comes: poll first
    // (it waits for data, or for a writer that came and went); a named FIFO no longer than
    // kPipeWaitSeconds without data: one nobody writes is an error, not a hang.
    if (S_ISFIFO(info.st_mode)) {
      pollfd ready{fd, POLLIN, 0};
      const int polled = ::poll(&ready, 1, named_fifo ? kPipeWaitSeconds * 1000 : -1);
      if (polled < 0 && errno == EINTR) continue;
      if (polled == 0) {
        ::close(fd);
        throw InputError(
            fmt::format("cannot read {}{}: it is a FIFO that sent no data for {} "
                        "seconds (nothing writes it?)",
                        label, path, kPipeWaitSeconds));
      }
    }
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) {
      int error = errno;
      ::close(fd);
      throw InputError(fmt::format("cannot read {}{}: {}", label, path, std::strerror(error)));
    }
    if (n == 0) break;
    if (content.size() + static_cast<size_t>(n) > max_bytes) {
      ::close(fd);
      throw InputError(
          fmt::format("cannot read {}{}: larger than {} bytes", label, path, max_bytes));
    }
    content.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return content;
}

namespace {

[[noreturn]] void write_failed(const std::string& path, int error) {
  bool full = error == ENOSPC || error == EFBIG || error == EDQUOT;
  throw std::runtime_error(fmt::format(
      "cannot write {}: {}{}", path, std::strerror(error),
      full && ::access(path.c_str(), F_OK) == 0 ? " (the file that was there is kept)" : ""));
}

// A log that cannot grow keeps what it holds: no note on a kept file.
[[noreturn]] void append_failed(const std::string& path, int error) {
  throw std::runtime_error(fmt::format("cannot write {}: {}", path, std::strerror(error)));
}

// Makes a rename in `dir` durable.
void sync_directory(const std::string& dir) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// Writes all of `data` to `fd`; returns 0, or the errno of the failure.
int write_all(int fd, std::string_view data) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : ENOSPC;
    p += n;
    left -= static_cast<size_t>(n);
  }
  return 0;
}

// Writes `data` to a new temporary file beside `path` and flushes it to the disk; returns its
// name. Nothing is left behind when it fails.
std::string write_temporary(const std::string& path, const std::vector<std::string_view>& pieces) {
  std::string parent = std::filesystem::path(path).parent_path().string();
  if (!parent.empty()) make_directories(parent);
  // A name no other writer uses, even another machine's process with the same pid writing to a
  // shared file system: O_EXCL refuses one that exists. remove_stale_temporaries knows its form.
  std::random_device random;
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 16; ++attempt) {
    uint64_t suffix = (uint64_t{random()} << 32) ^ random();
    tmp = fmt::format("{}.tmp.{}.{:016x}", path, ::getpid(), suffix);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) write_failed(path, errno);
  auto fail = [&](int error) {
    ::close(fd);
    std::remove(tmp.c_str());
    write_failed(path, error);
  };
  for (std::string_view piece : pieces) {
    if (int error = write_all(fd, piece)) fail(error);
  }
  if (::fsync(fd) != 0) fail(errno);
  if (::close(fd) != 0) {
    int error = errno;
    std::remove(tmp.c_str());
    write_failed(path, error);
  }
  return tmp;
}

void rename_into_place(const std::string& tmp, const std::string& path) {
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int error = errno;
    std::remove(tmp.c_str());
    throw std::runtime_error(
        fmt::format("cannot rename {} to {}: {}", tmp, path, std::strerror(error)));
  }
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& data, WriteBatch* batch) {
  write_file_atomic(path, std::vector<std::string_view>{data}, batch);
}

void write_file_atomic(const std::string& path, const std::vector<std::string_view>& pieces,
                       WriteBatch* batch) {
  std::string tmp = write_temporary(path, pieces);
  if (batch) {
    batch->staged_.emplace_back(tmp, path);
    return;
  }
  rename_into_place(tmp, path);
  sync_directory(std::filesystem::path(path).parent_path().string());
}

AppendFile::AppendFile(const std::string& path, bool truncate) : path_(path) {
  std::string parent = std::filesystem::path(path).parent_path().string();
  if (!parent.empty()) make_directories(parent);
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (truncate ? O_TRUNC : 0),
               0666);
  if (fd_ < 0) append_failed(path, errno);
}

AppendFile::~AppendFile() { ::close(fd_); }

void AppendFile::append(const std::string& data) {
  if (int error = write_all(fd_, data)) append_failed(path_, error);
}

void AppendFile::sync() {
  if (::fsync(fd_) != 0) append_failed(path_, errno);
}

WriteBatch::WriteBatch() = default;

WriteBatch::~WriteBatch() {
  for (const auto& [tmp, path] : staged_) std::remove(tmp.c_str());
}

void WriteBatch::remove_on_commit(const std::string& path) { removed_.push_back(path); }

bool WriteBatch::staged(const std::string& path) const {
  for (const auto& entry : staged_) {
    if (entry.second == path) return true;
  }
  return false;
}

void WriteBatch::commit() {
  // What would make a rename fail halfway is checked before the first one.
  for (const auto& [tmp, path] : staged_) {
    struct stat info {};
    if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
      throw std::runtime_error(
          fmt::format("cannot write {}: it is a directory (nothing of this run was saved)", path));
    }
  }
  std::vector<std::string> dirs;
  // The last write of a path wins, as it would have without the batch.
  for (size_t i = 0; i < staged_.size(); ++i) {
    const auto& [tmp, path] = staged_[i];
    bool later = false;
    for (size_t j = i + 1; j < staged_.size(); ++j) later = later || staged_[j].second == path;
    if (later) {
      std::remove(tmp.c_str());
      continue;
    }
    rename_into_place(tmp, path);
    dirs.push_back(std::filesystem::path(path).parent_path().string());
  }
  for (const auto& path : removed_) {
    if (!staged(path) && std::remove(path.c_str()) == 0) {
      dirs.push_back(std::filesystem::path(path).parent_path().string());
    }
  }
  staged_.clear();
  removed_.clear();
  std::sort(dirs.begin(), dirs.end());
  dirs.erase(std::unique(dirs.begin(), dirs.end()), dirs.end());
  for (const auto& dir : dirs) sync_directory(dir);
}

std::vector<std::string> make_directories(const std::string& dir, const std::string& label) {
  std::vector<std::string> created;
  std::string prefix = dir.front() == '/' ? "/" : "";
  size_t start = 0;
  while (start < dir.size()) {
    size_t slash = dir.find('/', start);
    if (slash == std::string::npos) slash = dir.size();
    std::string part = dir.substr(start, slash - start);
    start = slash + 1;
    if (part.empty()) continue;
    prefix += (prefix.empty() || prefix.back() == '/' ? "" : "/") + part;
    // A failure leaves nothing of what this call made ("new/../file/x" made new first).
    auto fail = [&](const std::string& why) {
      for (const std::string& made : created) ::rmdir(made.c_str());
      throw std::runtime_error(fmt::format("cannot create {} {}: {}", label, dir, why));
    };
    struct stat info {};
    if (::stat(prefix.c_str(), &info) == 0) {
      if (!S_ISDIR(info.st_mode)) fail(prefix + " is not a directory");
      continue;
    }
    if (errno != ENOENT || (::mkdir(prefix.c_str(), 0777) != 0 && errno != EEXIST)) {
      fail(std::strerror(errno));
    }
    created.insert(created.begin(), prefix);
  }
  return created;
}

std::vector<std::string> list_directory(const std::string& dir) {
  std::vector<std::string> names;
  DIR* stream = ::opendir(dir.c_str());
  if (!stream) return names;
  while (const dirent* entry = ::readdir(stream)) {
    std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(stream);
  std::sort(names.begin(), names.end());
  return names;
}

int remove_stale_temporaries(const std::string& dir, bool only_dead_writers) {
  static const std::regex temporary(R"(.+\.tmp\.([0-9]+)\.[0-9a-f]{16})");
  int removed = 0;
  for (const std::string& name : list_directory(dir)) {
    std::smatch match;
    if (!std::regex_match(name, match, temporary)) continue;
    if (only_dead_writers) {
      long pid = std::strtol(match[1].str().c_str(), nullptr, 10);
      if (pid <= 0 || pid > INT32_MAX ||
          !(::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)) {
        continue;
      }
    }
    if (std::remove(join_path(dir, name).c_str()) == 0) ++removed;
  }
  return removed;
}

void write_json(const std::string& path, const nlohmann::ordered_json& value, WriteBatch* batch) {
  write_file_atomic(path, value.dump(2) + "\n", batch);
}

nlohmann::ordered_json read_json(const std::string& path) {
  return parse_json(read_file(path, SIZE_MAX, "", /*allow_pipes=*/false), path);
}

nlohmann::ordered_json read_json_object(const std::string& path) {
  nlohmann::ordered_json value = read_json(path);
  if (!value.is_object()) {
    throw InputError(fmt::format("{} does not hold a JSON object (fix or remove it)", path));
  }
  return value;
}

std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  if (dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

void open_standard_streams() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
      // open returns the lowest free descriptor: this one.
      int opened = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
      if (opened >= 0 && opened != fd) ::close(opened);
    }
  }
}

std::string cache_dir() {
  auto get = [](const char* name) -> std::string {
    const char* value = std::getenv(name);
    return value ? value : "";
  };
  if (std::string dir = get("TRAINER_CACHE"); !dir.empty()) return dir;
  if (std::string dir = get("XDG_CACHE_HOME"); !dir.empty()) return join_path(dir, "trainer");
  if (std::string dir = get("HOME"); !dir.empty()) return join_path(dir, ".cache/trainer");
  return "";
}

void check_writable_dir(const std::string& dir, const std::string& label) {
  std::string existing = dir.empty() ? "." : dir;
  struct stat info {};
  while (::stat(existing.c_str(), &info) != 0) {
    // Missing, or under a file (ENOTDIR): the nearest existing part of the path says which.
    if (errno != ENOENT && errno != ENOTDIR) {
      throw InputError(fmt::format("{} {}: {}", label, dir, std::strerror(errno)));
    }
    const std::string parent = parent_dir(existing);
    if (parent == existing) break;
    existing = parent;
  }
  if (!S_ISDIR(info.st_mode)) {
    throw InputError(existing == dir ? fmt::format("{} {} is a file, not a directory", label, dir)
                                     : fmt::format("{} {}: {} is a file, not a directory", label,
                                                   dir, existing));
  }
  std::string probe = join_path(existing, ".trainer-probe-XXXXXX");
  if (::mkdtemp(probe.data()) == nullptr) {
    const int error = errno;
    throw InputError(fmt::format("{} {} cannot be written: {}{}", label, dir, std::strerror(error),
                                 existing == dir ? "" : fmt::format(" (in {})", existing)));
  }
  ::rmdir(probe.c_str());
}

std::vector<std::string> make_output_directory(const std::string& dir, const std::string& label) {
  struct stat info {};
  const bool found = ::stat(dir.c_str(), &info) == 0;
  // Missing, or under a file (ENOTDIR: make_directories names the file).
  if (!found && errno != ENOENT && errno != ENOTDIR) {
    throw InputError(fmt::format("{} {}: {}", label, dir, std::strerror(errno)));
  }
  if (found && !S_ISDIR(info.st_mode)) {
    throw InputError(fmt::format("{} {} is a file, not a directory", label, dir));
  }
  std::vector<std::string> created;
  if (!found) {
    try {
      created = make_directories(dir, label);
    } catch (const std::runtime_error& e) {
      throw InputError(e.what());
    }
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    throw InputError(fmt::format("{} {} is not writable: {}", label, dir, std::strerror(errno)));
  }
  return created;
}

std::string parent_dir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string base_name(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

void sync_path(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    int error = errno;
    if (fd >= 0) ::close(fd);
    throw std::runtime_error(
        fmt::format("cannot flush {} to the disk: {}", path, std::strerror(error)));
  }
  ::close(fd);
}

void move_into_place(const std::string& staged, const std::string& target) {
  struct stat st {};
  if (::lstat(target.c_str(), &st) == 0) {
    if (::renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) != 0) {
      throw std::runtime_error(
          fmt::format("cannot replace {} with {}: {}", target, staged, std::strerror(errno)));
    }
    remove_tree(staged);  // now the old folder
  } else if (::rename(staged.c_str(), target.c_str()) != 0) {
    throw std::runtime_error(
        fmt::format("cannot rename {} to {}: {}", staged, target, std::strerror(errno)));
  }
  sync_path(parent_dir(target));
}

bool remove_tree(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT;
  std::string doomed = path;
  const std::string base = base_name(path);
  if (base.rfind(".removing-", 0) != 0) {
    std::random_device random;
    doomed =
        join_path(parent_dir(path), fmt::format(".removing-{}.{:08x}", base, uint32_t{random()}));
    if (::rename(path.c_str(), doomed.c_str()) != 0) doomed = path;
  }
  int result = ::nftw(
      doomed.c_str(),
      [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p) == 0 ? 0 : 1; },
      16, FTW_DEPTH | FTW_PHYS);
  return result == 0;
}

}  // namespace trainer::base
