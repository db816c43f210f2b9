// The float32-activation Q8_0, Q5_0 and Q5_1 kernels (matvec.cpp's block_rows_f32, q5_f16.cpp's q5_block_rows) on
// 512-bit registers, for CPUs with AVX-512 F/BW/DQ/VL (called when kernel_isa() is Isa::AVX512). A block of 32
// weights widens to two vectors of 16 floats instead of four of 8 (a Q5 block's fifth bits by two masked ORs, where
// AVX2 spreads them through byte shuffles and compares), and each activation row then costs two loads and three
// multiply-adds per block instead of four and five. Measured, fused step, interleaved: the default model (Q8_0)
// one row 9.6 -> 8.7 ms, eight rows 28 -> 24.6 ms; SmolLM2 requantized to Q4_K_M (166 of its matrices Q5_0) one
// row 12.1 -> 11.3 ms, eight rows 38.6 -> 32.2 ms. Q4_0 / Q4_1 stay on AVX2: the same scheme made one row of
// SmolLM2's Q4_1 layers ~5% slower (their AVX2 widening is already two shuffles), and a kernel's choice must not
// depend on the batch, or a row's result would.
//
// Only this file is compiled for AVX-512, and only the code below the `#pragma`: the headers above it (the
// standard library's inline templates among them, and simd.h's AVX2 helpers, which the code below may inline)
// stay AVX2, so no AVX-512 instruction can reach a shared symbol that an AVX2-only CPU would run. Everything below
// is `static` or declared in kernels.h, and instantiates no standard library template.
#include "kernels.h"
#include "simd.h"

#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")

namespace openafm {

// A block -> w[0] its values 0..15, w[1] 16..31 as floats, d, and `shift`, the weight of the block's sum of x:
//   Q8_0 (f16 d | 32 x int8)                              W = d q              shift 0
//   Q5_0 (f16 d | u32 fifth bits | 16 B nibbles)          W = d (q - 16)       shift -16 d
//   Q5_1 (f16 d | f16 m | u32 fifth bits | 16 B nibbles)  W = d q + m          shift m
// (a Q5 code: value i's low four bits are byte i's low nibble for i < 16, byte i - 16's high one above; its fifth
// bit is bit i of the u32, set here by a masked OR.)
template <Format F>
static inline void widen512(const uint8_t* blk, __m512 w[2], float& d, float& shift) {
    d = half(blk);
    if constexpr (F == Format::Q8_0) {
        shift = 0.f;
        w[0] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(load128(blk + 2)));
        w[1] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(load128(blk + 18)));
    } else {
        constexpr int at = F == Format::Q5_1 ? 4 : 2;              // the fifth bits; the nibbles 4 bytes on
        shift = F == Format::Q5_1 ? half(blk + 2) : -16.f * d;
        const uint32_t fifth = (uint32_t)load32(blk + at);
        const __m512i bytes = _mm512_cvtepu8_epi32(load128(blk + at + 4));          // 16 x u32: byte i
        const __m512i sixteen = _mm512_set1_epi32(16);
        const __m512i lo = _mm512_and_si512(bytes, _mm512_set1_epi32(0x0F)), hi = _mm512_srli_epi32(bytes, 4);
        w[0] = _mm512_cvtepi32_ps(_mm512_mask_or_epi32(lo, (__mmask16)(fifth & 0xFFFF), lo, sixteen));
        w[1] = _mm512_cvtepi32_ps(_mm512_mask_or_epi32(hi, (__mmask16)(fifth >> 16), hi, sixteen));
    }
}

// Rows m0 .. m0 + FM - 1 of x [M, n] (block sums xs [M, nb]) times weight rows [o0, o1). Per (o, m): per block,
// (w[0] * x[0..15] + w[1] * x[16..31]) * d accumulated in 16 lanes, their sum, then the blocks' shift * sum x
// (Q5) in block order; the same operations in the same order whatever FM is, so a row's result is bit-identical
// in a batch and alone.
template <Format F, int FM>
static void rows512(const Weight& w, const float* x, const float* xs, float* y, int64_t m0, int64_t o0,
                    int64_t o1) {
    const int64_t n = w.in, nb = n / G, bb = F == Format::Q8_0 ? 34 : F == Format::Q5_0 ? 22 : 24;
    const float* xt = x + m0 * n;                 // [FM, n]
    const float* st = xs + m0 * nb;               // [FM, nb] (Q5 only)
    for (int64_t o = o0; o < o1; ++o) {
        const uint8_t* wr = w.data + o * w.row_bytes;
        prefetch_row(w.data, w.row_bytes, o, o1 - 1);
        __m512 acc[FM];
        float extra[FM];
        for (int r = 0; r < FM; ++r) { acc[r] = _mm512_setzero_ps(); extra[r] = 0.f; }
        for (int64_t b = 0; b < nb; ++b) {
            __m512 wv[2];
            float d, shift;
            widen512<F>(wr + b * bb, wv, d, shift);
            const __m512 dv = _mm512_set1_ps(d);
            for (int r = 0; r < FM; ++r) {
                const float* xb = xt + r * n + b * G;
                const __m512 part = _mm512_fmadd_ps(wv[1], _mm512_loadu_ps(xb + 16),
                                                    _mm512_mul_ps(wv[0], _mm512_loadu_ps(xb)));
                acc[r] = _mm512_fmadd_ps(part, dv, acc[r]);
                if constexpr (F != Format::Q8_0) extra[r] += shift * st[r * nb + b];
            }
        }
        for (int r = 0; r < FM; ++r) y[(m0 + r) * w.out + o] = _mm512_reduce_add_ps(acc[r]) + extra[r];
    }
}

// simd.h's in_tiles with tiles of 8 rows: per 32 output rows, full tiles, then one tile of what is left.
template <Format F, int FM>
static void rest512(int64_t rest, const Weight& w, const float* x, const float* xs, float* y, int64_t m0, int64_t a,
                    int64_t b) {
    if constexpr (FM > 0) {
        if (rest == FM) return rows512<F, FM>(w, x, xs, y, m0, a, b);
        rest512<F, FM - 1>(rest, w, x, xs, y, m0, a, b);
    }
}

template <Format F>
static void tiles512(const Weight& w, const float* x, const float* xs, float* y, int64_t M, int64_t o0, int64_t o1) {
    for (int64_t a = o0; a < o1; a += 32) {
        const int64_t b = a + 32 < o1 ? a + 32 : o1;
        int64_t m0 = 0;
        for (; m0 + 8 <= M; m0 += 8) rows512<F, 8>(w, x, xs, y, m0, a, b);
        rest512<F, 7>(M - m0, w, x, xs, y, m0, a, b);
    }
}

bool block_rows_f32_avx512(const Weight& w, const float* x, const float* xs, float* y, int64_t M, int64_t o0,
                           int64_t o1) {
    switch (w.format) {
        case Format::Q8_0: tiles512<Format::Q8_0>(w, x, xs, y, M, o0, o1); return true;
        case Format::Q5_0: tiles512<Format::Q5_0>(w, x, xs, y, M, o0, o1); return true;
        case Format::Q5_1: tiles512<Format::Q5_1>(w, x, xs, y, M, o0, o1); return true;
        default: return false;
    }
}

}  // namespace openafm

#pragma GCC pop_options
