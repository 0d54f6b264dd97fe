// File helpers: whole-file reads with clear errors and atomic writes.
#include "lib/io/files.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

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
  std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      throw std::runtime_error(fmt::format("cannot write {}: {}", tmp, std::strerror(errno)));
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw std::runtime_error(fmt::format("cannot write {}: {}", tmp, std::strerror(errno)));
    }
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
