// Block-format rows -> float32 (prefill multiplies the dequantized matrix): for every format the float
// operations of gguf-py's `gguf.quants.dequantize`, in its order, so the results are bit-identical to it
// (float16 -> float32 scales, d * sc as one product, then * q, then - dmin * m or + m).
#include "kernels.h"
#include "simd.h"

#include <stdexcept>
#include <string>

namespace openafm {

namespace {

// 32-value blocks: 32 floats from one block.
void block32(Format f, const uint8_t* blk, float* y) {
    const float d = half(blk);
    switch (f) {
        case Format::Q8_0:
            for (int i = 0; i < G; ++i) y[i] = d * (float)(int8_t)blk[2 + i];
            return;
        case Format::Q4_0:
            for (int i = 0; i < G / 2; ++i) {
                y[i] = d * (float)((blk[2 + i] & 15) - 8);
                y[i + 16] = d * (float)((blk[2 + i] >> 4) - 8);
            }
            return;
        case Format::Q4_1: {
            const float m = half(blk + 2);
            for (int i = 0; i < G / 2; ++i) {
                y[i] = d * (float)(blk[4 + i] & 15) + m;
                y[i + 16] = d * (float)(blk[4 + i] >> 4) + m;
            }
            return;
        }
        case Format::Q5_0: case Format::Q5_1: {
            const bool q51 = f == Format::Q5_1;
            const float m = q51 ? half(blk + 2) : 0.f;
            const uint8_t* qh = blk + (q51 ? 4 : 2);
            const uint8_t* qs = qh + 4;
            for (int i = 0; i < G; ++i) {
                const int q = (i < 16 ? qs[i] & 15 : qs[i - 16] >> 4) | (((qh[i / 8] >> (i % 8)) & 1) << 4);
                y[i] = q51 ? d * (float)q + m : d * (float)(q - 16);
            }
            return;
        }
        default: throw std::invalid_argument("block32: not a 32-value format");
    }
}

// Q4_K / Q5_K super-block: 256 floats.
void q45_k(bool q5, const uint8_t* blk, float* y) {
    const float d = half(blk), dmin = half(blk + 2);
    const uint8_t* p = blk + 4;                      // 12 bytes of 6-bit scales and mins (see kquants.cpp)
    const uint8_t* qh = blk + 16;                    // Q5_K: 32 bytes of fifth bits
    const uint8_t* qs = blk + (q5 ? 48 : 16);        // 128 bytes of nibbles
    for (int g = 0; g < 8; ++g) {
        const int j = g % 4;
        const int sc = g < 4 ? p[j] & 63 : (p[j + 8] & 15) | ((p[j] >> 6) << 4);
        const int mn = g < 4 ? p[j + 4] & 63 : (p[j + 8] >> 4) | ((p[j + 4] >> 6) << 4);
        const float ds = d * (float)sc, dm = dmin * (float)mn;
        for (int i = 0; i < 32; ++i) {
            int q = (qs[(g / 2) * 32 + i] >> (4 * (g % 2))) & 15;
            if (q5) q |= ((qh[i] >> g) & 1) << 4;
            y[g * 32 + i] = ds * (float)q - dm;
        }
    }
}

// Q6_K super-block: 256 floats.
void q6_k(const uint8_t* blk, float* y) {
    const float d = half(blk + 208);
    for (int v = 0; v < QK; ++v) {
        const int h = v / 128, k = v % 128;
        const int lo = (blk[h * 64 + k % 64] >> (4 * (k / 64))) & 15;
        const int hi = (blk[128 + h * 32 + k % 32] >> (2 * (k / 32))) & 3;
        const float ds = d * (float)(int8_t)blk[192 + v / 16];
        y[v] = ds * (float)((lo | (hi << 4)) - 32);
    }
}

}  // namespace

void dequantize_rows(Format f, const uint8_t* src, float* dst, int64_t rows, int64_t in) {
    const BlockShape s = block_shape(f);
    const int64_t rb = row_bytes_for(f, in), nb = in / s.values;
    if (rb < 0) throw std::invalid_argument(std::to_string(in) + " values is not a whole number of blocks");
    for (int64_t o = 0; o < rows; ++o)
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t* blk = src + o * rb + b * s.bytes;
            float* y = dst + o * in + b * s.values;
            switch (f) {
                case Format::F16: *y = half(blk); break;
                case Format::BF16: { const uint32_t bits = (uint32_t)blk[0] << 16 | (uint32_t)blk[1] << 24;
                                     std::memcpy(y, &bits, 4); break; }
                case Format::Q4_K: q45_k(false, blk, y); break;
                case Format::Q5_K: q45_k(true, blk, y); break;
                case Format::Q6_K: q6_k(blk, y); break;
                default: block32(f, blk, y);
            }
        }
}

}  // namespace openafm
