// NumPy's .npy file format (version 1.0), written by hand: what `trainer predict` saves its
// predictions and labels in, for numpy.load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace trainer::io {

// The bytes of a C-order .npy file: `descr` is NumPy's dtype string ("<f4", "<i8", ...), `shape`
// the array's dimensions, `data` its little-endian elements (`size` bytes, which must equal the
// shape's element count times the element size; std::invalid_argument otherwise).
std::string npy_bytes(const std::string& descr, const std::vector<int64_t>& shape, const void* data,
                      size_t size);

}  // namespace trainer::io
