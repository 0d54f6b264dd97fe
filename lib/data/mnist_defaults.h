// MNIST-format constants that torch-free code needs too (argument defaults and validation).
#pragma once

namespace trainer::data {

// Where Debian's dataset-fashion-mnist package installs its files (the build can point elsewhere).
#ifndef TRAINER_FASHION_MNIST_DIR
#define TRAINER_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"
#endif
inline constexpr const char* kFashionMnistDir = TRAINER_FASHION_MNIST_DIR;
// transforms.Normalize((0.1307), (0.3081)) from the tutorial.
inline constexpr double kMnistMean = 0.1307;
inline constexpr double kMnistStd = 0.3081;

}  // namespace trainer::data
