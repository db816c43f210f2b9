"""float32 rows -> ggml block bytes, the K-quants written from their layouts (gguf-py cannot make them).

    quantize(values [rows, cols] float32, qtype) -> uint8 [rows, cols / block values * block bytes]

Q2_K, Q3_K, Q4_K, Q5_K and Q6_K are quantized here, in numpy: each sub-block (16 or 32 values) gets the
best of a few candidate scales (each refined by least squares on its codes), then the sub-block scales
(and minima) are themselves quantized to the format's 4/6/8 bits against a float16 super-block scale, and
the codes are recomputed against the scales as stored. It is not llama.cpp's search (no importance
weights), but the blocks are valid and dequantize (dequant.py, gguf-py) close to the input: relative RMS
error on Gaussian rows ~0.27 for Q2_K, ~0.15 Q3_K, ~0.071 Q4_K, ~0.036 Q5_K, ~0.017 Q6_K, about what a
uniform grid of 4 / 8 / 16 / 32 / 64 levels over a sub-block's range gives (tests/checkpoint/
test_gguf_quantize.py states the bounds). F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0
and Q5_1 go to gguf-py's own quantizer, so one function makes every type a test file needs.

Layouts (ggml-common.h; the dequantizers in dequant.py read the same bytes):

    Q2_K  16 B scales (low nibble sc, high nibble m, per 16) | 64 B two-bit codes | f16 d | f16 dmin
    Q3_K  32 B high bits | 64 B two-bit low codes | 12 B of 6-bit scales (sc + 32) | f16 d
    Q4_K  f16 d | f16 dmin | 12 B of 6-bit scales and mins (8 each, per 32) | 128 B nibbles
    Q5_K  f16 d | f16 dmin | 12 B scales and mins | 32 B fifth bits | 128 B nibbles
    Q6_K  128 B low nibbles | 64 B two-bit highs | 16 x int8 scales (per 16) | f16 d
"""

from __future__ import annotations

import gguf
import numpy as np

from openafm.checkpoint.gguf.types import BLOCK_SIZES, GGMLType

QK = 256
_CANDIDATES = np.linspace(-0.05, 0.3, 12)   # steps range / (top * (1 + t)): from covering the range to clipping
_REFITS = 2
_K_TYPES = ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K")
_GGUF_PY_TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1")
SUPPORTED = tuple(GGMLType[name] for name in _K_TYPES + _GGUF_PY_TYPES)


def quantize(values: np.ndarray, qtype: GGMLType | int) -> np.ndarray:
    """float32 [rows, cols] -> uint8 [rows, row bytes] as a GGUF file stores `qtype` (floats as their bytes).
    Raises ValueError naming an unsupported type or a width that is not whole blocks."""
    qtype = GGMLType(int(qtype))
    if qtype not in SUPPORTED:
        raise ValueError(f"cannot quantize to {qtype.name}; supported: {', '.join(t.name for t in SUPPORTED)}")
    values = np.asarray(values, dtype=np.float32)
    if values.ndim != 2:
        raise ValueError(f"quantize takes float32 [rows, cols], got shape {values.shape}")
    rows, cols = values.shape
    block, nbytes = BLOCK_SIZES[qtype]
    if cols % block:
        raise ValueError(f"{qtype.name} rows are whole blocks of {block} values; {cols} columns is not")
    if qtype.name in _GGUF_PY_TYPES:
        out = gguf.quants.quantize(values, gguf.GGMLQuantizationType(int(qtype)))
        return np.ascontiguousarray(out).view(np.uint8).reshape(rows, -1)
    x = values.reshape(-1, QK)                                                      # [N, 256]
    blocks = _PACKERS[qtype.name](x)                                                # [N, block bytes]
    assert blocks.shape == (x.shape[0], nbytes)
    return blocks.reshape(rows, cols // QK * nbytes)


# -- fitting one sub-block ---------------------------------------------------------------------------------

def _fit_affine(x: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray]:
    """x [..., L] ~ scale * q + low with q in 0..top, low <= 0 -> (scale, low) [...] float32.
    Tries steps (max - low) / (top + t) for a few t; refits (scale, low) by least squares on each try's codes."""
    low0 = np.minimum(x.min(-1), 0.0)
    span = x.max(-1) - low0
    best = (np.full(x.shape[:-1], np.inf), span / top, low0)
    for t in _CANDIDATES * top:
        step, low = span / (top + t), low0
        for _ in range(_REFITS):        # codes for (step, low), then (step, low) for the codes
            q = _codes((x - low[..., None]) / _nonzero(step)[..., None], 0, top)
            step, low = _least_squares_affine(x, q)
        q = _codes((x - low[..., None]) / _nonzero(step)[..., None], 0, top)
        scale = step
        err = _sq_error(x, scale[..., None] * q + low[..., None])
        better = err < best[0]
        best = (np.where(better, err, best[0]), np.where(better, scale, best[1]), np.where(better, low, best[2]))
    return best[1].astype(np.float32), best[2].astype(np.float32)


def _least_squares_affine(x: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """min over (scale, low) of |x - scale q - low|^2 with low <= 0 and scale >= 0."""
    n = x.shape[-1]
    sq, sx, sqq, sqx = q.sum(-1), x.sum(-1), (q * q).sum(-1), (q * x).sum(-1)
    det = n * sqq - sq * sq
    scale = np.where(det > 0, (n * sqx - sq * sx) / _nonzero(det), 0.0)
    low = np.where(det > 0, (sx - scale * sq) / n, np.minimum(sx / n, 0.0))
    clamp = low > 0                                                   # refit through 0
    scale = np.where(clamp, sqx / _nonzero(sqq), scale)
    low = np.where(clamp, 0.0, low)
    return np.maximum(scale, 0.0), low


def _fit_symmetric(x: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """x [..., L] ~ scale * q with q in lo..hi (lo < 0 < hi) -> scale [...] float32 (either sign: a negative
    scale puts the largest magnitude on the lo side). Candidates as _fit_affine, refit by least squares."""
    amax = np.abs(x).max(-1)
    best = (np.full(x.shape[:-1], np.inf), np.zeros(x.shape[:-1]))
    for sign in (1.0, -1.0):
        for t in _CANDIDATES * hi:
            scale = sign * amax / ((hi if sign > 0 else -lo) + t)
            for _ in range(_REFITS):
                q = _codes(x / _nonzero(scale)[..., None], lo, hi)
                qq = (q * q).sum(-1)
                scale = np.where(qq > 0, (q * x).sum(-1) / _nonzero(qq), 0.0)
            q = _codes(x / _nonzero(scale)[..., None], lo, hi)
            err = _sq_error(x, scale[..., None] * q)
            better = err < best[0]
            best = (np.where(better, err, best[0]), np.where(better, scale, best[1]))
    return best[1].astype(np.float32)


def _codes(v: np.ndarray, lo: int, hi: int) -> np.ndarray:
    return np.clip(np.rint(v), lo, hi)


def _nonzero(v: np.ndarray) -> np.ndarray:
    return np.where(v == 0, 1.0, v)


def _sq_error(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return ((x - y) ** 2).sum(-1)


def _super_scale(per_sub: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Sub-block scales [N, S] -> the float16 super-block scale d [N, 1] (as float32: the value a reader
    sees) and integer sub-scales [N, S] in lo..hi, per_sub ~ d * sub-scale."""
    amax = np.abs(per_sub).max(-1, keepdims=True)
    d = (amax / hi).astype(np.float16).astype(np.float32)
    return d, np.clip(np.rint(per_sub / _nonzero(d)), lo, hi).astype(np.int32)


def _half_bytes(v: np.ndarray) -> np.ndarray:  # [N, 1] float32 -> [N, 2] uint8
    return v.astype(np.float16).view(np.uint8)


def _affine_k(x: np.ndarray, sub: int, top: int, scale_top: int):  # scale_top: sub-scales and mins in 0..scale_top
    """Affine K-quant of x [N, 256] in sub-blocks of `sub`: -> (d, dmin [N, 1], sc, m [N, S] ints, q [N, S, sub])."""
    n = x.shape[0]
    xs = x.reshape(n, -1, sub)
    scale, low = _fit_affine(xs, top)
    d, sc = _super_scale(scale, 0, scale_top)
    dmin, m = _super_scale(-low, 0, scale_top)
    eff_scale = (d * sc.astype(np.float32))[..., None]                  # the dequantizer's float products
    eff_low = (dmin * m.astype(np.float32))[..., None]
    q = _codes((xs + eff_low) / _nonzero(eff_scale), 0, top).astype(np.uint8)
    return d, dmin, sc, m, q


def _symmetric_k(x: np.ndarray, sub: int, lo: int, hi: int, scale_lo: int, scale_hi: int):
    """Symmetric K-quant in sub-blocks of `sub`: -> (d [N, 1], sc [N, S] in scale_lo..scale_hi, q [N, S, sub]
    in lo..hi)."""
    n = x.shape[0]
    xs = x.reshape(n, -1, sub)
    d, sc = _super_scale(_fit_symmetric(xs, lo, hi), scale_lo, scale_hi)
    eff = (d * sc.astype(np.float32))[..., None]
    return d, sc, _codes(xs / _nonzero(eff), lo, hi).astype(np.int32)


# -- packing ---------------------------------------------------------------------------------------------

def _pack_two_bits(q: np.ndarray) -> np.ndarray:  # [N, 256] in 0..3 -> [N, 64]: value 128h + 32k + i -> byte 32h + i, bits 2k
    q = q.reshape(-1, 2, 4, 32).astype(np.uint8)
    return (q << (2 * np.arange(4, dtype=np.uint8)).reshape(1, 1, 4, 1)).sum(2, dtype=np.uint8).reshape(-1, 64)


def _pack_k_scales(sc: np.ndarray, m: np.ndarray) -> np.ndarray:  # [N, 8] x 2 in 0..63 -> [N, 12]
    sc, m = sc.astype(np.uint8), m.astype(np.uint8)
    first = (sc[:, :4] & 63) | ((sc[:, 4:] >> 4) << 6)
    second = (m[:, :4] & 63) | ((m[:, 4:] >> 4) << 6)
    third = (sc[:, 4:] & 15) | ((m[:, 4:] & 15) << 4)
    return np.concatenate([first, second, third], axis=1)


def _pack_nibbles_k(q: np.ndarray) -> np.ndarray:  # [N, 8, 32] in 0..15 -> [N, 128]: sub-blocks 2c, 2c+1 low / high
    q = q.reshape(-1, 4, 2, 32).astype(np.uint8)
    return (q[:, :, 0] | (q[:, :, 1] << 4)).reshape(-1, 128)


def _q2_k(x: np.ndarray) -> np.ndarray:
    d, dmin, sc, m, q = _affine_k(x, 16, 3, 15)
    scales = (sc.astype(np.uint8) | (m.astype(np.uint8) << 4))
    return np.concatenate([scales, _pack_two_bits(q), _half_bytes(d), _half_bytes(dmin)], axis=1)


def _q3_k(x: np.ndarray) -> np.ndarray:
    d, sc, q = _symmetric_k(x, 16, -4, 3, -32, 31)
    u = (sc + 32).astype(np.uint8)                                                    # [N, 16] in 0..63
    low = (u[:, :8] & 15) | ((u[:, 8:] & 15) << 4)
    high = ((u.reshape(-1, 4, 4) >> 4) << (2 * np.arange(4, dtype=np.uint8)).reshape(1, 4, 1)).sum(1, dtype=np.uint8)
    stored = (q + 4).reshape(-1, QK).astype(np.uint8)                                 # 0..7: bit 2 set = no -4
    mask = ((stored.reshape(-1, 8, 32) >> 2) << np.arange(8, dtype=np.uint8).reshape(1, 8, 1)).sum(1, dtype=np.uint8)
    return np.concatenate([mask, _pack_two_bits(stored & 3), low, high, _half_bytes(d)], axis=1)


def _q4_k(x: np.ndarray) -> np.ndarray:
    d, dmin, sc, m, q = _affine_k(x, 32, 15, 63)
    return np.concatenate([_half_bytes(d), _half_bytes(dmin), _pack_k_scales(sc, m), _pack_nibbles_k(q)], axis=1)


def _q5_k(x: np.ndarray) -> np.ndarray:
    d, dmin, sc, m, q = _affine_k(x, 32, 31, 63)
    fifth = ((q >> 4) << np.arange(8, dtype=np.uint8).reshape(1, 8, 1)).sum(1, dtype=np.uint8)   # [N, 32]
    return np.concatenate([_half_bytes(d), _half_bytes(dmin), _pack_k_scales(sc, m), fifth,
                           _pack_nibbles_k(q & 15)], axis=1)


def _q6_k(x: np.ndarray) -> np.ndarray:
    d, sc, q = _symmetric_k(x, 16, -32, 31, -127, 127)
    u = (q + 32).reshape(-1, 2, 2, 64).astype(np.uint8)          # [N, half, nibble side, 64]: value 128h + 64s + i
    ql = (u[:, :, 0] & 15) | ((u[:, :, 1] & 15) << 4)             # [N, 2, 64]
    hi = (u >> 4).reshape(-1, 2, 4, 32)                           # value 128h + 32k + i -> byte 32h + i, bits 2k
    qh = (hi << (2 * np.arange(4, dtype=np.uint8)).reshape(1, 1, 4, 1)).sum(2, dtype=np.uint8)
    return np.concatenate([ql.reshape(-1, 128), qh.reshape(-1, 64), sc.astype(np.int8).view(np.uint8),
                           _half_bytes(d)], axis=1)


_PACKERS = {"Q2_K": _q2_k, "Q3_K": _q3_k, "Q4_K": _q4_k, "Q5_K": _q5_k, "Q6_K": _q6_k}
