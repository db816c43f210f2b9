// Matrix-vector kernels (see kernels.h). Each computes y[m, o] = sum_i W[o, i] * x[m, i] for a range of
// output rows, reading the weight in its stored form.
#include "kernels.h"
#include "simd.h"

#include <immintrin.h>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace openafm {

BlockShape block_shape(Format f) {
    switch (f) {
        case Format::Q8_0: return {G, 34};
        case Format::Q4_0: return {G, 18};
        case Format::Q4_1: return {G, 20};
        case Format::Q5_0: return {G, 22};
        case Format::Q5_1: return {G, 24};
        case Format::Q4_K: return {QK, 144};
        case Format::Q5_K: return {QK, 176};
        case Format::Q6_K: return {QK, 210};
        case Format::F16: case Format::BF16: return {1, 2};
        default: throw std::invalid_argument("format " + std::to_string((int)f) + " is not a block format");
    }
}

int64_t row_bytes_for(Format f, int64_t in) {
    const BlockShape s = block_shape(f);
    return in % s.values ? -1 : in / s.values * s.bytes;
}

void QActs::quantize(const float* x, int64_t rows, int64_t cols) {
    M = rows; n = cols; nb = (cols + G - 1) / G; n_pad = nb * G;
    q.assign(M * n_pad, 0);
    d.assign(M * nb, 0.f);
    ds.assign(M * nb, 0.f);
    xsum.assign(M, 0.f);
    for (int64_t m = 0; m < M; ++m) {
        for (int64_t b = 0; b < nb; ++b) {
            const int64_t lo = b * G, hi = std::min<int64_t>(lo + G, n);
            float amax = 0.f;
            for (int64_t i = lo; i < hi; ++i) amax = std::max(amax, std::fabs(x[m * n + i]));
            const float db = amax / 127.f, inv = db > 0.f ? 1.f / db : 0.f;
            int s = 0;
            for (int64_t i = lo; i < hi; ++i) {
                const int v = (int)std::nearbyint(x[m * n + i] * inv);
                q[m * n_pad + i] = (int8_t)v;
                s += v;
            }
            d[m * nb + b] = db;
            ds[m * nb + b] = db * (float)s;
            xsum[m] += ds[m * nb + b];
        }
    }
}

template <int BITS>
static inline __m256i unpack_packed(const uint8_t* p) {
    if constexpr (BITS == 2) {            // 8 bytes -> 32 codes: plane k at bits 2k
        int64_t w; std::memcpy(&w, p, 8);
        __m256i v = _mm256_srlv_epi64(_mm256_set1_epi64x(w), _mm256_set_epi64x(6, 4, 2, 0));
        return _mm256_and_si256(v, _mm256_set1_epi8(3));
    } else if constexpr (BITS == 4) {
        return nibbles(p);
    } else {                              // 32 bytes, offset to signed int8
        __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
        return _mm256_xor_si256(v, _mm256_set1_epi8((char)0x80));
    }
}

// Packed codes times int8 activations, rows m0 .. m0 + FM - 1: each block's codes unpacked once for the tile.
template <int BITS, int FM>
static void packed_rows(const Weight& w, const QActs& a, float* y, int64_t m0, int64_t o0, int64_t o1) {
    const int64_t nb = a.nb, gbytes = G * BITS / 8;
    const float zshift = BITS == 8 ? 128.f : 0.f;
    for (int64_t o = o0; o < o1; ++o) {
        const uint8_t* wr = w.data + o * w.row_bytes;
        prefetch_row(w.data, w.row_bytes, o, o1 - 1);
        __m256 acc[FM];
        for (int m = 0; m < FM; ++m) acc[m] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            const __m256i c = unpack_packed<BITS>(wr + b * gbytes);
            for (int m = 0; m < FM; ++m) {
                const __m256i q = load256(a.q.data() + (m0 + m) * a.n_pad + b * G);
                const __m256i p = BITS == 8 ? dot_ss(c, q) : dot_us(c, q);
                acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(a.d[(m0 + m) * nb + b]), acc[m]);
            }
        }
        for (int m = 0; m < FM; ++m)
            y[(m0 + m) * w.out + o] = w.scale[o] * (hsum(acc[m]) - (w.zero[o] - zshift) * a.xsum[m0 + m]);
    }
}

// Q8_0 / Q4_0 / Q4_1 times int8 activations (llama.cpp's scheme), rows m0 .. m0 + FM - 1.
template <Format F, int FM>
static void block_rows(const Weight& w, const QActs& a, float* y, int64_t m0, int64_t o0, int64_t o1) {
    const int64_t nb = a.nb, bb = block_shape(F).bytes;
    for (int64_t o = o0; o < o1; ++o) {
        const uint8_t* wr = w.data + o * w.row_bytes;
        prefetch_row(w.data, w.row_bytes, o, o1 - 1);
        __m256 acc[FM];
        float extra[FM];              // Q4_0: -8 d sum(x); Q4_1: m sum(x)
        for (int m = 0; m < FM; ++m) { acc[m] = _mm256_setzero_ps(); extra[m] = 0.f; }
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t* blk = wr + b * bb;
            const float dw = half(blk);
            __m256i c;
            if constexpr (F == Format::Q8_0) c = load256(blk + 2);
            else c = nibbles(blk + (F == Format::Q4_1 ? 4 : 2));
            const float mw = F == Format::Q4_1 ? half(blk + 2) : 0.f;
            for (int m = 0; m < FM; ++m) {
                const int64_t row = m0 + m;
                const __m256i q = load256(a.q.data() + row * a.n_pad + b * G);
                const __m256i p = F == Format::Q8_0 ? dot_ss(c, q) : dot_us(c, q);
                if constexpr (F == Format::Q4_0) extra[m] -= 8.f * dw * a.ds[row * nb + b];
                else if constexpr (F == Format::Q4_1) extra[m] += mw * a.ds[row * nb + b];
                acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * a.d[row * nb + b]), acc[m]);
            }
        }
        for (int m = 0; m < FM; ++m) y[(m0 + m) * w.out + o] = hsum(acc[m]) + extra[m];
    }
}

void block_sums(const float* x, int64_t M, int64_t n, std::vector<float>& xs) {
    const int64_t nb = n / G;
    xs.assign(M * nb, 0.f);
    for (int64_t m = 0; m < M; ++m)
        for (int64_t b = 0; b < nb; ++b) {
            float s = 0.f;
            for (int i = 0; i < G; ++i) s += x[m * n + b * G + i];
            xs[m * nb + b] = s;
        }
}

// One block of a Q8_0 / Q4_0 / Q4_1 row widened to 4 x 8 floats, and its d (lane 0 of dm; Q4_1's m in lane 1).
template <Format F>
static inline void widen_block(const uint8_t* blk, __m256 wv[4], __m128& dm) {
    if constexpr (F == Format::Q8_0) {
        dm = _mm_set1_ps(half(blk));
        const __m128i lo = load128(blk + 2), hi = load128(blk + 18);
        wv[0] = bytes_s8(lo); wv[1] = bytes_s8(_mm_srli_si128(lo, 8));
        wv[2] = bytes_s8(hi); wv[3] = bytes_s8(_mm_srli_si128(hi, 8));
    } else {
        dm = _mm_cvtph_ps(_mm_cvtsi32_si128(load32(blk)));      // d and m converted together
        nibbles_f32(blk + (F == Format::Q4_1 ? 4 : 2), wv);
    }
}

// Block formats times float32 activations: per block, d * sum(q * x) (+ m * sum x, or - 8 d sum x), every
// product in float32 (no activation rounding; the sum order differs from dequantize-then-matmul).
// Rows m0 .. m0 + FM - 1: each block's weights are widened to float once and applied to every row of the tile,
// the FM (up to 8) accumulators held in registers. Per (o, m) the operations and their order do not depend on FM, so a
// row's result is bit-identical in a batch and alone. (Two output rows side by side measured no faster: the loop is
// bound by its instruction count, not by the chains' latency.)
template <Format F, int FM>
static void block_rows_f32(const Weight& w, const float* x, const std::vector<float>& xs, float* y, int64_t m0,
                           int64_t o0, int64_t o1) {
    const int64_t n = w.in, nb = n / G, bb = block_shape(F).bytes;
    const float* xt = x + m0 * n;                 // [FM, n]
    const float* st = xs.data() + m0 * nb;        // [FM, nb]
    for (int64_t o = o0; o < o1; ++o) {
        const uint8_t* wr = w.data + o * w.row_bytes;
        prefetch_row(w.data, w.row_bytes, o, o1 - 1);
        __m256 acc[FM];
        float extra[FM];                          // Q4_0: -8 d sum(x); Q4_1: m sum(x)
        for (int r = 0; r < FM; ++r) { acc[r] = _mm256_setzero_ps(); extra[r] = 0.f; }
        for (int64_t b = 0; b < nb; ++b) {
            __m256 wv[4];
            __m128 dm;
            widen_block<F>(wr + b * bb, wv, dm);
            const __m256 dv = _mm256_broadcastss_ps(dm);
            for (int r = 0; r < FM; ++r) {
                const __m256 part = dot_f32(wv, xt + r * n + b * G, 4);
                if constexpr (F == Format::Q4_0) extra[r] -= 8.f * _mm_cvtss_f32(dm) * st[r * nb + b];
                else if constexpr (F == Format::Q4_1) extra[r] += _mm_cvtss_f32(_mm_movehdup_ps(dm)) * st[r * nb + b];
                acc[r] = _mm256_fmadd_ps(part, dv, acc[r]);
            }
        }
        for (int r = 0; r < FM; ++r) y[(m0 + r) * w.out + o] = hsum(acc[r]) + extra[r];
    }
}

static void f32_rows(const Weight& w, const float* x, float* y, int64_t M, int64_t o0, int64_t o1) {
    const int64_t n = w.in, n8 = n / 8 * 8;
    for (int64_t o = o0; o < o1; ++o) {
        const float* wr = w.f32 + o * n;
        prefetch_row(reinterpret_cast<const uint8_t*>(w.f32), n * 4, o, o1 - 1);
        int64_t m = 0;
        // Four rows per weight load (speculative scoring passes several tokens); each row sums in the same
        // order as the one-row loop below, so a row's result is bit-identical however many rows there are.
        for (; m + 4 <= M; m += 4) {
            __m256 a[4][2];
            for (int r = 0; r < 4; ++r) a[r][0] = a[r][1] = _mm256_setzero_ps();
            int64_t i = 0;
            for (; i + 16 <= n8; i += 16) {
                const __m256 w0 = _mm256_loadu_ps(wr + i), w1 = _mm256_loadu_ps(wr + i + 8);
                for (int r = 0; r < 4; ++r) {
                    const float* xm = x + (m + r) * n;
                    a[r][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xm + i), a[r][0]);
                    a[r][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xm + i + 8), a[r][1]);
                }
            }
            for (; i < n8; i += 8) {
                const __m256 w0 = _mm256_loadu_ps(wr + i);
                for (int r = 0; r < 4; ++r) a[r][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + (m + r) * n + i), a[r][0]);
            }
            for (int r = 0; r < 4; ++r) {
                const float* xm = x + (m + r) * n;
                float s = hsum(_mm256_add_ps(a[r][0], a[r][1]));
                for (int64_t k = i; k < n; ++k) s += wr[k] * xm[k];
                y[(m + r) * w.out + o] = s;
            }
        }
        for (; m < M; ++m) {
            const float* xm = x + m * n;
            __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
            int64_t i = 0;
            for (; i + 16 <= n8; i += 16) {
                a0 = _mm256_fmadd_ps(_mm256_loadu_ps(wr + i), _mm256_loadu_ps(xm + i), a0);
                a1 = _mm256_fmadd_ps(_mm256_loadu_ps(wr + i + 8), _mm256_loadu_ps(xm + i + 8), a1);
            }
            for (; i < n8; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(wr + i), _mm256_loadu_ps(xm + i), a0);
            float s = hsum(_mm256_add_ps(a0, a1));
            for (; i < n; ++i) s += wr[i] * xm[i];
            y[m * w.out + o] = s;
        }
    }
}

void prepare(const Weight& w, const float* x, int64_t M, QActs& qa, std::vector<float>& xs) {
    if (w.format == Format::F32 || w.format == Format::F16 || w.format == Format::BF16) return;
    if (w.format == Format::PACKED || w.int8_acts) qa.quantize(x, M, w.in);
    else block_sums(x, M, w.in, xs);
}

Isa best_isa() {
    static const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    return avx512 ? Isa::AVX512 : Isa::AVX2;
}

static std::atomic<int> isa_{-1};         // -1: not chosen yet (best_isa() on first use)

Isa kernel_isa() {
    const int v = isa_.load(std::memory_order_relaxed);
    return v < 0 ? best_isa() : static_cast<Isa>(v);
}

void set_kernel_isa(Isa isa) {
    if (isa == Isa::AVX512 && best_isa() != Isa::AVX512)
        throw std::invalid_argument("this CPU lacks AVX-512 F/BW/DQ/VL: the kernels can run AVX2 only");
    isa_.store(static_cast<int>(isa), std::memory_order_relaxed);
}

template <Format F>
static void block_dispatch(const Weight& w, const float* x, const QActs& qa, const std::vector<float>& xs, float* y,
                           int64_t M, int64_t o0, int64_t o1) {
    if (w.int8_acts)
        in_tiles(M, o0, o1, [&](auto fm, int64_t m0, int64_t a, int64_t b) {
            block_rows<F, decltype(fm)::value>(w, qa, y, m0, a, b);
        });
    else
        in_tiles<8>(M, o0, o1, [&](auto fm, int64_t m0, int64_t a, int64_t b) {
            block_rows_f32<F, decltype(fm)::value>(w, x, xs, y, m0, a, b);
        });
}

template <int BITS>
static void packed_dispatch(const Weight& w, const QActs& qa, float* y, int64_t M, int64_t o0, int64_t o1) {
    in_tiles(M, o0, o1, [&](auto fm, int64_t m0, int64_t a, int64_t b) {
        packed_rows<BITS, decltype(fm)::value>(w, qa, y, m0, a, b);
    });
}

void matvec_rows(const Weight& w, const float* x, const QActs& qa, const std::vector<float>& xs, float* y,
                 int64_t M, int64_t o0, int64_t o1) {
    // The float32-activation Q8_0 / Q5_0 / Q5_1 kernels on AVX-512 where chosen (false for every other format).
    if (!w.int8_acts && kernel_isa() == Isa::AVX512 && block_rows_f32_avx512(w, x, xs.data(), y, M, o0, o1)) return;
    switch (w.format) {
        case Format::Q4_K: case Format::Q5_K: case Format::Q6_K: return kquant_rows(w, x, qa, xs, y, M, o0, o1);
        case Format::Q5_0: case Format::Q5_1: return q5_rows(w, x, qa, xs, y, M, o0, o1);
        case Format::F16: case Format::BF16: return half_rows(w, x, y, M, o0, o1);
        case Format::F32: return f32_rows(w, x, y, M, o0, o1);
        case Format::Q8_0: return block_dispatch<Format::Q8_0>(w, x, qa, xs, y, M, o0, o1);
        case Format::Q4_0: return block_dispatch<Format::Q4_0>(w, x, qa, xs, y, M, o0, o1);
        case Format::Q4_1: return block_dispatch<Format::Q4_1>(w, x, qa, xs, y, M, o0, o1);
        case Format::PACKED:
            if (w.bits == 2) return packed_dispatch<2>(w, qa, y, M, o0, o1);
            if (w.bits == 4) return packed_dispatch<4>(w, qa, y, M, o0, o1);
            if (w.bits == 8) return packed_dispatch<8>(w, qa, y, M, o0, o1);
            throw std::invalid_argument("packed weights have 2, 4 or 8 bits");
        default: throw std::invalid_argument("no kernel for format " + std::to_string((int)w.format));
    }
}

}  // namespace openafm
