// The precompiled header of the torch-free library: nlohmann/json and fmt (header-only) are most
// of what each of its files costs to compile, so they are parsed once per build.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
