// The float32-activation Q8_0 kernel (matvec.cpp's block_rows_f32) on 512-bit registers, for CPUs with AVX-512
// F/BW/DQ/VL (matvec.cpp calls it when kernel_isa() is Isa::AVX512). A block of 32 weights widens to two vectors of
// 16 floats instead of four of 8, and each activation row then costs two loads and three multiply-adds per block
// instead of four and five. Measured on the default model (Q8_0, 30 layers), fused step, interleaved: one row
// 9.6 -> 8.7 ms, eight rows 28 -> 24.6 ms. Q4_0 / Q4_1 stay on AVX2: the same scheme made one row of SmolLM2's
// Q4_1 layers ~5% slower (widening nibbles to 512 bits costs more than the loads it saves), and a kernel's
// choice must not depend on the batch, or a row's result would.
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

// A Q8_0 block (f16 d | 32 x int8) -> w[0] its values 0..15, w[1] 16..31 as floats; d as a scalar.
static inline void widen512(const uint8_t* blk, __m512 w[2], float& d) {
    d = half(blk);
    w[0] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(load128(blk + 2)));
    w[1] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(load128(blk + 18)));
}

// Rows m0 .. m0 + FM - 1 of x [M, n] times weight rows [o0, o1). Per (o, m): per block, (w[0] * x[0..15] +
// w[1] * x[16..31]) * d accumulated in 16 lanes, then their sum; the same operations in the same order whatever FM
// is, so a row's result is bit-identical in a batch and alone.
template <int FM>
static void rows512(const Weight& w, const float* x, float* y, int64_t m0, int64_t o0, int64_t o1) {
    const int64_t n = w.in, nb = n / G;
    const float* xt = x + m0 * n;                 // [FM, n]
    for (int64_t o = o0; o < o1; ++o) {
        const uint8_t* wr = w.data + o * w.row_bytes;
        prefetch_row(w.data, w.row_bytes, o, o1 - 1);
        __m512 acc[FM];
        for (int r = 0; r < FM; ++r) acc[r] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            __m512 wv[2];
            float d;
            widen512(wr + b * 34, wv, d);
            const __m512 dv = _mm512_set1_ps(d);
            for (int r = 0; r < FM; ++r) {
                const float* xb = xt + r * n + b * G;
                const __m512 part = _mm512_fmadd_ps(wv[1], _mm512_loadu_ps(xb + 16),
                                                    _mm512_mul_ps(wv[0], _mm512_loadu_ps(xb)));
                acc[r] = _mm512_fmadd_ps(part, dv, acc[r]);
            }
        }
        for (int r = 0; r < FM; ++r) y[(m0 + r) * w.out + o] = _mm512_reduce_add_ps(acc[r]);
    }
}

// simd.h's in_tiles with tiles of 8 rows: per 32 output rows, full tiles, then one tile of what is left.
template <int FM>
static void rest512(int64_t rest, const Weight& w, const float* x, float* y, int64_t m0, int64_t a, int64_t b) {
    if constexpr (FM > 0) {
        if (rest == FM) return rows512<FM>(w, x, y, m0, a, b);
        rest512<FM - 1>(rest, w, x, y, m0, a, b);
    }
}

void q8_0_rows_f32_avx512(const Weight& w, const float* x, float* y, int64_t M, int64_t o0, int64_t o1) {
    for (int64_t a = o0; a < o1; a += 32) {
        const int64_t b = a + 32 < o1 ? a + 32 : o1;
        int64_t m0 = 0;
        for (; m0 + 8 <= M; m0 += 8) rows512<8>(w, x, y, m0, a, b);
        rest512<7>(M - m0, w, x, y, m0, a, b);
    }
}

}  // namespace openafm

#pragma GCC pop_options
