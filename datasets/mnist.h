// MNIST-format datasets from a directory (MNIST and Fashion-MNIST share the four IDX files):
// images kept as uint8 in memory and normalised per batch with the tutorial's mean and std.
#pragma once

#include <memory>
#include <string>

#include "datasets/dataset.h"
#include "datasets/mnist_defaults.h"

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

  int64_t size() const override { return labels_.size(0); }
  // input: float [1, 28, 28] normalised; target: int64 scalar.
  Example get(int64_t index) const override;
  // {"x": float [B, 1, 28, 28], "labels": int64 [B]} in one index_select.
  std::optional<Batch> get_batch(const torch::Tensor& indices) const override;

  const torch::Tensor& images() const { return images_; }
  const torch::Tensor& labels() const { return labels_; }

 private:
  torch::Tensor images_;  // uint8 [N, H, W]
  torch::Tensor labels_;  // int64 [N]
};

// uint8 images [B, H, W] -> float [B, 1, H, W], scaled to [0, 1] and normalised.
torch::Tensor normalize_images(const torch::Tensor& images);

}  // namespace trainer::data
