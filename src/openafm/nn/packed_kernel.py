"""A CPU matrix-vector kernel over packed 2/4/8-bit weights (AVX2, built once with torch's cpp_extension).

    y[m, o] = scale[o] * sum_i (code[o, i] - zero[o]) * x[m, i]        for a few rows m (decode)

The activations are quantized per block of 32 to int8 (scale = max|x| / 127 per block), the way
llama.cpp feeds its integer dot products; each 32-code weight group (pack.py's layout) is unpacked with
one 64-bit shift and one mask per plane and multiplied by the int8 block with `maddubs` (u8 x s8 -> s16
pairs) and `madd` (-> s32). 8-bit codes are offset to signed (code - 128) first so the 16-bit pair sums
cannot saturate. The zero point is folded in once per row: sum_b d_b * (sum c*q - zero * sum q).

The extension is compiled on first use into ~/.cache/openafm/kernels (or $OPENAFM_KERNEL_CACHE) and
reused; building needs a C++ compiler (g++) and the Python headers.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import torch

_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <cstring>
#include <cmath>

static constexpr int G = 32;   // codes per group = activations per int8 block

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

template <int BITS>
static inline __m256i unpack_group(const uint8_t* p) {
    if constexpr (BITS == 2) {            // 8 bytes -> 32 codes: plane k at bits 2k
        int64_t w; std::memcpy(&w, p, 8);
        __m256i v = _mm256_srlv_epi64(_mm256_set1_epi64x(w), _mm256_set_epi64x(6, 4, 2, 0));
        return _mm256_and_si256(v, _mm256_set1_epi8(3));
    } else if constexpr (BITS == 4) {     // 16 bytes -> 32 codes: low nibbles then high nibbles
        __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        __m128i m = _mm_set1_epi8(0x0F);
        return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
    } else {                              // 32 bytes, offset to signed int8
        __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
        return _mm256_xor_si256(v, _mm256_set1_epi8((char)0x80));
    }
}

// int32 lanes of sum over the group of code * q
template <int BITS>
static inline __m256i group_dot(__m256i codes, __m256i q) {
    __m256i p16;
    if constexpr (BITS == 8) {            // signed x signed via |a| * sign(b, a)
        p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(codes, codes), _mm256_sign_epi8(q, codes));
    } else {
        p16 = _mm256_maddubs_epi16(codes, q);
    }
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

template <int BITS>
static void run(const float* x, const uint8_t* w, const float* scale, const float* zero, float* y,
                int64_t M, int64_t out, int64_t n, int64_t n_pad) {
    const int64_t nb = n_pad / G, row_bytes = n_pad * BITS / 8, gbytes = G * BITS / 8;
    std::vector<int8_t> q(M * n_pad, 0);
    std::vector<float> d(M * nb, 0.f);
    std::vector<float> xsum(M, 0.f);      // sum_b d_b * sum q (for the zero point)
    for (int64_t m = 0; m < M; ++m) {
        for (int64_t b = 0; b < nb; ++b) {
            const int64_t lo = b * G, hi = std::min<int64_t>(lo + G, n);
            float amax = 0.f;
            for (int64_t i = lo; i < hi; ++i) amax = std::max(amax, std::fabs(x[m * n + i]));
            const float db = amax / 127.f, inv = db > 0.f ? 1.f / db : 0.f;
            int s = 0;
            for (int64_t i = lo; i < hi; ++i) {
                int v = (int)std::nearbyint(x[m * n + i] * inv);
                q[m * n_pad + i] = (int8_t)v;
                s += v;
            }
            d[m * nb + b] = db;
            xsum[m] += db * (float)s;
        }
    }
    const float zshift = BITS == 8 ? 128.f : 0.f;
    at::parallel_for(0, out, 16, [&](int64_t o0, int64_t o1) {
        for (int64_t o = o0; o < o1; ++o) {
            const uint8_t* wr = w + o * row_bytes;
            for (int64_t m = 0; m < M; ++m) {
                const int8_t* qm = q.data() + m * n_pad;
                const float* dm = d.data() + m * nb;
                __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
                int64_t b = 0;
                for (; b + 1 < nb; b += 2) {
                    __m256i c0 = unpack_group<BITS>(wr + b * gbytes), c1 = unpack_group<BITS>(wr + (b + 1) * gbytes);
                    __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qm + b * G));
                    __m256i q1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qm + (b + 1) * G));
                    acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(group_dot<BITS>(c0, q0)), _mm256_set1_ps(dm[b]), acc0);
                    acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(group_dot<BITS>(c1, q1)), _mm256_set1_ps(dm[b + 1]), acc1);
                }
                for (; b < nb; ++b) {
                    __m256i c0 = unpack_group<BITS>(wr + b * gbytes);
                    __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qm + b * G));
                    acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(group_dot<BITS>(c0, q0)), _mm256_set1_ps(dm[b]), acc0);
                }
                const float dot = hsum(_mm256_add_ps(acc0, acc1));
                y[m * out + o] = scale[o] * (dot - (zero[o] - zshift) * xsum[m]);
            }
        }
    });
}

torch::Tensor packed_matvec(torch::Tensor x, torch::Tensor w, torch::Tensor scale, torch::Tensor zero,
                            int64_t bits, int64_t n) {
    TORCH_CHECK(x.dtype() == torch::kFloat32 && x.dim() == 2 && x.size(1) == n && x.is_contiguous(),
                "x must be contiguous float32 [M, ", n, "]");
    TORCH_CHECK(w.dtype() == torch::kUInt8 && w.dim() == 2 && w.is_contiguous(), "packed weight must be uint8 [out, bytes]");
    const int64_t out = w.size(0), n_pad = (n + G - 1) / G * G;
    TORCH_CHECK(w.size(1) * 8 == n_pad * bits, "packed rows hold ", w.size(1), " bytes, expected ", n_pad * bits / 8);
    TORCH_CHECK(scale.dtype() == torch::kFloat32 && scale.numel() == out && zero.dtype() == torch::kFloat32
                && zero.numel() == out, "scale and zero must be float32 [out]");
    auto y = torch::empty({x.size(0), out}, x.options());
    const float *xp = x.data_ptr<float>(), *sp = scale.data_ptr<float>(), *zp = zero.data_ptr<float>();
    const uint8_t* wp = w.data_ptr<uint8_t>();
    float* yp = y.data_ptr<float>();
    if (bits == 2) run<2>(xp, wp, sp, zp, yp, x.size(0), out, n, n_pad);
    else if (bits == 4) run<4>(xp, wp, sp, zp, yp, x.size(0), out, n, n_pad);
    else if (bits == 8) run<8>(xp, wp, sp, zp, yp, x.size(0), out, n, n_pad);
    else TORCH_CHECK(false, "bits=", bits, " is not supported (2, 4, 8)");
    return y;
}
"""

_module = None


class KernelUnavailableError(RuntimeError):
    """The packed CPU kernel cannot be built or run here; PackedKernel.TORCH is the portable choice."""


def cache_dir() -> Path:
    return Path(os.environ.get("OPENAFM_KERNEL_CACHE", Path.home() / ".cache" / "openafm" / "kernels"))


def load_kernel():
    """The compiled extension (built on first use, then loaded from the cache)."""
    global _module
    if _module is not None:
        return _module
    cap = torch.backends.cpu.get_cpu_capability()
    if cap not in ("AVX2", "AVX512"):
        raise KernelUnavailableError(f"the packed CPU kernel needs AVX2; this CPU reports {cap!r}. "
                                     f"Use kernel=PackedKernel.TORCH (unpack + dequantize + matmul)")
    if shutil.which(os.environ.get("CXX", "c++")) is None:
        raise KernelUnavailableError("building the packed CPU kernel needs a C++ compiler (c++/g++ on PATH): "
                                     "install one (e.g. `apt-get install g++`) or use kernel=PackedKernel.TORCH")
    from torch.utils.cpp_extension import load_inline  # on use: the C++ toolchain glue, only for the first build
    directory = cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    _module = load_inline(name="openafm_packed_matvec", cpp_sources=[_SOURCE],
                          functions=["packed_matvec"], extra_cflags=["-O3", "-mavx2", "-mfma", "-fopenmp"],
                          extra_ldflags=["-fopenmp"], build_directory=str(directory), verbose=False)
    return _module


def packed_matvec(x: torch.Tensor, data: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor,
                  bits: int, in_features: int) -> torch.Tensor:
    """x float32 [M, in] (M small), data uint8 [out, bytes], scale/zero float32 [out] -> float32 [M, out]."""
    return load_kernel().packed_matvec(x, data, scale, zero, bits, in_features)
