// MNIST-format datasets from a directory (MNIST and Fashion-MNIST share the four IDX files):
// images kept as uint8 in memory and normalised per batch with the tutorial's mean and std.
#pragma once

#include <memory>
#include <string>

#include "lib/data/dataset.h"
#include "lib/data/mnist_defaults.h"

namespace trainer::data {

class MnistDataset : public Dataset {
 public:
  // Loads `train` (train-images-idx3-ubyte, train-labels-idx1-ubyte) or `test` (t10k-*) from
  // `dir`, each file plain or with a .gz suffix. Keeps the first `max_samples` examples when
  // max_samples >= 0. Throws InputError naming the missing or bad file, or images and labels
  // whose counts differ.
  MnistDataset(const std::string& dir, const std::string& split, int64_t max_samples = -1);
  // A dataset over given tensors: images uint8 [N, 28, 28], labels int64 [N].
  MnistDataset(torch::Tensor images, torch::Tensor labels);

  // The same data as MnistDataset(dir, split, max_samples), held once per machine: the decoded
  // split lives in `cache_dir`/datasets/mnist-<split>-<key>.safetensors (key: the IDX files' real
  // paths, sizes and modification times), written atomically by whichever process finds it
  // missing or stale, and mapped read-only by every process, which then share its pages. With
  // `verify`, a cache file is also checked against its CRC-32 and rewritten when damaged (let the
  // node's first rank verify, before the others load). With an empty `cache_dir` it decodes in
  // memory, as the plain constructor does; with one it cannot write, too, after one warning line
  // on stderr. Throws InputError as the plain constructor does.
  static std::shared_ptr<MnistDataset> load_shared(const std::string& dir, const std::string& split,
                                                   int64_t max_samples,
                                                   const std::string& cache_dir, bool verify);
  // The cache file this dataset's examples are mapped from ("" when held in memory).
  const std::string& cache_file() const { return cache_file_; }

  int64_t size() const override { return labels_.size(0); }
  // input: float [1, 28, 28] normalised; target: int64 scalar.
  Example get(int64_t index) const override;
  // {"x": float [B, 1, 28, 28], "labels": int64 [B]} in one index_select.
  std::optional<Batch> get_batch(const torch::Tensor& indices) const override;
  torch::Device device() const override { return images_.device(); }
  // A copy with images (uint8) and labels on `device`; nullptr when they take more than max_bytes.
  std::shared_ptr<const Dataset> to_device(const torch::Device& device,
                                           int64_t max_bytes) const override;

  const torch::Tensor& images() const { return images_; }
  const torch::Tensor& labels() const { return labels_; }

 private:
  torch::Tensor images_;  // uint8 [N, H, W]
  torch::Tensor labels_;  // int64 [N]
  std::string cache_file_;
};

// uint8 images [B, H, W] -> float [B, 1, H, W], scaled to [0, 1] and normalised.
torch::Tensor normalize_images(const torch::Tensor& images);

}  // namespace trainer::data
