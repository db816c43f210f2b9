// Matvec kernels for Q5_0 / Q5_1 blocks (32 weights: a float16 scale, Q5_1's float16 minimum, a u32 of
// fifth bits and 16 bytes of nibbles) and for F16 / BF16 matrices, widened to float32 in the kernel.
//
//   Q5_0: W = d * (q - 16)  -> y += d (q.x) - 16 d sum x        Q5_1: W = d * q + m  -> y += d (q.x) + m sum x
#include "kernels.h"
#include "simd.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace openafm {

namespace {

// The 32 five-bit codes of a block (0..31).
template <Format F>
inline __m256i q5_codes(const uint8_t* blk) {
    constexpr int bits = F == Format::Q5_1 ? 4 : 2;
    return _mm256_or_si256(nibbles(blk + bits + 4), bits_to_bytes(blk + bits, 0x10));
}

// Float32 activations (xs: block_sums) or int8 ones (qa); per (o, m) the same operations whatever M is.
template <Format F, bool INT8, int FM>
void q5_block_rows(const Weight& w, const float* x, const QActs& a, const std::vector<float>& xs, float* y,
                   int64_t m0, int64_t o0, int64_t o1) {
    const int64_t n = w.in, nb = n / G, bytes = block_shape(F).bytes;
    const float* sums = INT8 ? a.ds.data() : xs.data();         // [M, nb]: sum x per block (int8: d_b sum q)
    constexpr int64_t M = FM;                                   // rows m0 .. m0 + FM - 1
    __m256 acc[FM];
    float extra[FM];
    for (int64_t o = o0; o < o1; ++o) {
        const uint8_t* wr = w.data + o * w.row_bytes;
        prefetch_row(w.data, w.row_bytes, o, o1 - 1);
        for (int64_t m = 0; m < M; ++m) { acc[m] = _mm256_setzero_ps(); extra[m] = 0.f; }
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t* blk = wr + b * bytes;
            const float d = half(blk);
            const float shift = F == Format::Q5_1 ? half(blk + 2) : -16.f * d;   // times the block's sum of x
            const __m256i q = q5_codes<F>(blk);
            __m256 wv[4];
            if constexpr (!INT8) widen_u8(q, wv);
            for (int64_t m = 0; m < M; ++m) {
                if constexpr (INT8) {
                    const __m256i qa = load256(a.q.data() + (m0 + m) * a.n_pad + b * G);
                    const float da = a.d[(m0 + m) * nb + b];
                    acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_us(q, qa)), _mm256_set1_ps(d * da), acc[m]);
                } else {
                    acc[m] = _mm256_fmadd_ps(dot_f32(wv, x + (m0 + m) * n + b * G, 4), _mm256_set1_ps(d), acc[m]);
                }
                extra[m] += shift * sums[(m0 + m) * nb + b];
            }
        }
        for (int64_t m = 0; m < M; ++m) y[(m0 + m) * w.out + o] = hsum(acc[m]) + extra[m];
    }
}

// 8 16-bit floats -> 8 float32 (exact).
template <Format F>
inline __m256 widen16(const uint8_t* p) {
    const __m128i v = load128(p);
    if constexpr (F == Format::F16) return _mm256_cvtph_ps(v);
    else return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
}

inline float widen16_scalar(Format f, const uint8_t* p) {
    if (f == Format::F16) return half(p);
    uint32_t bits = (uint32_t)p[0] << 16 | (uint32_t)p[1] << 24;
    float v; std::memcpy(&v, &bits, 4);
    return v;
}

// Each row m: one float32 accumulator over 8-value chunks (fmadd in order), summed, then the tail in order.
template <Format F, int FM>
void half_rows_of(const Weight& w, const float* x, float* y, int64_t m0, int64_t o0, int64_t o1) {
    const int64_t n = w.in, n8 = n / 8 * 8;
    constexpr int64_t M = FM;                                   // rows m0 .. m0 + FM - 1
    __m256 acc[FM];
    for (int64_t o = o0; o < o1; ++o) {
        const uint8_t* wr = w.data + o * w.row_bytes;
        prefetch_row(w.data, w.row_bytes, o, o1 - 1);
        for (int64_t m = 0; m < M; ++m) acc[m] = _mm256_setzero_ps();
        for (int64_t i = 0; i < n8; i += 8) {
            const __m256 wv = widen16<F>(wr + 2 * i);
            for (int64_t m = 0; m < M; ++m) acc[m] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + (m0 + m) * n + i), acc[m]);
        }
        for (int64_t m = 0; m < M; ++m) {
            float s = hsum(acc[m]);
            for (int64_t i = n8; i < n; ++i) s += widen16_scalar(F, wr + 2 * i) * x[(m0 + m) * n + i];
            y[(m0 + m) * w.out + o] = s;
        }
    }
}

template <Format F, bool INT8>
void q5_dispatch(const Weight& w, const float* x, const QActs& a, const std::vector<float>& xs, float* y,
                 int64_t M, int64_t o0, int64_t o1) {
    in_tiles(M, o0, o1, [&](auto fm, int64_t m0, int64_t lo, int64_t hi) {
        q5_block_rows<F, INT8, decltype(fm)::value>(w, x, a, xs, y, m0, lo, hi);
    });
}

}  // namespace

void q5_rows(const Weight& w, const float* x, const QActs& qa, const std::vector<float>& xs, float* y,
             int64_t M, int64_t o0, int64_t o1) {
    if (w.format == Format::Q5_0) {
        if (w.int8_acts) q5_dispatch<Format::Q5_0, true>(w, x, qa, xs, y, M, o0, o1);
        else q5_dispatch<Format::Q5_0, false>(w, x, qa, xs, y, M, o0, o1);
    } else if (w.format == Format::Q5_1) {
        if (w.int8_acts) q5_dispatch<Format::Q5_1, true>(w, x, qa, xs, y, M, o0, o1);
        else q5_dispatch<Format::Q5_1, false>(w, x, qa, xs, y, M, o0, o1);
    } else {
        throw std::invalid_argument("q5_rows: not Q5_0 or Q5_1");
    }
}

void half_rows(const Weight& w, const float* x, float* y, int64_t M, int64_t o0, int64_t o1) {
    if (w.format == Format::F16)
        in_tiles(M, o0, o1, [&](auto fm, int64_t m0, int64_t a, int64_t b) {
            half_rows_of<Format::F16, decltype(fm)::value>(w, x, y, m0, a, b);
        });
    else if (w.format == Format::BF16)
        in_tiles(M, o0, o1, [&](auto fm, int64_t m0, int64_t a, int64_t b) {
            half_rows_of<Format::BF16, decltype(fm)::value>(w, x, y, m0, a, b);
        });
    else throw std::invalid_argument("half_rows: not F16 or BF16");
}

}  // namespace openafm
