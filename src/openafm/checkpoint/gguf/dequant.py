"""ggml tensor data -> float32, with whole-tensor torch ops (no loop over blocks).

Results are bit-identical to gguf-py's `gguf.quants.dequantize`: every kernel does the same float32
operations in the same order (scale as float16 -> float32, then `d * q`, then `+ m`), and none is
fused into a single rounding.

Block layouts (ggml-common.h); a block holds 32 values (256 for the K-quants):

    Q8_0  f16 d | 32 x int8 q                           x = d * q
    Q4_0  f16 d | 16 bytes: q[j] low nibble, q[j+16] high    x = d * (q - 8)
    Q4_1  f16 d | f16 m | 16 bytes of nibbles as Q4_0          x = d * q + m
    Q5_0  f16 d | u32 fifth bits (bit j -> q[j]) | nibbles    x = d * (q - 16)
    Q5_1  f16 d | f16 m | u32 fifth bits | nibbles             x = d * q + m
    Q2_K  16 B scales (low nibble sc, high nibble m per 16) | 64 B two-bit codes | f16 d | f16 dmin
                                                         x = (d * sc) * q - (dmin * m)
    Q3_K  32 B high-bit mask | 64 B two-bit codes | 12 B of 6-bit scales | f16 d
                                                         x = (d * (sc - 32)) * (q - (4 if high bit clear))
    Q4_K  f16 d | f16 dmin | 12 B of 6-bit scales and mins (8 each) | 128 B nibbles
                                                         x = (d * sc[sub-block of 32]) * q - (dmin * m)
    Q5_K  as Q4_K, with 32 B of fifth bits (bit j of byte i -> value i of sub-block j) before the nibbles
    Q6_K  128 B low nibbles | 64 B two-bit highs | 16 x int8 scales | f16 d
                                                         x = (d * scale[sub-block of 16]) * (q - 32)

In the K-quants, "two-bit codes" come in halves of 128 values: 32 bytes read four times (bits 0-1 give
values 0-31, bits 2-3 values 32-63, ...), and nibbles in chunks of 32 bytes read twice (low, then high).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch

from openafm.checkpoint.gguf.types import BLOCK_SIZES, GGMLType
from openafm.errors import CheckpointError


def dequantize(raw: torch.Tensor, ggml_type: GGMLType, *, where: str) -> torch.Tensor:
    """[n_bytes] uint8 as stored -> [n_elements] float32 (a new tensor, never a view of `raw`).

    `where` names the tensor in errors (e.g. "model.gguf: tensor 'blk.0.attn_q.weight'").
    """
    kernel = KERNELS.get(ggml_type)
    if kernel is None:
        raise CheckpointError(f"{where} has type {ggml_type.name}, which cannot be dequantized; "
                              f"supported types: {', '.join(t.name for t in KERNELS)}")
    block, block_bytes = BLOCK_SIZES[ggml_type]
    if raw.numel() % block_bytes:
        raise CheckpointError(f"{where}: {raw.numel()} bytes is not a whole number of {ggml_type.name} "
                              f"blocks of {block_bytes} bytes")
    blocks = raw.view(-1, block_bytes)  # [N, block_bytes]
    with one_thread():
        return kernel(blocks).reshape(-1)   # [N * block]


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Run torch's CPU ops on one intra-op thread for the duration (process-wide, restored after).

    Dequantizing is a series of mid-sized, memory-bound ops. On a 2-core machine with another
    CPU-bound process running, two intra-op threads made loading SmolLM2 ~30x slower (9 s instead of
    0.3 s: every parallel region waits for the descheduled thread); one thread is ~0.3 s either way.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


# -- plain floats ---------------------------------------------------------------------------------

def _f32(blocks: torch.Tensor) -> torch.Tensor:  # [N, 4] -> [N, 1]
    return _as(blocks, torch.float32).clone()


def _f16(blocks: torch.Tensor) -> torch.Tensor:  # [N, 2] -> [N, 1]
    return _as(blocks, torch.float16).float()


def _bf16(blocks: torch.Tensor) -> torch.Tensor:  # [N, 2] -> [N, 1]; exact: bf16 is the top half of f32
    return _as(blocks, torch.bfloat16).float()


# -- 32-value blocks --------------------------------------------------------------------------------

def _q8_0(blocks: torch.Tensor) -> torch.Tensor:  # [N, 34] -> [N, 32]
    d = _half(blocks, 0)                                            # [N, 1]
    return _as(blocks[:, 2:], torch.int8).float().mul_(d)


def _q4_0(blocks: torch.Tensor) -> torch.Tensor:  # [N, 18] -> [N, 32]
    d = _half(blocks, 0)
    return _nibbles(blocks[:, 2:]).float().sub_(8).mul_(d)


def _q4_1(blocks: torch.Tensor) -> torch.Tensor:  # [N, 20] -> [N, 32]
    d, m = _half(blocks, 0), _half(blocks, 2)
    return _nibbles(blocks[:, 4:]).float().mul_(d).add_(m)


def _q5_0(blocks: torch.Tensor) -> torch.Tensor:  # [N, 22] -> [N, 32]
    d = _half(blocks, 0)
    q = _nibbles(blocks[:, 6:]).bitwise_or_(_bits(blocks[:, 2:6]) << 4)
    return q.float().sub_(16).mul_(d)


def _q5_1(blocks: torch.Tensor) -> torch.Tensor:  # [N, 24] -> [N, 32]
    d, m = _half(blocks, 0), _half(blocks, 2)
    q = _nibbles(blocks[:, 8:]).bitwise_or_(_bits(blocks[:, 4:8]) << 4)
    return q.float().mul_(d).add_(m)


# -- 256-value K-quant blocks -------------------------------------------------------------------------

_SHIFT_4 = torch.tensor([0, 4], dtype=torch.uint8)
_SHIFT_2 = torch.tensor([0, 2, 4, 6], dtype=torch.uint8)
_SHIFT_1 = torch.arange(8, dtype=torch.uint8)


def _two_bits(packed: torch.Tensor) -> torch.Tensor:  # [N, 32 h] uint8 -> [N, 128 h] uint8 in 0..3
    """Halves of 128 values from 32 bytes each: value 32k + i of a half is bits 2k..2k+1 of byte i."""
    n = packed.shape[0]
    return ((packed.reshape(n, -1, 1, 32) >> _SHIFT_2.view(1, 1, 4, 1)) & 0x03).reshape(n, -1)


def _k_nibbles(packed: torch.Tensor) -> torch.Tensor:  # [N, 128] uint8 -> [N, 8, 32] uint8 in 0..15
    """Sub-blocks 2c and 2c + 1 are the low and high nibbles of bytes 32c .. 32c + 31."""
    n = packed.shape[0]
    return ((packed.reshape(n, 4, 1, 32) >> _SHIFT_4.view(1, 1, 2, 1)) & 0x0F).reshape(n, 8, 32)


def _k_scales_mins(packed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # [N, 12] -> [N, 8] x 2 uint8
    """Q4_K / Q5_K's 6-bit scales and mins: bytes 0-3 scales 0-3, 4-7 mins 0-3 (low 6 bits); bytes 8-11
    the low nibbles of scales 4-7 and (high nibbles) of mins 4-7, whose top bits are bytes 0-7's top bits."""
    s = packed.reshape(-1, 3, 4)
    d, m, md = s[:, 0], s[:, 1], s[:, 2]                                       # [N, 4] each
    scales = torch.cat([d & 0x3F, (md & 0x0F) | ((d >> 2) & 0x30)], dim=-1)
    mins = torch.cat([m & 0x3F, (md >> 4) | ((m >> 2) & 0x30)], dim=-1)
    return scales, mins


def _q2_k(blocks: torch.Tensor) -> torch.Tensor:  # [N, 84] -> [N, 256]
    n = blocks.shape[0]
    scales = blocks[:, :16]
    d, dmin = _half(blocks, 80), _half(blocks, 82)                                      # [N, 1]
    dl = (d * (scales & 0x0F).float()).view(n, 16, 1)
    ml = (dmin * (scales >> 4).float()).view(n, 16, 1)
    q = _two_bits(blocks[:, 16:80]).view(n, 16, 16).float()
    return (dl * q - ml).view(n, 256)


def _q3_k(blocks: torch.Tensor) -> torch.Tensor:  # [N, 110] -> [N, 256]
    n = blocks.shape[0]
    d = _half(blocks, 108)
    packed = blocks[:, 96:108]
    low = (packed[:, :8].reshape(n, 1, 8) >> _SHIFT_4.view(1, 2, 1)).reshape(n, 16) & 0x0F
    high = (packed[:, 8:].reshape(n, 1, 4) >> _SHIFT_2.view(1, 4, 1)).reshape(n, 16) & 0x03
    scales = (low | (high << 4)).to(torch.int8).sub_(32).float()                      # [N, 16]
    dl = (d * scales).view(n, 16, 1)
    # Bit k of mask byte i belongs to value 32k + i; a clear bit subtracts 4.
    high_bit = (blocks[:, :32].reshape(n, 1, 32) >> _SHIFT_1.view(1, 8, 1)) & 1       # [N, 8, 32]
    q = _two_bits(blocks[:, 32:96]).to(torch.int8) - ((high_bit ^ 1) << 2).reshape(n, 256).to(torch.int8)
    return (dl * q.view(n, 16, 16).float()).view(n, 256)


def _q4_k(blocks: torch.Tensor) -> torch.Tensor:  # [N, 144] -> [N, 256]
    return _q45_k(blocks, None, blocks[:, 16:144])


def _q5_k(blocks: torch.Tensor) -> torch.Tensor:  # [N, 176] -> [N, 256]
    return _q45_k(blocks, blocks[:, 16:48], blocks[:, 48:176])


def _q45_k(blocks: torch.Tensor, fifth: torch.Tensor | None, nibbles: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    d, dmin = _half(blocks, 0), _half(blocks, 2)                                        # [N, 1]
    sc, m = _k_scales_mins(blocks[:, 4:16])
    ds = (d * sc.float()).view(n, 8, 1)
    dm = (dmin * m.float()).view(n, 8, 1)
    q = _k_nibbles(nibbles)                                                             # [N, 8, 32]
    if fifth is not None:   # bit j of byte i -> value i of sub-block j
        q = q | (((fifth.reshape(n, 1, 32) >> _SHIFT_1.view(1, 8, 1)) & 1) << 4)
    return (ds * q.float() - dm).view(n, 256)


def _q6_k(blocks: torch.Tensor) -> torch.Tensor:  # [N, 210] -> [N, 256]
    n = blocks.shape[0]
    # Low four bits: two halves of 128 values, each from 64 bytes read twice (low, then high nibble).
    low = (blocks[:, :128].reshape(n, 2, 1, 64) >> _SHIFT_4.view(1, 1, 2, 1)) & 0x0F      # [N, 2, 2, 64]
    # High two bits: two halves, each from 32 bytes read four times (bits 0-1, 2-3, 4-5, 6-7).
    high = (blocks[:, 128:192].reshape(n, 2, 1, 32) >> _SHIFT_2.view(1, 1, 4, 1)) & 0x03  # [N, 2, 4, 32]
    q = low.reshape(n, 8, 32) | (high.reshape(n, 8, 32) << 4)                             # [N, 8, 32] in 0..63
    scales = _as(blocks[:, 192:208], torch.int8).float()                                  # [N, 16]
    d = (_half(blocks, 208) * scales).view(n, 16, 1)                                      # [N, 16, 1]
    return (q.view(n, 16, 16).float().sub_(32) * d).view(n, 256)


# -- helpers --------------------------------------------------------------------------------------------

def _as(data: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Reinterpret the last dimension's bytes as `dtype` (copies first if the strides do not allow a view)."""
    try:
        return data.view(dtype)
    except RuntimeError:
        return data.contiguous().view(dtype)


def _half(blocks: torch.Tensor, start: int) -> torch.Tensor:  # [N, B] -> [N, 1] float32
    return _as(blocks[:, start:start + 2], torch.float16).float()


def _nibbles(packed: torch.Tensor) -> torch.Tensor:  # [N, 16] uint8 -> [N, 32] uint8
    """Value j in the low nibble of byte j, value j + 16 in its high nibble (unpacked 2 bytes at a time)."""
    n = packed.shape[0]
    words = _as(packed, torch.int16)                               # [N, 8]
    out = torch.empty(n, 2, 8, dtype=torch.int16)
    torch.bitwise_and(words, 0x0F0F, out=out[:, 0])
    torch.bitwise_right_shift(words, 4, out=out[:, 1])
    out[:, 1].bitwise_and_(0x0F0F)                                 # also clears the sign bits the shift copied
    return out.view(torch.uint8).view(n, 32)


def _bits(packed: torch.Tensor) -> torch.Tensor:  # [N, 4] uint8 -> [N, 32] uint8 in {0, 1}
    """Bit j of the little-endian u32 -> value j."""
    n = packed.shape[0]
    return ((packed.reshape(n, 4, 1) >> torch.arange(8, dtype=torch.uint8)) & 1).view(n, 32)


KERNELS: dict[GGMLType, Callable[[torch.Tensor], torch.Tensor]] = {
    GGMLType.F32: _f32,
    GGMLType.F16: _f16,
    GGMLType.BF16: _bf16,
    GGMLType.Q8_0: _q8_0,
    GGMLType.Q4_0: _q4_0,
    GGMLType.Q4_1: _q4_1,
    GGMLType.Q5_0: _q5_0,
    GGMLType.Q5_1: _q5_1,
    GGMLType.Q2_K: _q2_k,
    GGMLType.Q3_K: _q3_k,
    GGMLType.Q4_K: _q4_k,
    GGMLType.Q5_K: _q5_k,
    GGMLType.Q6_K: _q6_k,
}
