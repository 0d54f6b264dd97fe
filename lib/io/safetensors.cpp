// safetensors reader and writer, and state-dict helpers on top of them.
#include "lib/io/safetensors.h"

#include <cstring>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "lib/io/errors.h"
#include "lib/io/files.h"

namespace trainer::io {
namespace {

const std::vector<std::pair<std::string, torch::ScalarType>>& dtypes() {
  static const std::vector<std::pair<std::string, torch::ScalarType>> table = {
      {"F64", torch::kDouble},    {"F32", torch::kFloat}, {"F16", torch::kHalf},
      {"BF16", torch::kBFloat16}, {"I64", torch::kLong},  {"I32", torch::kInt},
      {"I16", torch::kShort},     {"I8", torch::kChar},   {"U8", torch::kByte},
      {"BOOL", torch::kBool}};
  return table;
}

std::string dtype_name(torch::ScalarType type) {
  for (const auto& [name, t] : dtypes()) {
    if (t == type) return name;
  }
  throw std::invalid_argument(
      fmt::format("safetensors: dtype {} is not supported", c10::toString(type)));
}

}  // namespace

void save_safetensors(const std::string& path, const NamedTensors& tensors) {
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}};
  std::vector<torch::Tensor> cpu;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    torch::Tensor t = tensor.detach().to(torch::kCPU).contiguous();
    uint64_t bytes = t.numel() * t.element_size();
    header[name] = {{"dtype", dtype_name(t.scalar_type())},
                    {"shape", t.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    cpu.push_back(t);
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // the format pads the header to 8 bytes
  std::string out(8, '\0');
  uint64_t length = json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  out += json;
  out.reserve(out.size() + offset);
  for (const auto& t : cpu) {
    out.append(static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size());
  }
  write_file_atomic(path, out);
}

NamedTensors load_safetensors(const std::string& path) {
  std::string bytes = read_file(path);
  auto bad = [&](const std::string& what) {
    return InputError(fmt::format("corrupt safetensors file {}: {}", path, what));
  };
  if (bytes.size() < 8)
    throw bad(fmt::format("{} bytes, shorter than the 8-byte header length", bytes.size()));
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= uint64_t{static_cast<uint8_t>(bytes[i])} << (8 * i);
  if (length > bytes.size() - 8) {
    throw bad(fmt::format("header length {} runs past the end of the {}-byte file", length,
                          bytes.size()));
  }
  nlohmann::ordered_json header;
  try {
    header = nlohmann::ordered_json::parse(bytes.begin() + 8,
                                           bytes.begin() + 8 + static_cast<std::ptrdiff_t>(length));
  } catch (const nlohmann::json::exception& e) {
    throw bad(fmt::format("header is not valid JSON ({})", e.what()));
  }
  if (!header.is_object()) throw bad("header is not a JSON object");
  const uint64_t data_start = 8 + length;
  const uint64_t data_size = bytes.size() - data_start;
  NamedTensors result;
  try {
    for (const auto& [name, info] : header.items()) {
      if (name == "__metadata__") continue;
      std::string dtype = info.at("dtype").get<std::string>();
      auto it = std::find_if(dtypes().begin(), dtypes().end(),
                             [&](const auto& d) { return d.first == dtype; });
      if (it == dtypes().end())
        throw bad(fmt::format("tensor '{}' has unknown dtype '{}'", name, dtype));
      std::vector<int64_t> shape = info.at("shape").get<std::vector<int64_t>>();
      auto offsets = info.at("data_offsets").get<std::vector<uint64_t>>();
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data_size) {
        throw bad(fmt::format("tensor '{}' has data_offsets outside the {} bytes of data", name,
                              data_size));
      }
      int64_t numel = 1;
      for (int64_t d : shape) {
        if (d < 0) throw bad(fmt::format("tensor '{}' has a negative dimension", name));
        numel *= d;
      }
      uint64_t expected = static_cast<uint64_t>(numel) * c10::elementSize(it->second);
      if (offsets[1] - offsets[0] != expected) {
        throw bad(fmt::format("tensor '{}' has {} bytes of data, its shape needs {}", name,
                              offsets[1] - offsets[0], expected));
      }
      torch::Tensor t = torch::empty(shape, torch::TensorOptions().dtype(it->second));
      std::memcpy(t.data_ptr(), bytes.data() + data_start + offsets[0], expected);
      result.emplace_back(name, t);
    }
  } catch (const nlohmann::json::exception& e) {
    throw bad(fmt::format("malformed header entry ({})", e.what()));
  }
  return result;
}

NamedTensors state_dict(const torch::nn::Module& module) {
  NamedTensors tensors;
  for (const auto& item : module.named_parameters()) tensors.emplace_back(item.key(), item.value());
  for (const auto& item : module.named_buffers()) tensors.emplace_back(item.key(), item.value());
  return tensors;
}

void load_state_dict(torch::nn::Module& module, const NamedTensors& tensors,
                     const std::string& source) {
  std::map<std::string, torch::Tensor> by_name(tensors.begin(), tensors.end());
  auto targets = state_dict(module);
  for (const auto& [name, target] : targets) {
    auto it = by_name.find(name);
    if (it == by_name.end()) throw InputError(fmt::format("{}: missing tensor '{}'", source, name));
    if (it->second.sizes() != target.sizes()) {
      throw InputError(fmt::format("{}: tensor '{}' has shape {}, the model expects {}", source,
                                   name, fmt::join(it->second.sizes(), "x"),
                                   fmt::join(target.sizes(), "x")));
    }
  }
  if (by_name.size() != targets.size()) {
    for (const auto& [name, t] : tensors) {
      bool known = std::any_of(targets.begin(), targets.end(),
                               [&](const auto& p) { return p.first == name; });
      if (!known) throw InputError(fmt::format("{}: unexpected tensor '{}'", source, name));
    }
  }
  torch::NoGradGuard no_grad;
  for (auto& [name, target] : targets) target.copy_(by_name.at(name));
}

}  // namespace trainer::io
