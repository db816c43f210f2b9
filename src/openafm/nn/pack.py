"""Bit packing of b-bit quantization codes (b in 2, 4, 8) along the input dimension.

Codes are uint8 [..., n] with values 0..2^b-1. The input dimension is padded with zeros to a multiple
of GROUP = 32 codes and cut into groups; a group of 32 codes becomes 32*b/8 bytes laid out so that a
SIMD kernel unpacks it with one shift and one mask per plane (see packed_kernel.py):

  b = 2: 8 bytes; byte j (0..7) holds codes j, j+8, j+16, j+24 in bits 0-1, 2-3, 4-5, 6-7
  b = 4: 16 bytes; byte j (0..15) holds code j in bits 0-3 and code j+16 in bits 4-7
  b = 8: 32 bytes; byte j is code j

i.e. plane p of a group (codes p*G/k .. (p+1)*G/k - 1, k = 8/b codes per byte) sits at bit offset p*b.
`PackedCodes.in_features` records the true (unpadded) length, so the round trip is bit-exact.
"""

from __future__ import annotations

import dataclasses

import torch

SUPPORTED_BITS = (2, 4, 8)
GROUP = 32   # codes per packing group (the kernel's block of activations)


@dataclasses.dataclass
class PackedCodes:
    data: torch.Tensor   # uint8 [..., padded_in * bits / 8]
    bits: int
    in_features: int     # true length of the input dimension before padding


def check_bits(bits: int) -> int:
    if isinstance(bits, bool) or bits not in SUPPORTED_BITS:
        raise ValueError(f"bits={bits!r} is not supported: packing takes one of {list(SUPPORTED_BITS)}")
    return int(bits)


def padded_length(in_features: int) -> int:
    return -(-in_features // GROUP) * GROUP


def packed_bytes(in_features: int, bits: int) -> int:
    """Bytes per row of `in_features` codes of `bits` bits (after padding to whole groups)."""
    return padded_length(in_features) * check_bits(bits) // 8


def pack(codes: torch.Tensor, bits: int) -> PackedCodes:
    """uint8 codes [..., n] (values < 2^bits) -> PackedCodes (uint8 [..., ceil(n/32)*32*bits/8])."""
    bits = check_bits(bits)
    if codes.dtype != torch.uint8:
        raise TypeError(f"codes must be uint8, got {codes.dtype}")
    if codes.ndim < 1 or codes.shape[-1] == 0:
        raise ValueError(f"codes need a non-empty last (input) dimension, got shape {tuple(codes.shape)}")
    if codes.numel() and int(codes.max()) >= 1 << bits:
        raise ValueError(f"a code is {int(codes.max())}, out of range for {bits}-bit codes (0..{(1 << bits) - 1})")
    n = codes.shape[-1]
    lead = codes.shape[:-1]
    padded = torch.zeros(*lead, padded_length(n), dtype=torch.uint8, device=codes.device)
    padded[..., :n] = codes
    k = 8 // bits                                                   # codes per byte = planes per group
    groups = padded.view(*lead, -1, k, GROUP // k)                  # [..., n_groups, plane, byte]
    out = torch.zeros(*lead, groups.shape[-3], GROUP // k, dtype=torch.uint8, device=codes.device)
    for p in range(k):
        out |= groups[..., p, :] << (p * bits)
    return PackedCodes(out.reshape(*lead, -1), bits, n)


def unpack(packed: PackedCodes) -> torch.Tensor:
    """PackedCodes -> uint8 codes [..., in_features] (the exact codes that were packed)."""
    bits = check_bits(packed.bits)
    data = packed.data
    k = 8 // bits
    lead = data.shape[:-1]
    groups = data.view(*lead, -1, GROUP // k)                       # [..., n_groups, byte]
    mask = (1 << bits) - 1
    planes = [(groups >> (p * bits)) & mask for p in range(k)]      # k x [..., n_groups, byte]
    codes = torch.stack(planes, dim=-2).reshape(*lead, -1)           # [..., padded_in]
    return codes[..., :packed.in_features]
