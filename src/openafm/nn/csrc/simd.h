// Small AVX2 helpers the matvec and attention kernels share: horizontal sums, float16 scalars, unpacking codes and
// widening bytes to floats, the u8 x s8 integer dot products, and a vector e^x for the softmax.
#pragma once
#include <immintrin.h>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

namespace openafm {

// Runs kernel(fm, m0, a, b) over M activation rows and output rows [o0, o1), fm a std::integral_constant (FM):
// per 32 output rows, the activation rows m0 .. m0 + FM - 1 in register tiles of TILE (4, or 8 for a kernel
// whose per-row state is one accumulator), then one tile of what is left over, so a weight block is unpacked
// once per tile and a weight row is read from L1 by every tile after the first. A kernel's per (o, m)
// operations must not depend on FM: a row's result is then bit-identical in a batch and alone.
template <int FM, class Kernel>
inline void tile_of(int64_t rest, int64_t m0, int64_t a, int64_t b, Kernel& kernel) {
    if constexpr (FM > 0) {
        if (rest == FM) return kernel(std::integral_constant<int, FM>(), m0, a, b);
        tile_of<FM - 1>(rest, m0, a, b, kernel);
    }
}

template <int TILE = 4, class Kernel>
inline void in_tiles(int64_t M, int64_t o0, int64_t o1, Kernel&& kernel) {
    static_assert(TILE == 4 || TILE == 8, "tiles of 4 or 8 rows");
    for (int64_t a = o0; a < o1; a += 32) {
        const int64_t b = std::min(o1, a + 32);
        int64_t m0 = 0;
        for (; m0 + TILE <= M; m0 += TILE) kernel(std::integral_constant<int, TILE>(), m0, a, b);
        tile_of<TILE - 1>(M - m0, m0, a, b, kernel);
    }
}

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float half(const uint8_t* p) {
    uint16_t h; std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

static inline int load32(const uint8_t* p) { int v; std::memcpy(&v, p, 4); return v; }
static inline __m128i load128(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
static inline __m256i load256(const void* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// A weight's rows stream from the last-level cache (a model's layers do not fit the per-core caches, and each is read
// once per token): a row kernel asks for the row PREFETCH_ROWS ahead of the one it multiplies (capped at its own last
// row, `last`). Measured on a 30-layer Q4_1 model's matrices: 8% less time per token than the hardware prefetcher
// alone (2 and 4 rows ahead did alike, 8 worse); whole decode, interleaved: SmolLM2 Q4_1 ~96 -> ~111 tok/s, the
// default model (Q8_0) ~77 -> ~103 tok/s.
constexpr int64_t PREFETCH_ROWS = 4;

static inline void prefetch_row(const uint8_t* data, int64_t row_bytes, int64_t o, int64_t last) {
    const char* ahead = reinterpret_cast<const char*>(data + std::min(o + PREFETCH_ROWS, last) * row_bytes);
    for (int64_t off = 0; off < row_bytes; off += 64) _mm_prefetch(ahead + off, _MM_HINT_T0);
}

// 32 unsigned 4-bit codes from 16 bytes: low nibbles are values 0..15, high nibbles 16..31 (ggml and pack.py).
static inline __m256i nibbles(const uint8_t* p) {
    const __m128i v = load128(p);
    const __m128i m = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

// The 32 bits of a little-endian u32 as 32 bytes, byte i = bit i ? `value` : 0 (Q5_0 / Q5_1 fifth bits).
static inline __m256i bits_to_bytes(const uint8_t* p, char value) {
    uint32_t bits; std::memcpy(&bits, p, 4);
    const __m256i spread = _mm256_shuffle_epi8(      // byte i <- byte i / 8 of the word (per 128-bit lane)
        _mm256_set1_epi32((int)bits),
        _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
    const __m256i select = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
    return _mm256_and_si256(set, _mm256_set1_epi8(value));
}

// int32 lanes of sum(u * s) for unsigned bytes u (< 128) and signed bytes s; lane k covers bytes 4k..4k+3.
static inline __m256i dot_us(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// int32 lanes of sum(a * b) for signed bytes (|a * b| pairs fit in int16: a, b in [-127, 127]).
static inline __m256i dot_ss(__m256i a, __m256i b) {
    return dot_us(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
}

// 8 codes (bytes) -> 8 floats: unsigned or signed.
static inline __m256 bytes_u8(__m128i v8) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v8)); }
static inline __m256 bytes_s8(__m128i v8) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v8)); }

// 16 bytes read into both 128-bit lanes and zero-extended to 32-bit lanes by one byte shuffle per 8 bytes:
// lo holds bytes 0..7, hi bytes 8..15 (in order). Their low nibbles are a mask away (nibble_lo), their high ones
// a shift (nibble_hi): cheaper than splitting the nibbles first and widening each group by vpmovzx, which needs
// two more shuffles and two byte shifts per 32 codes on the shuffle port.
static inline void spread16(const uint8_t* p, __m256i& lo, __m256i& hi) {
    const __m256i v = _mm256_broadcastsi128_si256(load128(p));
    lo = _mm256_shuffle_epi8(v, _mm256_setr_epi8(0, -1, -1, -1, 1, -1, -1, -1, 2, -1, -1, -1, 3, -1, -1, -1,
                                                 4, -1, -1, -1, 5, -1, -1, -1, 6, -1, -1, -1, 7, -1, -1, -1));
    hi = _mm256_shuffle_epi8(v, _mm256_setr_epi8(8, -1, -1, -1, 9, -1, -1, -1, 10, -1, -1, -1, 11, -1, -1, -1,
                                                 12, -1, -1, -1, 13, -1, -1, -1, 14, -1, -1, -1, 15, -1, -1, -1));
}

static inline __m256 nibble_lo(__m256i spread) {
    return _mm256_cvtepi32_ps(_mm256_and_si256(spread, _mm256_set1_epi32(0x0F)));
}

static inline __m256 nibble_hi(__m256i spread) { return _mm256_cvtepi32_ps(_mm256_srli_epi32(spread, 4)); }

// A Q4_0 / Q4_1 block's 16 bytes of nibbles -> its 32 codes as 4 x 8 floats: w[0] codes 0..7 (the low nibbles of
// bytes 0..7), w[1] 8..15, w[2] 16..23 (the high nibbles of bytes 0..7), w[3] 24..31.
static inline void nibbles_f32(const uint8_t* p, __m256 w[4]) {
    __m256i lo, hi;
    spread16(p, lo, hi);
    w[0] = nibble_lo(lo); w[1] = nibble_lo(hi);
    w[2] = nibble_hi(lo); w[3] = nibble_hi(hi);
}

// 32 byte codes -> 4 x 8 floats (w[0] values 0..7, ..., w[3] values 24..31).
static inline void widen_u8(__m256i v, __m256 w[4]) {
    const __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
    w[0] = bytes_u8(lo); w[1] = bytes_u8(_mm_srli_si128(lo, 8));
    w[2] = bytes_u8(hi); w[3] = bytes_u8(_mm_srli_si128(hi, 8));
}

static inline void widen_s8(__m256i v, __m256 w[4]) {
    const __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
    w[0] = bytes_s8(lo); w[1] = bytes_s8(_mm_srli_si128(lo, 8));
    w[2] = bytes_s8(hi); w[3] = bytes_s8(_mm_srli_si128(hi, 8));
}

// sum_k w[k] * x[8k .. 8k + 7] over `n` vectors (n = 2: 16 values, 4: 32), multiplied then added in order.
static inline __m256 dot_f32(const __m256* w, const float* x, int n) {
    __m256 part = _mm256_mul_ps(w[0], _mm256_loadu_ps(x));
    for (int k = 1; k < n; ++k) part = _mm256_fmadd_ps(w[k], _mm256_loadu_ps(x + 8 * k), part);
    return part;
}

// d[i] = q . k[i] for four rows k[i] of n values (attention's scores of four slots): four independent chains of
// multiply-adds, then one reduction tree for all four. Each d[i] takes the same operations whichever of the four
// places its row has, so a slot's score does not depend on the slots beside it.
static inline void dot4(const float* q, const float* const k[4], int64_t n, float d[4]) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 qv = _mm256_loadu_ps(q + i);
        a0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k[0] + i), a0);
        a1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k[1] + i), a1);
        a2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k[2] + i), a2);
        a3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k[3] + i), a3);
    }
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));   // [d0 d1 d2 d3 | d0 d1 d2 d3]
    _mm_storeu_ps(d, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
    for (; i < n; ++i)
        for (int r = 0; r < 4; ++r) d[r] += q[i] * k[r][i];
}

// The same with int8 b (an int8 K/V cache's codes), widened to float exactly.
static inline float dot_n_s8(const float* a, const int8_t* b, int64_t n) {
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        int64_t v; std::memcpy(&v, b + i, 8);
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), bytes_s8(_mm_cvtsi64_si128(v)), acc);
    }
    float s = hsum(acc);
    for (; i < n; ++i) s += a[i] * (float)b[i];
    return s;
}

// e^x in 8 lanes (Cephes' expf: x = k ln2 + r with |r| <= ln2 / 2, e^r = 1 + r + r^2 P(r) with P of degree 5, 2^k
// from the exponent bits): within 1.01 ulp of the exact value on [-87, 0], the range a softmax feeds it (measured
// against float64 exp at 16M points; std::exp: 0.57); lanes below -87.3 (a masked score, -inf) give exactly 0, so a
// masked slot adds nothing to a softmax.
static inline __m256 exp8(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.3365478515625f), hi = _mm256_set1_ps(88.3762626647949f);
    const __m256 masked = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
    const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x);           // ln 2 in two parts
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    for (const float c : {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f})
        y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(c));
    y = _mm256_add_ps(_mm256_fmadd_ps(y, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.f));
    const __m256i two_k = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(masked, _mm256_mul_ps(y, _mm256_castsi256_ps(two_k)));
}

// p[s] = e^(p[s] - mx) for s < n (0 where p[s] is -inf) -> their sum, added in slot order.
static inline float exp_shifted(float* p, int64_t n, float mx) {
    const __m256 m = _mm256_set1_ps(mx);
    int64_t s = 0;
    for (; s + 8 <= n; s += 8) _mm256_storeu_ps(p + s, exp8(_mm256_sub_ps(_mm256_loadu_ps(p + s), m)));
    if (s < n) {
        float tail[8];
        std::fill(tail, tail + 8, mx);
        std::copy(p + s, p + n, tail);
        _mm256_storeu_ps(tail, exp8(_mm256_sub_ps(_mm256_loadu_ps(tail), m)));
        std::copy(tail, tail + (n - s), p + s);
    }
    float total = 0.f;
    for (int64_t i = 0; i < n; ++i) total += p[i];
    return total;
}

// y[i] += w * x[i] for i < n (attention's weighted sum of V).
static inline void axpy_n(float w, const float* x, float* y, int64_t n) {
    const __m256 wv = _mm256_set1_ps(w);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; ++i) y[i] += w * x[i];
}

// o[0..n) = the sum over slots s < rows with p[s] != 0 of (p[s] / total) v_s, v_s = v + s n: axpy_n's multiply-adds
// in slot order, 64 values at a time held in registers (o is written once, not read back per slot).
static inline void weighted_rows(const float* p, float total, const float* v, int64_t rows, int64_t n, float* o) {
    int64_t c = 0;
    for (; c + 64 <= n; c += 64) {
        __m256 acc[8];
        for (auto& a : acc) a = _mm256_setzero_ps();
        for (int64_t s = 0; s < rows; ++s) {
            if (p[s] == 0.f) continue;
            const __m256 w = _mm256_set1_ps(p[s] / total);
            const float* x = v + s * n + c;
            for (int k = 0; k < 8; ++k) acc[k] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + 8 * k), acc[k]);
        }
        for (int k = 0; k < 8; ++k) _mm256_storeu_ps(o + c + 8 * k, acc[k]);
    }
    if (c == n) return;
    std::fill(o + c, o + n, 0.f);
    for (int64_t s = 0; s < rows; ++s)
        if (p[s] != 0.f) axpy_n(p[s] / total, v + s * n + c, o + c, n - c);
}

static inline void axpy_n_s8(float w, const int8_t* x, float* y, int64_t n) {
    const __m256 wv = _mm256_set1_ps(w);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        int64_t v; std::memcpy(&v, x + i, 8);
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(wv, bytes_s8(_mm_cvtsi64_si128(v)), _mm256_loadu_ps(y + i)));
    }
    for (; i < n; ++i) y[i] += w * (float)x[i];
}

}  // namespace openafm
