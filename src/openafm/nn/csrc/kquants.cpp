// K-quant matvec kernels (Q4_K, Q5_K, Q6_K; see kernels.h): each super-block of 256 weights is read as
// eight groups of 32 codes, each group multiplied with 32 activations, float32 or int8 (one activation
// block of 32 per group), then scaled by its sub-block scale(s).
//
//   Q4_K / Q5_K: W = (d * sc[g]) * q - dmin * m[g]   (g: group of 32)  -> y += (d sc[g]) q.x - (dmin m[g]) sum x
//   Q6_K:        W = (d * sc[s]) * (q - 32)           (s: sub-block of 16; a group holds two)
#include "kernels.h"
#include "simd.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace openafm {

namespace {

// A super-block's scales as floats: Q4_K / Q5_K one scale and one min per group of 32, already times d and
// dmin; Q6_K one scale per 16 values, times d.
struct Scales {
    float scale[16];
    float min[8];
};

template <Format F>
inline void read_scales(const uint8_t* blk, Scales& s) {
    if constexpr (F == Format::Q6_K) {
        const float d = half(blk + 208);
        for (int j = 0; j < 16; ++j) s.scale[j] = d * (float)(int8_t)blk[192 + j];
    } else {
        // 12 bytes: bytes 0-3 scales 0-3 (low 6 bits), 4-7 mins 0-3; bytes 8-11 the low nibbles of scales
        // 4-7 and, high nibbles, of mins 4-7; their top two bits are the top bits of bytes 0-3 and 4-7.
        const float d = half(blk), dmin = half(blk + 2);
        const uint8_t* p = blk + 4;
        for (int j = 0; j < 4; ++j) {
            s.scale[j] = d * (float)(p[j] & 63);
            s.min[j] = dmin * (float)(p[j + 4] & 63);
            s.scale[j + 4] = d * (float)((p[j + 8] & 15) | ((p[j] >> 6) << 4));
            s.min[j + 4] = dmin * (float)((p[j + 8] >> 4) | ((p[j + 4] >> 6) << 4));
        }
    }
}

// The 32 codes of group g (0..7) of a super-block: unsigned (Q4_K 0..15, Q5_K 0..31) or Q6_K's q - 32.
template <Format F>
inline __m256i group_codes(const uint8_t* blk, int g) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    if constexpr (F == Format::Q6_K) {
        // Half h = g / 4 holds 128 values: 64 bytes of nibbles (values 0-63 low, 64-127 high) and 32 bytes
        // of two-bit highs (values 32k .. 32k + 31 at bits 2k).
        const int h = g / 4, k = g % 4;
        const __m256i ql = load256(blk + h * 64 + (k % 2) * 32);
        const __m256i qh = load256(blk + 128 + h * 32);
        const __m256i lo = _mm256_and_si256(_mm256_srl_epi16(ql, _mm_cvtsi32_si128(4 * (k / 2))), low4);
        const __m256i hi = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * k)), _mm256_set1_epi8(3));
        return _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)), _mm256_set1_epi8(32));
    } else {
        // 128 bytes of nibbles: groups 2c and 2c + 1 are the low and high nibbles of bytes 32c .. 32c + 31.
        const uint8_t* qs = blk + (F == Format::Q5_K ? 48 : 16);
        const __m256i v = load256(qs + (g / 2) * 32);
        __m256i q = _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(4 * (g % 2))), low4);
        if constexpr (F == Format::Q5_K) {   // fifth bit of value i of group g: bit g of byte i
            const __m256i qh = load256(blk + 16);
            const __m256i bit = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(g)), _mm256_set1_epi8(1));
            q = _mm256_or_si256(q, _mm256_slli_epi16(bit, 4));
        }
        return q;
    }
}

// Q4_K's group g as 4 x 8 floats: the low (g even) or high (g odd) nibbles of bytes 32 (g / 2) .. + 31, through
// spread16 (the same codes as widen_u8(group_codes), four shuffles fewer).
inline void q4k_group_f32(const uint8_t* blk, int g, __m256 wv[4]) {
    const uint8_t* qs = blk + 16 + (g / 2) * 32;
    __m256i a, b, c, d;
    spread16(qs, a, b);
    spread16(qs + 16, c, d);
    if (g % 2 == 0) {
        wv[0] = nibble_lo(a); wv[1] = nibble_lo(b); wv[2] = nibble_lo(c); wv[3] = nibble_lo(d);
    } else {
        wv[0] = nibble_hi(a); wv[1] = nibble_hi(b); wv[2] = nibble_hi(c); wv[3] = nibble_hi(d);
    }
}

// Float32 activations: y[m, o] = sum over groups of scale * (q . x) (Q6_K: per half group), minus the mins
// times the activations' group sums xs (block_sums).
template <Format F, int FM>
void rows_f32(const Weight& w, const float* x, const std::vector<float>& xs, float* y, int64_t m0, int64_t o0,
              int64_t o1) {
    const int64_t n = w.in, nsb = n / QK, nb = n / G, bytes = block_shape(F).bytes;
    constexpr int64_t M = FM;                                   // rows m0 .. m0 + FM - 1
    __m256 acc[FM];
    float extra[FM];
    Scales s;
    for (int64_t o = o0; o < o1; ++o) {
        const uint8_t* wr = w.data + o * w.row_bytes;
        prefetch_row(w.data, w.row_bytes, o, o1 - 1);
        for (int64_t m = 0; m < M; ++m) { acc[m] = _mm256_setzero_ps(); extra[m] = 0.f; }
        for (int64_t sb = 0; sb < nsb; ++sb) {
            const uint8_t* blk = wr + sb * bytes;
            read_scales<F>(blk, s);
            for (int g = 0; g < 8; ++g) {
                __m256 wv[4];
                if constexpr (F == Format::Q6_K) widen_s8(group_codes<F>(blk, g), wv);
                else if constexpr (F == Format::Q4_K) q4k_group_f32(blk, g, wv);
                else widen_u8(group_codes<F>(blk, g), wv);
                for (int64_t m = 0; m < M; ++m) {
                    const float* xb = x + (m0 + m) * n + sb * QK + g * G;     // [32]
                    if constexpr (F == Format::Q6_K) {
                        acc[m] = _mm256_fmadd_ps(dot_f32(wv, xb, 2), _mm256_set1_ps(s.scale[2 * g]), acc[m]);
                        acc[m] = _mm256_fmadd_ps(dot_f32(wv + 2, xb + 16, 2), _mm256_set1_ps(s.scale[2 * g + 1]), acc[m]);
                    } else {
                        acc[m] = _mm256_fmadd_ps(dot_f32(wv, xb, 4), _mm256_set1_ps(s.scale[g]), acc[m]);
                        extra[m] -= s.min[g] * xs[(m0 + m) * nb + sb * 8 + g];
                    }
                }
            }
        }
        for (int64_t m = 0; m < M; ++m) y[(m0 + m) * w.out + o] = hsum(acc[m]) + extra[m];
    }
}

// Int8 activations (QActs, one block of 32 per group): integer dot products, scaled by the group's weight
// scale(s) times the activation block's scale; the mins meet the blocks' d_b * sum(q).
template <Format F, int FM>
void rows_int8(const Weight& w, const QActs& a, float* y, int64_t m0, int64_t o0, int64_t o1) {
    const int64_t nsb = w.in / QK, nb = a.nb, bytes = block_shape(F).bytes;
    constexpr int64_t M = FM;                                   // rows m0 .. m0 + FM - 1
    __m256 acc[FM];
    float extra[FM];
    Scales s;
    for (int64_t o = o0; o < o1; ++o) {
        const uint8_t* wr = w.data + o * w.row_bytes;
        prefetch_row(w.data, w.row_bytes, o, o1 - 1);
        for (int64_t m = 0; m < M; ++m) { acc[m] = _mm256_setzero_ps(); extra[m] = 0.f; }
        for (int64_t sb = 0; sb < nsb; ++sb) {
            const uint8_t* blk = wr + sb * bytes;
            read_scales<F>(blk, s);
            for (int g = 0; g < 8; ++g) {
                const __m256i q = group_codes<F>(blk, g);
                const int64_t b = sb * 8 + g;
                for (int64_t m = 0; m < M; ++m) {
                    const __m256i qa = load256(a.q.data() + (m0 + m) * a.n_pad + b * G);
                    const float da = a.d[(m0 + m) * nb + b];
                    if constexpr (F == Format::Q6_K) {   // int32 lanes 0-3: values 0-15, lanes 4-7: 16-31
                        const __m256 sc = _mm256_set_m128(_mm_set1_ps(s.scale[2 * g + 1] * da),
                                                          _mm_set1_ps(s.scale[2 * g] * da));
                        acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_ss(q, qa)), sc, acc[m]);
                    } else {
                        acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_us(q, qa)), _mm256_set1_ps(s.scale[g] * da),
                                                 acc[m]);
                        extra[m] -= s.min[g] * a.ds[(m0 + m) * nb + b];
                    }
                }
            }
        }
        for (int64_t m = 0; m < M; ++m) y[(m0 + m) * w.out + o] = hsum(acc[m]) + extra[m];
    }
}

template <Format F>
void rows(const Weight& w, const float* x, const QActs& qa, const std::vector<float>& xs, float* y, int64_t M,
          int64_t o0, int64_t o1) {
    if (w.int8_acts)
        in_tiles(M, o0, o1, [&](auto fm, int64_t m0, int64_t a, int64_t b) {
            rows_int8<F, decltype(fm)::value>(w, qa, y, m0, a, b);
        });
    else
        in_tiles(M, o0, o1, [&](auto fm, int64_t m0, int64_t a, int64_t b) {
            rows_f32<F, decltype(fm)::value>(w, x, xs, y, m0, a, b);
        });
}

}  // namespace

void kquant_rows(const Weight& w, const float* x, const QActs& qa, const std::vector<float>& xs, float* y,
                 int64_t M, int64_t o0, int64_t o1) {
    switch (w.format) {
        case Format::Q4_K: return rows<Format::Q4_K>(w, x, qa, xs, y, M, o0, o1);
        case Format::Q5_K: return rows<Format::Q5_K>(w, x, qa, xs, y, M, o0, o1);
        case Format::Q6_K: return rows<Format::Q6_K>(w, x, qa, xs, y, M, o0, o1);
        default: throw std::invalid_argument("kquant_rows: not a K-quant format");
    }
}

}  // namespace openafm
