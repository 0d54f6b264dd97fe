// Reader for the IDX format of MNIST and Fashion-MNIST, plain or gzip-compressed. Torch-free:
// it returns the dimensions and the raw unsigned bytes, checked against the header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainer::data {

struct IdxArray {
  std::vector<int64_t> dims;  // e.g. {60000, 28, 28} for images, {60000} for labels
  std::vector<uint8_t> data;  // row-major, size == product of dims
};

// Reads an IDX file of unsigned bytes (type code 0x08), gzip or plain. Throws InputError naming
// the file and what is wrong: missing file, corrupt gzip stream, wrong magic number, unsupported
// element type, data shorter or longer than the header promises.
IdxArray read_idx(const std::string& path);

}  // namespace trainer::data
