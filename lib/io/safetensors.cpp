// safetensors reader and writer, and state-dict helpers on top of them.
#include "lib/io/safetensors.h"

#include <cerrno>
#include <cstring>
#include <map>

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
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

// A tensor's entry in the header: where its bytes are and what they hold.
struct Entry {
  std::string name;
  torch::ScalarType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // offset from the start of the data section
  uint64_t bytes = 0;
};

struct Header {
  std::vector<Entry> entries;
  Metadata metadata;
  uint64_t data_start = 0;  // offset of the data section in the file
};

// Parses and checks the header of a safetensors file of `size` bytes starting at `bytes`.
Header parse_header(const char* bytes, uint64_t size, const std::string& path) {
  auto bad = [&](const std::string& what) {
    return InputError(fmt::format("corrupt safetensors file {}: {}", path, what));
  };
  if (size < 8) throw bad(fmt::format("{} bytes, shorter than the 8-byte header length", size));
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= uint64_t{static_cast<uint8_t>(bytes[i])} << (8 * i);
  if (length > size - 8) {
    throw bad(fmt::format("header length {} runs past the end of the {}-byte file", length, size));
  }
  nlohmann::ordered_json json;
  try {
    json = nlohmann::ordered_json::parse(bytes + 8, bytes + 8 + length);
  } catch (const nlohmann::json::exception& e) {
    throw bad(fmt::format("header is not valid JSON ({})", e.what()));
  }
  if (!json.is_object()) throw bad("header is not a JSON object");
  Header header;
  header.data_start = 8 + length;
  const uint64_t data_size = size - header.data_start;
  try {
    for (const auto& [name, info] : json.items()) {
      if (name == "__metadata__") {
        for (const auto& [key, value] : info.items()) {
          if (value.is_string()) header.metadata[key] = value.get<std::string>();
        }
        continue;
      }
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
      header.entries.push_back({name, it->second, shape, offsets[0], expected});
    }
  } catch (const nlohmann::json::exception& e) {
    throw bad(fmt::format("malformed header entry ({})", e.what()));
  }
  return header;
}

uint32_t crc32_of(uint32_t crc, const char* data, uint64_t size) {
  while (size > 0) {
    auto chunk = static_cast<uInt>(std::min<uint64_t>(size, 1u << 30));
    crc = static_cast<uint32_t>(::crc32(crc, reinterpret_cast<const Bytef*>(data), chunk));
    data += chunk;
    size -= chunk;
  }
  return crc;
}

// A read-only mapping of a whole file, unmapped when the last tensor pointing into it goes.
struct Mapping {
  void* address = MAP_FAILED;
  size_t size = 0;
  ~Mapping() {
    if (address != MAP_FAILED) ::munmap(address, size);
  }
};

}  // namespace

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const Metadata& metadata) {
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}};
  for (const auto& [key, value] : metadata) header["__metadata__"][key] = value;
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
  Header header = parse_header(bytes.data(), bytes.size(), path);
  NamedTensors result;
  for (const Entry& e : header.entries) {
    torch::Tensor t = torch::empty(e.shape, torch::TensorOptions().dtype(e.dtype));
    std::memcpy(t.data_ptr(), bytes.data() + header.data_start + e.begin, e.bytes);
    result.emplace_back(e.name, t);
  }
  return result;
}

MappedSafetensors map_safetensors(const std::string& path, bool checksum) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  struct stat info {};
  auto mapping = std::make_shared<Mapping>();
  if (::fstat(fd, &info) == 0 && info.st_size > 0) {
    mapping->size = static_cast<size_t>(info.st_size);
    // Private and writable: pages stay the page cache's, shared by every process that maps the
    // file, until one writes to a tensor; that page then becomes its own copy (nothing crashes,
    // nothing reaches the file).
    mapping->address = ::mmap(nullptr, mapping->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  }
  int error = errno;
  ::close(fd);
  if (mapping->address == MAP_FAILED) {
    if (mapping->size == 0) parse_header("", 0, path);  // throws: too short
    throw InputError(fmt::format("cannot map {}: {}", path, std::strerror(error)));
  }
  const char* bytes = static_cast<const char*>(mapping->address);
  Header header = parse_header(bytes, mapping->size, path);
  MappedSafetensors result;
  result.metadata = header.metadata;
  for (const Entry& e : header.entries) {
    void* data = const_cast<char*>(bytes + header.data_start + e.begin);
    result.tensors.emplace_back(
        e.name, torch::from_blob(
                    data, e.shape, [mapping](void*) {}, torch::TensorOptions().dtype(e.dtype)));
  }
  if (checksum) {
    result.data_crc32 = crc32_of(0, bytes + header.data_start, mapping->size - header.data_start);
  }
  return result;
}

uint32_t data_crc32(const NamedTensors& tensors) {
  uint32_t crc = 0;
  for (const auto& [name, tensor] : tensors) {
    torch::Tensor t = tensor.detach().to(torch::kCPU).contiguous();
    crc = crc32_of(crc, static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size());
  }
  return crc;
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
