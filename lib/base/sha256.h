// SHA-256 (FIPS 180-4): the digest of a file's bytes as cache keys and fingerprints use it.
#pragma once

#include <string>
#include <string_view>

namespace trainer::base {

// The SHA-256 of `data`, as 64 lowercase hex digits (what `sha256sum` prints).
std::string sha256_hex(std::string_view data);

}  // namespace trainer::base
