// NumPy's .npy file format (version 1.0), written by hand: what `trainer predict` saves its
// predictions and labels in, and the per-step loss curve, for numpy.load; the curve read back.
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

// A 2-D little-endian float64 array as npy_bytes writes it ('<f8', C order): its rows and the
// values row by row. Throws InputError "<source> is not a float64 .npy array of <columns>
// columns: ..." for anything else (another version, dtype or shape, a short file).
struct NpyMatrix {
  int64_t rows = 0;
  std::vector<double> values;  // rows x columns
};
NpyMatrix read_npy_f8_matrix(const std::string& bytes, int64_t columns, const std::string& source);

}  // namespace trainer::io
