// The bytes of the node caches of prepared data (trl/sft_cache.cpp, trl/dpo_cache.cpp): int64
// values, int32 lists and texts written in the machine's order, read back with every length
// checked.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace trainer::trl::cache_bytes {

inline void put(std::string& out, int64_t value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

inline void put(std::string& out, const std::vector<int32_t>& values) {
  put(out, static_cast<int64_t>(values.size()));
  if (!values.empty()) {
    out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int32_t));
  }
}

inline void put(std::string& out, const std::string& text) {
  put(out, static_cast<int64_t>(text.size()));
  out.append(text);
}

// Reads from bytes at `at`, false past the end.
struct Reader {
  const std::string& bytes;
  size_t at = 0;
  bool get(int64_t& value) {
    if (bytes.size() - at < sizeof value) return false;
    std::memcpy(&value, bytes.data() + at, sizeof value);
    at += sizeof value;
    return true;
  }
  bool get(std::vector<int32_t>& values) {
    int64_t n = 0;
    if (!get(n) || n < 0 || static_cast<uint64_t>(n) > (bytes.size() - at) / sizeof(int32_t)) {
      return false;
    }
    values.resize(static_cast<size_t>(n));
    // An empty vector's data() may be null, which memcpy may not be given.
    if (n > 0) std::memcpy(values.data(), bytes.data() + at, values.size() * sizeof(int32_t));
    at += values.size() * sizeof(int32_t);
    return true;
  }
  bool get(std::string& text) {
    int64_t n = 0;
    if (!get(n) || n < 0 || static_cast<uint64_t>(n) > bytes.size() - at) return false;
    text.assign(bytes, at, static_cast<size_t>(n));
    at += static_cast<size_t>(n);
    return true;
  }
};

}  // namespace trainer::trl::cache_bytes
