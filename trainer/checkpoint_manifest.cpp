// Checkpoint manifests (size and CRC-32 per file) and the folder operations behind atomic saves,
// with POSIX calls (LibTorch exports a copy of std::filesystem that some builds bind to).
#include "trainer/checkpoint_manifest.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <set>

#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/hf_files.h"
#include "lib/base/json_fields.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"

namespace trainer {

using json = nlohmann::ordered_json;

namespace {

constexpr size_t kMaxManifestBytes = 1 << 20;

}  // namespace

json Manifest::to_json() const {
  json out;
  out["format"] = kManifestFormat;
  out["global_step"] = global_step;
  out["model_name"] = model_name;
  out["world_size"] = world_size;
  out["total_batch_size"] = total_batch_size;
  out["save_only_model"] = save_only_model;
  if (sharded) out["sharded"] = true;
  json entries = json::object();
  for (const auto& f : files) {
    entries[f.name] = {{"size", f.size}, {"crc32", fmt::format("{:08x}", f.crc32)}};
  }
  out["files"] = std::move(entries);
  return out;
}

const ManifestFile* Manifest::find(const std::string& name) const {
  for (const auto& f : files) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

ManifestFile describe_file(const std::string& dir, const std::string& name) {
  std::string path = base::join_path(dir, name);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw std::runtime_error(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  }
  ManifestFile file{name, 0, 0};
  uLong crc = ::crc32(0L, Z_NULL, 0);
  std::vector<unsigned char> buffer(1 << 20);
  while (true) {
    ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int error = errno;
      ::close(fd);
      throw std::runtime_error(fmt::format("cannot read {}: {}", path, std::strerror(error)));
    }
    if (n == 0) break;
    crc = ::crc32(crc, buffer.data(), static_cast<uInt>(n));
    file.size += static_cast<uint64_t>(n);
  }
  ::close(fd);
  file.crc32 = static_cast<uint32_t>(crc);
  return file;
}

Manifest parse_manifest(const std::string& text, const std::string& source) {
  // A manifest is three levels deep: anything deeper is refused (and not built). A key given
  // twice in one object is refused too (the parser would keep the last one).
  bool too_deep = false;
  std::string repeated;
  std::vector<std::set<std::string>> objects;  // the keys of each open object
  json value = json::parse(
      text,
      [&](int depth, json::parse_event_t event, json& parsed) {
        if (depth > 3) too_deep = true;
        if (event == json::parse_event_t::object_start) objects.emplace_back();
        if (event == json::parse_event_t::object_end && !objects.empty()) objects.pop_back();
        if (event == json::parse_event_t::key && !objects.empty() &&
            !objects.back().insert(parsed.get<std::string>()).second && repeated.empty()) {
          repeated = parsed.get<std::string>();
        }
        return depth <= 3;
      },
      /*allow_exceptions=*/false);
  base::JsonFields f(value, source, base::JsonFields::Style::kQuotedKey);
  if (value.is_discarded()) f.fail_object("not valid JSON");
  if (too_deep) f.fail_object("values nested deeper than a manifest's");
  if (!repeated.empty()) {
    f.fail_object(fmt::format("key {} is given twice", base::json_text(repeated)));
  }
  if (!value.is_object()) f.fail_object("not a JSON object");
  const json& format = f.required("format");
  if (!format.is_string() || format.get<std::string>() != kManifestFormat) {
    f.fail_object(
        fmt::format("format is {}, expected \"{}\"", base::json_text(format), kManifestFormat));
  }
  auto integer = [&](const char* key, int64_t low) {
    const json& v = f.required(key);
    if (!v.is_number_integer() || v.get<int64_t>() < low || v.get<int64_t>() > (int64_t{1} << 53))
      f.not_allowed(key, v, fmt::format("an integer in {}..2^53", low));
    return v.get<int64_t>();
  };
  Manifest m;
  m.global_step = integer("global_step", 0);
  m.world_size = integer("world_size", 1);
  m.total_batch_size = integer("total_batch_size", 1);
  if (m.world_size > 65536) f.fail("world_size", "is above 65536");
  m.model_name = f.string("model_name");
  m.save_only_model = f.boolean("save_only_model");
  if (value.contains("sharded")) m.sharded = f.boolean("sharded");
  const json& files = f.required("files");
  if (!files.is_object()) f.wrong_type("files", files, "an object");
  for (const auto& [name, entry] : files.items()) {
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        name.find('\0') != std::string::npos) {
      f.fail_object(fmt::format("file name {} is not a plain file name", base::json_text(name)));
    }
    if (!entry.is_object()) f.fail_object(fmt::format("the entry of {} is not an object", name));
    auto size = entry.find("size");
    auto crc = entry.find("crc32");
    if (size == entry.end() || !size->is_number_unsigned()) {
      f.fail_object(fmt::format("the entry of {} has no size (a non-negative integer)", name));
    }
    if (crc == entry.end() || !crc->is_string() || crc->get<std::string>().size() != 8 ||
        crc->get<std::string>().find_first_not_of("0123456789abcdef") != std::string::npos) {
      f.fail_object(fmt::format("the entry of {} has no crc32 (8 hexadecimal digits)", name));
    }
    m.files.push_back({name, size->get<uint64_t>(),
                       static_cast<uint32_t>(std::stoul(crc->get<std::string>(), nullptr, 16))});
  }
  return m;
}

std::string rank_state_name(int64_t rank) { return fmt::format("rank_state_{}.safetensors", rank); }

std::string sharded_state_name(int64_t rank, int64_t world_size) {
  return fmt::format("sharded_state_{}_of_{}.safetensors", rank, world_size);
}

std::vector<std::string> required_checkpoint_files(const Manifest& manifest) {
  // The weights: model.safetensors, an index with its shards, or a LoRA adapter (checked in
  // verify_checkpoint).
  std::vector<std::string> names = {"trainer_state.json", "training_args.json"};
  if (manifest.sharded) {
    for (int64_t r = 0; r < manifest.world_size; ++r)
      names.push_back(sharded_state_name(r, manifest.world_size));
  }
  if (!manifest.save_only_model) {
    if (!manifest.sharded) names.push_back("optimizer.pt");
    names.push_back("scheduler.json");
    for (int64_t r = 0; r < manifest.world_size; ++r) names.push_back(rank_state_name(r));
  }
  return names;
}

Manifest verify_checkpoint(const std::string& dir) {
  const std::string prefix = fmt::format("checkpoint {} is damaged", dir);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw InputError(fmt::format("checkpoint {} is not a directory{}", dir,
                                 errno == ENOENT ? " (it does not exist)" : ""));
  }
  std::string manifest_path = base::join_path(dir, kManifestName);
  if (::stat(manifest_path.c_str(), &st) != 0) {
    throw InputError(
        fmt::format("{}: it has no {} (not a complete checkpoint)", prefix, kManifestName));
  }
  std::string text;
  try {
    text = base::read_file(manifest_path, kMaxManifestBytes, "", /*allow_pipes=*/false);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", prefix, e.what()));
  }
  Manifest manifest = parse_manifest(text, fmt::format("{}: {}", prefix, kManifestName));
  for (const std::string& name : required_checkpoint_files(manifest)) {
    if (!manifest.find(name)) {
      throw InputError(fmt::format("{}: its manifest does not list {}", prefix, name));
    }
  }
  if (!manifest.sharded && !manifest.find(base::hf::kWeights) &&
      !manifest.find(base::hf::kWeightsIndex) && !manifest.find("adapter_model.safetensors")) {
    throw InputError(fmt::format(
        "{}: its manifest does not list model.safetensors (nor adapter_model.safetensors)",
        prefix));
  }
  for (const ManifestFile& expected : manifest.files) {
    std::string path = base::join_path(dir, expected.name);
    if (::lstat(path.c_str(), &st) != 0) {
      throw InputError(fmt::format("{}: {} is missing", prefix, expected.name));
    }
    if (!S_ISREG(st.st_mode)) {
      throw InputError(fmt::format("{}: {} is not a regular file", prefix, expected.name));
    }
    if (static_cast<uint64_t>(st.st_size) != expected.size) {
      throw InputError(fmt::format("{}: {} is {} bytes, its manifest says {}", prefix,
                                   expected.name, st.st_size, expected.size));
    }
    ManifestFile actual;
    try {
      actual = describe_file(dir, expected.name);
    } catch (const std::runtime_error& e) {
      throw InputError(fmt::format("{}: {}", prefix, e.what()));
    }
    if (actual.size != expected.size || actual.crc32 != expected.crc32) {
      throw InputError(fmt::format("{}: {} has CRC-32 {:08x}, its manifest says {:08x}", prefix,
                                   expected.name, actual.crc32, expected.crc32));
    }
  }
  return manifest;
}

std::optional<int64_t> checkpoint_step(const std::string& path) {
  const std::string name = base::base_name(path);
  const std::string prefix = "checkpoint-";
  if (!base::starts_with(name, prefix)) return std::nullopt;
  const std::string digits = name.substr(prefix.size());
  if (digits.empty() || digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  const int64_t step = std::stoll(digits);
  // checkpoint-007 is not checkpoint-7's name.
  if (name != fmt::format("checkpoint-{}", step)) return std::nullopt;
  return step;
}

std::string checkpoint_path(const std::string& output_dir, int64_t step) {
  return base::join_path(output_dir, fmt::format("checkpoint-{}", step));
}

std::vector<CheckpointDir> list_checkpoints(const std::string& output_dir) {
  std::vector<CheckpointDir> found;
  for (const std::string& name : base::list_directory(output_dir)) {
    std::optional<int64_t> step = checkpoint_step(name);
    if (!step) continue;
    std::string path = base::join_path(output_dir, name);
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    found.push_back({*step, path});
  }
  std::sort(found.begin(), found.end(),
            [](const CheckpointDir& a, const CheckpointDir& b) { return a.step < b.step; });
  return found;
}

int remove_stale_checkpoint_folders(const std::string& output_dir) {
  int removed = 0;
  for (const std::string& name : base::list_directory(output_dir)) {
    if (name.rfind(".tmp-checkpoint-", 0) != 0 && name.rfind(".removing-", 0) != 0) continue;
    if (base::remove_tree(base::join_path(output_dir, name))) ++removed;
  }
  return removed;
}

}  // namespace trainer
