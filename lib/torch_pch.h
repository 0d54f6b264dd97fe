// The precompiled header of every target that uses LibTorch: parsing torch/torch.h once per
// build instead of once per translation unit is most of the build time on two cores.
#pragma once

#include <torch/torch.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
