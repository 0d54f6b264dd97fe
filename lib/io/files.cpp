// File helpers: whole-file reads with clear errors and atomic writes.
#include "lib/io/files.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include "lib/io/errors.h"

namespace trainer::io {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw InputError(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw InputError(fmt::format("cannot read {}", path));
  return buffer.str();
}

void write_file_atomic(const std::string& path, const std::string& data) {
  namespace fs = std::filesystem;
  fs::path target(path);
  if (target.has_parent_path()) fs::create_directories(target.parent_path());
  // A name no other writer uses, even another machine's process with the same pid writing to a
  // shared file system: O_EXCL refuses one that exists.
  std::random_device random;
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 16; ++attempt) {
    uint64_t suffix = (uint64_t{random()} << 32) ^ random();
    tmp = fmt::format("{}.tmp.{}.{:016x}", path, ::getpid(), suffix);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    throw std::runtime_error(fmt::format("cannot write {}: {}", tmp, std::strerror(errno)));
  }
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int error = errno;
      ::close(fd);
      std::remove(tmp.c_str());
      throw std::runtime_error(fmt::format("cannot write {}: {}", tmp, std::strerror(error)));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::close(fd) != 0) {
    int error = errno;
    std::remove(tmp.c_str());
    throw std::runtime_error(fmt::format("cannot write {}: {}", tmp, std::strerror(error)));
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw std::runtime_error(fmt::format("cannot rename {} to {}: {}", tmp, path, ec.message()));
  }
}

void write_json(const std::string& path, const nlohmann::ordered_json& value) {
  write_file_atomic(path, value.dump(2) + "\n");
}

nlohmann::ordered_json read_json(const std::string& path) {
  std::string text = read_file(path);
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(fmt::format("{} is not valid JSON: {}", path, e.what()));
  }
}

std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  if (dir.back() == '/') return dir + name;
  return dir + "/" + name;
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

}  // namespace trainer::io
