// MNIST-format datasets: the four IDX files of a directory, held as uint8 tensors.
#include "lib/data/mnist.h"

#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <sys/stat.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/warn.h"
#include "lib/data/idx.h"
#include "lib/io/safetensors.h"

namespace trainer::data {
namespace {

// `dir/stem` or `dir/stem.gz`, whichever exists.
std::string find_file(const std::string& dir, const std::string& stem) {
  namespace fs = std::filesystem;
  // stat, not std::filesystem: LibTorch exports a copy of the latter that some builds bind to.
  struct stat info {};
  bool found = ::stat(dir.c_str(), &info) == 0;
  if (!found && errno != ENOENT) {
    throw InputError(fmt::format("dataset directory {}: {}", dir, std::strerror(errno)));
  }
  if (found && !S_ISDIR(info.st_mode)) {
    throw InputError(fmt::format(
        "dataset_dir {} is a file, not a directory (set it to the directory that holds the "
        "MNIST-format files)",
        dir));
  }
  if (!found) {
    throw InputError(fmt::format(
        "dataset directory {} does not exist (set dataset_dir to a directory with the MNIST-format "
        "files; Fashion-MNIST: apt-get install dataset-fashion-mnist)",
        dir));
  }
  for (const std::string& name : {stem, stem + ".gz"}) {
    fs::path path = fs::path(dir) / name;
    if (::lstat(path.c_str(), &info) == 0) return path.string();
  }
  throw InputError(fmt::format("dataset file {}/{}[.gz] is missing", dir, stem));
}

// The images and labels files of `split` ("train" or "test") in `dir`.
std::pair<std::string, std::string> split_files(const std::string& dir, const std::string& split) {
  if (split != "train" && split != "test") {
    throw InputError(fmt::format("unknown split '{}' (allowed: train, test)", split));
  }
  std::string prefix = split == "train" ? "train" : "t10k";
  return {find_file(dir, prefix + "-images-idx3-ubyte"),
          find_file(dir, prefix + "-labels-idx1-ubyte")};
}

// FNV-1a, 64 bits: a stable name for a cache key.
uint64_t fnv1a(const std::string& text) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

// What identifies a source file's content without reading it: real path, inode, size, and the
// times of its last change (ctime moves on every write and cannot be set back, as mtime can).
std::string describe_source(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return path;
  std::error_code ec;
  std::string real = std::filesystem::canonical(path, ec).string();
  return fmt::format("{}:{}:{}:{}.{:09d}:{}.{:09d}", ec ? path : real, info.st_ino, info.st_size,
                     info.st_mtim.tv_sec, info.st_mtim.tv_nsec, info.st_ctim.tv_sec,
                     info.st_ctim.tv_nsec);
}

constexpr const char* kCacheVersion = "mnist-cache-2";

torch::Tensor to_tensor(IdxArray&& array) {
  auto owned = std::make_shared<std::vector<uint8_t>>(std::move(array.data));
  return torch::from_blob(
      owned->data(), array.dims, [owned](void*) {}, torch::kUInt8);
}

}  // namespace

torch::Tensor normalize_images(const torch::Tensor& images) {
  return images.to(torch::kFloat).div_(255.0).sub_(kMnistMean).div_(kMnistStd).unsqueeze(1);
}

MnistDataset::MnistDataset(const std::string& dir, const std::string& split, int64_t max_samples) {
  auto [images_path, labels_path] = split_files(dir, split);
  IdxArray images = read_idx(images_path);
  IdxArray labels = read_idx(labels_path);
  if (images.dims.size() != 3) {
    throw InputError(fmt::format("{} has {} dimensions, expected 3 (count, rows, columns)",
                                 images_path, images.dims.size()));
  }
  if (labels.dims.size() != 1) {
    throw InputError(
        fmt::format("{} has {} dimensions, expected 1 (count)", labels_path, labels.dims.size()));
  }
  if (images.dims[0] != labels.dims[0]) {
    throw InputError(fmt::format("{} holds {} images but {} holds {} labels", images_path,
                                 images.dims[0], labels_path, labels.dims[0]));
  }
  for (uint8_t label : labels.data) {
    if (label > 9) {
      throw InputError(fmt::format("{} holds label {} (allowed: 0 to 9)", labels_path, label));
    }
  }
  images_ = to_tensor(std::move(images));
  labels_ = to_tensor(std::move(labels)).to(torch::kLong);
  if (max_samples >= 0 && max_samples < size()) {
    images_ = images_.narrow(0, 0, max_samples).clone();
    labels_ = labels_.narrow(0, 0, max_samples).clone();
  }
}

std::shared_ptr<MnistDataset> MnistDataset::load_shared(const std::string& dir,
                                                        const std::string& split,
                                                        int64_t max_samples,
                                                        const std::string& cache_dir, bool verify) {
  auto [images_path, labels_path] = split_files(dir, split);
  if (cache_dir.empty()) return std::make_shared<MnistDataset>(dir, split, max_samples);
  std::string source = fmt::format("{}|{}|{}", kCacheVersion, describe_source(images_path),
                                   describe_source(labels_path));
  std::string path = base::join_path(
      cache_dir, fmt::format("datasets/mnist-{}-{:016x}.safetensors", split, fnv1a(source)));
  auto narrowed = [&](std::shared_ptr<MnistDataset> dataset) {
    if (max_samples >= 0 && max_samples < dataset->size()) {  // views: nothing is copied
      dataset->images_ = dataset->images_.narrow(0, 0, max_samples);
      dataset->labels_ = dataset->labels_.narrow(0, 0, max_samples);
    }
    return dataset;
  };
  auto from_cache = [&](bool verify) -> std::shared_ptr<MnistDataset> {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return nullptr;
    try {
      io::MappedSafetensors mapped = io::map_safetensors(path, verify);
      if (mapped.metadata["source"] != source || mapped.tensors.size() != 2) return nullptr;
      if (verify && mapped.metadata["crc32"] != fmt::format("{:08x}", mapped.data_crc32))
        return nullptr;
      auto dataset =
          std::make_shared<MnistDataset>(mapped.tensors[0].second, mapped.tensors[1].second);
      dataset->cache_file_ = path;
      return narrowed(dataset);
    } catch (const std::exception&) {
      return nullptr;  // damaged or foreign: rebuilt below
    }
  };
  if (auto cached = from_cache(verify)) return cached;
  auto full = std::make_shared<MnistDataset>(dir, split);
  // A run killed while writing the cache left its temporary file: the next writer removes it.
  base::remove_stale_temporaries(std::filesystem::path(path).parent_path().string(),
                                 /*only_dead_writers=*/true);
  io::NamedTensors tensors = {{"images", full->images_}, {"labels", full->labels_}};
  try {
    io::save_safetensors(
        path, tensors,
        {{"source", source}, {"crc32", fmt::format("{:08x}", io::data_crc32(tensors))}});
  } catch (const std::exception& e) {
    base::warn(
        "cannot write the dataset cache {} ({}); this process keeps its own copy of the data", path,
        e.what());
  }
  if (auto cached = from_cache(false)) return cached;
  return narrowed(full);
}

MnistDataset::MnistDataset(torch::Tensor images, torch::Tensor labels)
    : images_(std::move(images)), labels_(std::move(labels)) {
  TORCH_CHECK(images_.dim() == 3 && images_.scalar_type() == torch::kUInt8,
              "MnistDataset: images must be uint8 [N, H, W]");
  TORCH_CHECK(labels_.dim() == 1 && labels_.size(0) == images_.size(0),
              "MnistDataset: labels must be [N] with N = number of images");
  labels_ = labels_.to(torch::kLong);
}

std::shared_ptr<const Dataset> MnistDataset::to_device(const torch::Device& device,
                                                       int64_t max_bytes) const {
  if (images_.nbytes() + labels_.nbytes() > static_cast<size_t>(std::max<int64_t>(0, max_bytes)))
    return nullptr;
  return std::make_shared<MnistDataset>(images_.to(device), labels_.to(device));
}

Example MnistDataset::get(int64_t index) const {
  return {normalize_images(images_[index].unsqueeze(0)).squeeze(0), labels_[index]};
}

std::optional<Batch> MnistDataset::get_batch(const torch::Tensor& indices) const {
  return Batch{{"x", normalize_images(images_.index_select(0, indices))},
               {"labels", labels_.index_select(0, indices)}};
}

}  // namespace trainer::data
