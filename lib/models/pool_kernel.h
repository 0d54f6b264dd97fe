// The loops of BasicNet's fused ReLU, 2x2 max-pool and dropout (see fused_pool.h), torch-free:
// one output row at a time, from NCHW or channels-last float32 input, with a 4-bit code per output
// that the backward reads; AVX-512 where the processor has it, a scalar loop elsewhere.
#pragma once

#include <cstdint>

namespace trainer::models {

// SplitMix64's k-th output for a seed: a counter-based stream, so a dropout mask depends only on
// the seed drawn from the generator and each element's index, not on threads or memory layout.
inline uint64_t splitmix64(uint64_t seed, uint64_t k) {
  uint64_t z = seed + (k + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Per output element of the fused op: bits 0-1 the window's first maximum (row-major, as LibTorch
// scans it), bit 2 set when the maximum passed the ReLU, bit 3 set when dropout kept the element.
constexpr int kPass = 4, kKeep = 8;

// Dropout's parameters for one call: element e (its index in (n, i, j, channel) order) is kept
// when the e%2-th 32-bit half of splitmix64(seed, e/2) is below threshold; kept ones are scaled.
struct Mask {
  bool drop = false;
  uint64_t seed = 0, threshold = uint64_t{1} << 32;
  float scale = 1.0f;
  // Whether element e is kept, given bits = splitmix64(seed, e / 2) (one draw serves a pair).
  bool keep(uint64_t bits, uint64_t e) const {
    return ((bits >> ((e & 1) * 32)) & 0xffffffffull) < threshold;
  }
};

// Pools one output row, (j, channel) order, from a 2x2 window per output whose four corners are
// at offsets 0, sw, sh, sh + sw of `base`; channel ch is at ch * sc. ReLU, then dropout for the
// row's first element index e0. Writes the pooled values to `tile` and each output's code.
void pool_row(const float* base, int64_t c, int64_t ow, int64_t sc, int64_t sh, int64_t sw,
              const Mask& mask, uint64_t e0, float* tile, uint8_t* code);

// The backward of pool_row: spreads one row of gradients ((j, channel) order, already scaled) to
// the window element each output came from, zeros elsewhere.
void unpool_row(const float* tile, const uint8_t* code, int64_t c, int64_t ow, int64_t sc,
                int64_t sh, int64_t sw, float* base);

}  // namespace trainer::models
