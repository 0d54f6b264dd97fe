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

// The most data an IDX file may promise (product of its dims): 4 GiB. A header promising more
// is rejected before anything is allocated.
inline constexpr uint64_t kMaxIdxDataBytes = uint64_t{4} << 30;

// Reads an IDX file of unsigned bytes (type code 0x08), gzip or plain. Throws InputError naming
// the file and what is wrong: missing file, corrupt gzip stream, wrong magic number, unsupported
// element type, data shorter or longer than the header promises, a header promising more than
// kMaxIdxDataBytes.
IdxArray read_idx(const std::string& path);

// Decodes the bytes of an IDX file held in memory: gzip-compressed when they start with gzip's
// magic (1f 8b, several members as gzip writes them), plain otherwise. A gzip stream is inflated
// no further than the size its header promises, so memory stays bounded by that size. Errors as
// read_idx's, naming `source`.
IdxArray decode_idx(const std::string& bytes, const std::string& source);

// Decodes uncompressed IDX bytes. Errors as read_idx's, naming `source`.
IdxArray parse_idx(const std::string& bytes, const std::string& source);

}  // namespace trainer::data
