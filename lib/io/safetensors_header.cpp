// safetensors header parsing and validation, torch-free: lib/io/safetensors.cpp maps the dtype
// names to LibTorch's types; fuzz/safetensors_fuzz.cpp feeds it arbitrary bytes.
#include "lib/io/safetensors_header.h"
#include <cstdio>
#include <map>

#include <algorithm>
#include <limits>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "lib/base/hf_files.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"

namespace trainer::io {

size_t safetensors_dtype_size(const std::string& dtype) {
  static const std::vector<std::pair<std::string, size_t>> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
      {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1}};
  for (const auto& [name, size] : sizes) {
    if (name == dtype) return size;
  }
  return 0;
}

namespace {

// "corrupt safetensors file <path>: <what>".
struct Corrupt {
  const std::string& path;
  InputError operator()(const std::string& what) const {
    return InputError(fmt::format("corrupt safetensors file {}: {}", path, what));
  }
};

// One tensor's entry of the header, checked: a known dtype, a shape of integers whose byte size
// does not overflow, and data_offsets within the `data_size` bytes of data that fit the shape.
SafetensorsEntry parse_entry(const std::string& name, const nlohmann::ordered_json& info,
                             uint64_t data_size, const Corrupt& bad) {
  std::string dtype = info.at("dtype").get<std::string>();
  size_t item_size = safetensors_dtype_size(dtype);
  if (item_size == 0) throw bad(fmt::format("tensor '{}' has unknown dtype '{}'", name, dtype));
  // Integers only: nlohmann would convert 1e300 to an integer type without a check.
  const auto& shape_json = info.at("shape");
  const auto& offsets_json = info.at("data_offsets");
  if (!shape_json.is_array() || !std::all_of(shape_json.begin(), shape_json.end(),
                                             [](const auto& d) { return d.is_number_integer(); })) {
    throw bad(fmt::format("tensor '{}' has a shape that is not a list of integers", name));
  }
  if (!offsets_json.is_array() ||
      !std::all_of(offsets_json.begin(), offsets_json.end(),
                   [](const auto& d) { return d.is_number_unsigned(); })) {
    throw bad(fmt::format("tensor '{}' has data_offsets that are not non-negative integers", name));
  }
  auto offsets = offsets_json.get<std::vector<uint64_t>>();
  if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data_size) {
    throw bad(
        fmt::format("tensor '{}' has data_offsets outside the {} bytes of data", name, data_size));
  }
  std::vector<int64_t> shape;
  for (const auto& d : shape_json) {
    if (d.is_number_unsigned() &&
        d.get<uint64_t>() > uint64_t{std::numeric_limits<int64_t>::max()}) {
      throw bad(fmt::format("tensor '{}' has a dimension of {}, more than 2^63 - 1", name,
                            d.get<uint64_t>()));
    }
    shape.push_back(d.get<int64_t>());
    if (shape.back() < 0) throw bad(fmt::format("tensor '{}' has a negative dimension", name));
  }
  // As Python's safetensors does: the running product must not overflow, even when a later
  // dimension is 0. int64_t, since LibTorch counts elements in int64_t.
  int64_t bytes_needed = static_cast<int64_t>(item_size);
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(bytes_needed, d, &bytes_needed)) {
      throw bad(fmt::format("tensor '{}' has shape {} whose size overflows 64 bits", name,
                            base::shape_text(shape)));
    }
  }
  uint64_t expected = static_cast<uint64_t>(bytes_needed);
  if (offsets[1] - offsets[0] != expected) {
    throw bad(fmt::format("tensor '{}' has {} bytes of data, its shape needs {}", name,
                          offsets[1] - offsets[0], expected));
  }
  return {name, dtype, std::move(shape), offsets[0], offsets[1]};
}

// Tensors may not share bytes, and together they cover the data section, as the safetensors
// library checks (it refuses a gap or bytes past the last tensor: bytes inserted or appended).
void check_no_overlap(const std::vector<SafetensorsEntry>& entries, uint64_t data_size,
                      const Corrupt& bad) {
  std::vector<const SafetensorsEntry*> by_offset;
  for (const auto& e : entries) {
    if (e.end > e.begin) by_offset.push_back(&e);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto* a, const auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i]->begin < by_offset[i - 1]->end) {
      throw bad(fmt::format("tensors '{}' and '{}' overlap in the data section",
                            by_offset[i - 1]->name, by_offset[i]->name));
    }
    if (by_offset[i]->begin > by_offset[i - 1]->end) {
      throw bad(fmt::format(
          "{} bytes lie between tensors '{}' and '{}' (the tensors must cover "
          "the data section)",
          by_offset[i]->begin - by_offset[i - 1]->end, by_offset[i - 1]->name, by_offset[i]->name));
    }
  }
  const uint64_t first = by_offset.empty() ? data_size : by_offset.front()->begin;
  const uint64_t last = by_offset.empty() ? 0 : by_offset.back()->end;
  if (first > 0 && !by_offset.empty()) {
    throw bad(
        fmt::format("{} bytes lie before the first tensor '{}' (the tensors must cover the "
                    "data section)",
                    first, by_offset.front()->name));
  }
  if (last < data_size) {
    throw bad(fmt::format(
        "{} bytes lie past the last tensor{} (the tensors must cover the data "
        "section)",
        data_size - last, by_offset.empty() ? "" : fmt::format(" '{}'", by_offset.back()->name)));
  }
}

}  // namespace

SafetensorsHeader parse_safetensors_header(const char* bytes, uint64_t size,
                                           const std::string& path) {
  const Corrupt bad{path};
  if (size < 8) throw bad(fmt::format("{} bytes, shorter than the 8-byte header length", size));
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= uint64_t{static_cast<uint8_t>(bytes[i])} << (8 * i);
  if (length > size - 8) {
    throw bad(fmt::format("header length {} runs past the end of the {}-byte file", length, size));
  }
  nlohmann::ordered_json json;
  try {
    json = base::parse_json(std::string_view(bytes + 8, length), "header");
  } catch (const InputError& e) {
    throw bad(e.what());  // "header is not valid JSON: ..."
  }
  if (!json.is_object()) throw bad("header is not a JSON object");
  SafetensorsHeader header;
  header.data_start = 8 + length;
  const uint64_t data_size = size - header.data_start;
  try {
    for (const auto& [name, info] : json.items()) {
      if (name == "__metadata__") {
        if (!info.is_object()) throw bad("__metadata__ is not a JSON object");
        for (const auto& [key, value] : info.items()) {
          if (!value.is_string()) {
            throw bad(fmt::format("__metadata__ key '{}' holds {}, not a string", key,
                                  base::json_text(value)));
          }
          header.metadata[key] = value.get<std::string>();
        }
        continue;
      }
      header.entries.push_back(parse_entry(name, info, data_size, bad));
    }
  } catch (const nlohmann::json::exception& e) {
    throw bad(fmt::format("malformed header entry ({})", base::json_error_text(e)));
  }
  check_no_overlap(header.entries, data_size, bad);
  return header;
}

bool is_model_weights_file(const std::string& name) {
  if (name == base::hf::kWeights || name == base::hf::kWeightsIndex) return true;
  unsigned a = 0, b = 0;
  char tail[32] = {0};
  return name.size() == 32 &&
         std::sscanf(name.c_str(), "model-%5u-of-%5u.%12s", &a, &b, tail) == 3 &&
         std::string(tail) == "safetensors";
}

uint64_t parse_file_size(const std::string& text, const std::string& what) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = text.substr(used);
  const std::map<std::string, double> units = {
      {"", 1},      {"B", 1},        {"KB", 1e3},        {"MB", 1e6},          {"GB", 1e9},
      {"TB", 1e12}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}};
  auto it = units.find(unit);
  if (used == 0 || it == units.end() || !(value > 0) || value * it->second > 1.8e19) {
    throw InputError(fmt::format(
        "{} {} is not allowed (a size such as 50GB, 500MB, 100KB, 5GiB, or a number of bytes)",
        what, base::shown_text(text)));
  }
  return static_cast<uint64_t>(value * it->second);
}

}  // namespace trainer::io
