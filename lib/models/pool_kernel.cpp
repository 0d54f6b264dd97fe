// The fused pooling's row loops: scalar, and AVX-512 for channels-last input (chosen at run time).
#include "lib/models/pool_kernel.h"

#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace trainer::models {
namespace {

// Pools one output row, (j, channel) order, from a 2x2 window per output whose four corners are
// at offsets 0, sw, sh, sh + sw; channel ch is at ch * sc.
// Dropout follows, for the row's first element index e0.
void pool_row_scalar(const float* base, int64_t c, int64_t ow, int64_t sc, int64_t sh, int64_t sw,
                     const Mask& mask, uint64_t e0, float* tile, uint8_t* code) {
  // One SplitMix64 output serves two consecutive elements (Mask::keep).
  uint64_t pair = ~uint64_t{0}, bits = 0;
  for (int64_t j = 0; j < ow; ++j) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* q = base + 2 * j * sw + ch * sc;
      const float a = q[0], b = q[sw], d = q[sh], e = q[sh + sw];
      // LibTorch's scan: a later element wins only when greater (or NaN).
      float best = a;
      int index = 0;
      if (b > best || std::isnan(b)) best = b, index = 1;
      if (d > best || std::isnan(d)) best = d, index = 2;
      if (e > best || std::isnan(e)) best = e, index = 3;
      const bool pass = best > 0 || std::isnan(best);
      const uint64_t element = e0 + j * c + ch;
      bool keep = true;
      if (mask.drop) {
        if (element >> 1 != pair) pair = element >> 1, bits = splitmix64(mask.seed, pair);
        keep = mask.keep(bits, element);
      }
      tile[j * c + ch] = pass && keep ? best * mask.scale : 0.0f;
      code[j * c + ch] = static_cast<uint8_t>(index | (pass ? kPass : 0) | (keep ? kKeep : 0));
    }
  }
}

// The backward of pool_row: spreads one row of gradients ((j, channel) order, already scaled) to
// the window element each output came from, zeros elsewhere.
void unpool_row_scalar(const float* tile, const uint8_t* code, int64_t c, int64_t ow, int64_t sc,
                       int64_t sh, int64_t sw, float* base) {
  for (int64_t j = 0; j < ow; ++j) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const int m = code[j * c + ch];
      const float v = (m & (kPass | kKeep)) == (kPass | kKeep) ? tile[j * c + ch] : 0.0f;
      const int index = m & 3;
      float* q = base + 2 * j * sw + ch * sc;
      q[0] = index == 0 ? v : 0.0f;
      q[sw] = index == 1 ? v : 0.0f;
      q[sh] = index == 2 ? v : 0.0f;
      q[sh + sw] = index == 3 ? v : 0.0f;
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define TRAINER_HAVE_AVX512 1
// GCC 12's AVX-512 headers start some intrinsics from an undefined vector and then warn that it
// may be used uninitialized (it is not: every lane is written). Clang has no such warning.
#pragma GCC diagnostic push
#ifndef __clang__
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// The same two loops for channels-last input (sc == 1, an even number of channels), 16 channels
// at a time with AVX-512 (F, BW, VL, and DQ for the mask's 64-bit multiplies).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) void pool_row_avx512(
    const float* base, int64_t c, int64_t ow, int64_t sh, int64_t sw, const Mask& mask, uint64_t e0,
    float* tile, uint8_t* code) {
  const __m512 zero = _mm512_setzero_ps(), scale = _mm512_set1_ps(mask.scale);
  const bool all_kept = !mask.drop || mask.threshold > 0xffffffffull;
  const __m512i threshold =
      _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(all_kept ? 0 : mask.threshold)));
  const __m512i seed = _mm512_set1_epi64(static_cast<long long>(mask.seed));
  const __m512i gamma = _mm512_set1_epi64(static_cast<long long>(0x9E3779B97F4A7C15ull));
  const __m512i c1 = _mm512_set1_epi64(static_cast<long long>(0xBF58476D1CE4E5B9ull));
  const __m512i c2 = _mm512_set1_epi64(static_cast<long long>(0x94D049BB133111EBull));
  const __m512i steps = _mm512_set_epi64(8, 7, 6, 5, 4, 3, 2, 1);
  for (int64_t j = 0; j < ow; ++j) {
    for (int64_t ch = 0; ch < c; ch += 16) {
      const __mmask16 lanes = c - ch >= 16 ? __mmask16(0xffff) : __mmask16((1u << (c - ch)) - 1);
      const float* q = base + 2 * j * sw + ch;
      const __m512 a = _mm512_maskz_loadu_ps(lanes, q), b = _mm512_maskz_loadu_ps(lanes, q + sw),
                   d = _mm512_maskz_loadu_ps(lanes, q + sh),
                   e = _mm512_maskz_loadu_ps(lanes, q + sh + sw);
      __m512 best = a;
      __m512i index = _mm512_setzero_si512();
      // A later element wins when greater or NaN, as in the scalar loop.
      __mmask16 t =
          _mm512_cmp_ps_mask(b, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q);
      best = _mm512_mask_blend_ps(t, best, b);
      index = _mm512_mask_blend_epi32(t, index, _mm512_set1_epi32(1));
      t = _mm512_cmp_ps_mask(d, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(d, d, _CMP_UNORD_Q);
      best = _mm512_mask_blend_ps(t, best, d);
      index = _mm512_mask_blend_epi32(t, index, _mm512_set1_epi32(2));
      t = _mm512_cmp_ps_mask(e, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(e, e, _CMP_UNORD_Q);
      best = _mm512_mask_blend_ps(t, best, e);
      index = _mm512_mask_blend_epi32(t, index, _mm512_set1_epi32(3));
      const __mmask16 pass =
          _mm512_cmp_ps_mask(best, zero, _CMP_GT_OQ) | _mm512_cmp_ps_mask(best, best, _CMP_UNORD_Q);
      // Sixteen 32-bit halves of splitmix64(seed, k) for the eight pairs k this block covers,
      // lane 2i the low half of pair i: the scalar Mask::keep's order.
      __mmask16 keep = 0xffff;
      if (!all_kept) {
        const __m512i k = _mm512_add_epi64(
            _mm512_set1_epi64(static_cast<long long>((e0 + j * c + ch) >> 1)), steps);
        __m512i z = _mm512_add_epi64(seed, _mm512_mullo_epi64(k, gamma));
        z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)), c1);
        z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), c2);
        z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
        keep = _mm512_cmplt_epu32_mask(z, threshold);
      }
      _mm512_mask_storeu_ps(tile + j * c + ch, lanes,
                            _mm512_maskz_mul_ps(pass & keep, best, scale));
      index = _mm512_mask_or_epi32(index, pass, index, _mm512_set1_epi32(kPass));
      index = _mm512_mask_or_epi32(index, keep, index, _mm512_set1_epi32(kKeep));
      _mm512_mask_cvtepi32_storeu_epi8(code + j * c + ch, lanes, index);
    }
  }
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void unpool_row_avx512(const float* tile,
                                                                            const uint8_t* code,
                                                                            int64_t c, int64_t ow,
                                                                            int64_t sh, int64_t sw,
                                                                            float* base) {
  const __m512i both = _mm512_set1_epi32(kPass | kKeep), three = _mm512_set1_epi32(3);
  for (int64_t j = 0; j < ow; ++j) {
    for (int64_t ch = 0; ch < c; ch += 16) {
      const __mmask16 lanes = c - ch >= 16 ? __mmask16(0xffff) : __mmask16((1u << (c - ch)) - 1);
      const __m512i m =
          _mm512_maskz_cvtepu8_epi32(lanes, _mm_maskz_loadu_epi8(lanes, code + j * c + ch));
      const __mmask16 live = _mm512_cmpeq_epi32_mask(_mm512_and_si512(m, both), both);
      const __m512 v = _mm512_maskz_loadu_ps(live & lanes, tile + j * c + ch);
      const __m512i index = _mm512_and_si512(m, three);
      float* q = base + 2 * j * sw + ch;
      _mm512_mask_storeu_ps(
          q, lanes, _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(index, _mm512_set1_epi32(0)), v));
      _mm512_mask_storeu_ps(
          q + sw, lanes,
          _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(index, _mm512_set1_epi32(1)), v));
      _mm512_mask_storeu_ps(
          q + sh, lanes,
          _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(index, _mm512_set1_epi32(2)), v));
      _mm512_mask_storeu_ps(q + sh + sw, lanes,
                            _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(index, three), v));
    }
  }
}

bool have_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  return yes;
}
#pragma GCC diagnostic pop
#endif

}  // namespace

void pool_row(const float* base, int64_t c, int64_t ow, int64_t sc, int64_t sh, int64_t sw,
              const Mask& mask, uint64_t e0, float* tile, uint8_t* code) {
#ifdef TRAINER_HAVE_AVX512
  if (sc == 1 && c % 2 == 0 && have_avx512())
    return pool_row_avx512(base, c, ow, sh, sw, mask, e0, tile, code);
#endif
  pool_row_scalar(base, c, ow, sc, sh, sw, mask, e0, tile, code);
}

void unpool_row(const float* tile, const uint8_t* code, int64_t c, int64_t ow, int64_t sc,
                int64_t sh, int64_t sw, float* base) {
#ifdef TRAINER_HAVE_AVX512
  if (sc == 1 && have_avx512()) return unpool_row_avx512(tile, code, c, ow, sh, sw, base);
#endif
  unpool_row_scalar(tile, code, c, ow, sc, sh, sw, base);
}

}  // namespace trainer::models
