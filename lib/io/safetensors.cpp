// safetensors reader and writer, and state-dict helpers on top of them.
#include "lib/io/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/hf_files.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"

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

torch::ScalarType scalar_type(const std::string& dtype) {
  for (const auto& [name, t] : dtypes()) {
    if (name == dtype) return t;
  }
  // parse_safetensors_header accepts only the dtypes of its table, which is this one's.
  throw std::logic_error(fmt::format("safetensors: no LibTorch type for dtype '{}'", dtype));
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

// The live mappings of map_safetensors (address -> size), which release_mapped_pages may act on.
std::mutex& mappings_mutex() {
  static std::mutex mutex;
  return mutex;
}
std::map<uintptr_t, size_t>& live_mappings() {
  static std::map<uintptr_t, size_t> mappings;
  return mappings;
}

// A read-only mapping of a whole file, unmapped when the last tensor pointing into it goes.
struct Mapping {
  void* address = MAP_FAILED;
  size_t size = 0;
  void map(int fd, size_t bytes) {
    size = bytes;
    // Private and writable: pages stay the page cache's, shared by every process that maps the
    // file, until one writes to a tensor; that page then becomes its own copy (nothing crashes,
    // nothing reaches the file).
    address = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (address == MAP_FAILED) return;
    std::lock_guard<std::mutex> lock(mappings_mutex());
    live_mappings()[reinterpret_cast<uintptr_t>(address)] = size;
  }
  ~Mapping() {
    if (address == MAP_FAILED) return;
    {
      std::lock_guard<std::mutex> lock(mappings_mutex());
      live_mappings().erase(reinterpret_cast<uintptr_t>(address));
    }
    ::munmap(address, size);
  }
};

}  // namespace

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const Metadata& metadata, base::WriteBatch* batch) {
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
  // The tensors go to the file from their own memory: no second copy of a model is made.
  std::vector<std::string_view> pieces = {out};
  for (const auto& t : cpu) {
    const size_t bytes = static_cast<size_t>(t.numel()) * t.element_size();
    if (bytes > 0) pieces.emplace_back(static_cast<const char*>(t.data_ptr()), bytes);
  }
  base::write_file_atomic(path, pieces, batch);
}

NamedTensors load_safetensors(const std::string& path) {
  std::string bytes = base::read_file(path, SIZE_MAX, "", /*allow_pipes=*/false);
  SafetensorsHeader header = parse_safetensors_header(bytes.data(), bytes.size(), path);
  NamedTensors result;
  for (const SafetensorsEntry& e : header.entries) {
    torch::Tensor t = torch::empty(e.shape, torch::TensorOptions().dtype(scalar_type(e.dtype)));
    // An empty tensor's data_ptr() is null, which memcpy may not take even for 0 bytes.
    if (e.end > e.begin) {
      std::memcpy(t.data_ptr(), bytes.data() + header.data_start + e.begin, e.end - e.begin);
    }
    result.emplace_back(e.name, t);
  }
  return result;
}

MappedSafetensors map_safetensors(const std::string& path, bool checksum) {
  int fd = base::open_for_reading(path, "", /*allow_pipes=*/false);
  struct stat info {};
  auto mapping = std::make_shared<Mapping>();
  if (::fstat(fd, &info) == 0 && info.st_size > 0) {
    mapping->map(fd, static_cast<size_t>(info.st_size));
  }
  int error = errno;
  ::close(fd);
  if (mapping->address == MAP_FAILED) {
    if (mapping->size == 0) parse_safetensors_header("", 0, path);  // throws: too short
    throw InputError(fmt::format("cannot map {}: {}", path, std::strerror(error)));
  }
  const char* bytes = static_cast<const char*>(mapping->address);
  SafetensorsHeader header = parse_safetensors_header(bytes, mapping->size, path);
  MappedSafetensors result;
  result.metadata = header.metadata;
  for (const SafetensorsEntry& e : header.entries) {
    void* data = const_cast<char*>(bytes + header.data_start + e.begin);
    result.tensors.emplace_back(e.name, torch::from_blob(
                                            data, e.shape, [mapping](void*) {},
                                            torch::TensorOptions().dtype(scalar_type(e.dtype))));
  }
  if (checksum) {
    result.data_crc32 = crc32_of(0, bytes + header.data_start, mapping->size - header.data_start);
  }
  return result;
}

void release_mapped_pages(const torch::Tensor& tensor) {
  if (!tensor.defined() || !tensor.has_storage()) return;
  const auto begin = reinterpret_cast<uintptr_t>(tensor.storage().data());
  const uintptr_t end = begin + tensor.storage().nbytes();
  std::lock_guard<std::mutex> lock(mappings_mutex());
  auto it = live_mappings().upper_bound(begin);
  if (it == live_mappings().begin()) return;
  --it;
  if (end > it->first + it->second) return;  // not (wholly) inside a mapping
  // Only the pages the tensor's bytes fill alone: a page shared with a neighbour stays.
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (begin + page - 1) / page * page;
  const uintptr_t last = end / page * page;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

namespace {

// Whether every value is finite, the exponent bits read in place: all ones is an infinity or a NaN.
template <typename Bits>
bool exponents_finite(const torch::Tensor& t, Bits exponent) {
  const auto* bits = static_cast<const Bits*>(t.data_ptr());
  Bits all = 0;  // one pass, no early exit: it vectorises
  for (int64_t i = 0, n = t.numel(); i < n; ++i) {
    all |= static_cast<Bits>(((bits[i] & exponent) == exponent) ? 1 : 0);
  }
  return all == 0;
}

}  // namespace

bool all_finite(const torch::Tensor& t) {
  if (t.is_cpu() && t.is_contiguous()) {
    switch (t.scalar_type()) {
      case torch::kFloat:
        return exponents_finite<uint32_t>(t, 0x7f800000u);
      case torch::kBFloat16:
        return exponents_finite<uint16_t>(t, 0x7f80u);
      case torch::kHalf:
        return exponents_finite<uint16_t>(t, 0x7c00u);
      default:
        break;
    }
  }
  return torch::isfinite(t).all().item<bool>();
}

uint32_t data_crc32(const NamedTensors& tensors) {
  uint32_t crc = 0;
  for (const auto& [name, tensor] : tensors) {
    torch::Tensor t = tensor.detach().to(torch::kCPU).contiguous();
    crc = crc32_of(crc, static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size());
  }
  return crc;
}

std::vector<std::string> save_model_weights(const std::string& dir, const NamedTensors& tensors,
                                            uint64_t max_shard_bytes, base::WriteBatch* batch) {
  uint64_t total = 0;
  std::vector<NamedTensors> shards(1);
  uint64_t in_shard = 0;
  for (const auto& item : tensors) {
    const uint64_t bytes = item.second.numel() * item.second.element_size();
    if (!shards.back().empty() && in_shard + bytes > max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(item);
    in_shard += bytes;
    total += bytes;
  }
  if (total <= max_shard_bytes || shards.size() == 1) {
    save_safetensors(base::join_path(dir, base::hf::kWeights), tensors, {}, batch);
    return {base::hf::kWeights};
  }
  std::vector<std::string> names;
  nlohmann::ordered_json map = nlohmann::ordered_json::object();
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string name =
        fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
    save_safetensors(base::join_path(dir, name), shards[i], {}, batch);
    for (const auto& [key, t] : shards[i]) map[key] = name;
    names.push_back(name);
  }
  nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}}, {"weight_map", map}};
  base::write_file_atomic(base::join_path(dir, base::hf::kWeightsIndex), index.dump(2) + "\n",
                          batch);
  names.push_back(base::hf::kWeightsIndex);
  return names;
}

std::vector<std::string> model_weight_files(const std::string& dir, const std::string& hint) {
  const std::string single = base::join_path(dir, base::hf::kWeights);
  const std::string index_path = base::join_path(dir, base::hf::kWeightsIndex);
  struct stat info {};
  if (::stat(single.c_str(), &info) == 0) return {single};
  if (::stat(index_path.c_str(), &info) != 0) {
    throw InputError(
        fmt::format("{} holds no model.safetensors or model.safetensors.index.json{}", dir, hint));
  }
  auto index = base::read_json_object(index_path);
  if (!index.contains("weight_map") || !index["weight_map"].is_object()) {
    throw InputError(
        fmt::format("{}: weight_map is missing (an object of tensor name -> file)", index_path));
  }
  std::vector<std::string> files;
  for (const auto& item : index["weight_map"].items()) {
    const auto& value = item.value();
    if (!value.is_string() || value.get<std::string>().empty() ||
        value.get<std::string>().find('/') != std::string::npos ||
        value.get<std::string>() == "..") {
      throw InputError(fmt::format("{}: weight_map[\"{}\"] is {}, not a file of the folder",
                                   index_path, item.key(), base::shown(value)));
    }
    const std::string path = base::join_path(dir, value.get<std::string>());
    if (std::find(files.begin(), files.end(), path) != files.end()) continue;
    if (::stat(path.c_str(), &info) != 0) {
      throw InputError(
          fmt::format("{}: shard {} (of tensor {}) does not exist", index_path, path, item.key()));
    }
    files.push_back(path);
  }
  return files;
}

NamedTensors map_model_weights(const std::string& dir) {
  NamedTensors out;
  for (const auto& file : model_weight_files(dir)) {
    for (auto& item : map_safetensors(file).tensors) out.push_back(std::move(item));
  }
  return out;
}

NamedTensors state_dict(const torch::nn::Module& module) {
  NamedTensors tensors;
  for (const auto& item : module.named_parameters()) tensors.emplace_back(item.key(), item.value());
  for (const auto& item : module.named_buffers()) tensors.emplace_back(item.key(), item.value());
  return tensors;
}

void load_state_dict(torch::nn::Module& module, const NamedTensors& tensors,
                     const std::string& source, const LoadCheck& check) {
  std::map<std::string, torch::Tensor> by_name(tensors.begin(), tensors.end());
  auto targets = state_dict(module);
  for (const auto& [name, target] : targets) {
    auto it = by_name.find(name);
    if (it == by_name.end()) throw InputError(fmt::format("{}: missing tensor '{}'", source, name));
    if (it->second.sizes() != target.sizes()) {
      throw InputError(fmt::format("{}: tensor '{}' has shape {}, the model expects {}", source,
                                   name, base::dims_text(it->second.sizes().vec()),
                                   base::dims_text(target.sizes().vec())));
    }
  }
  if (by_name.size() != targets.size()) {
    for (const auto& tensor : tensors) {
      const std::string& name = tensor.first;
      bool known = std::any_of(targets.begin(), targets.end(),
                               [&](const auto& p) { return p.first == name; });
      if (!known) throw InputError(fmt::format("{}: unexpected tensor '{}'", source, name));
    }
  }
  torch::NoGradGuard no_grad;
  for (auto& [name, target] : targets) {
    const torch::Tensor& from = by_name.at(name);
    if (check) check(name, from);
    target.copy_(from);
    release_mapped_pages(from);
  }
}

}  // namespace trainer::io
