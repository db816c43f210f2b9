"""Linear layers and embeddings that execute from packed low-bit weights (resident memory = packed bytes).

A weight is held as packed codes (uint8 [out, bytes], pack.py), a float32 scale [out] and a float32
zero point [out] with  W[o, i] = scale[o] * (code[o, i] - zero[o]). How a product is computed is a
kind the user selects:

- `PackedKernel.TORCH`: every call unpacks the codes, dequantizes to float32 and runs F.linear. Exact
  with respect to the dequantized weight; portable; the baseline.
- `PackedKernel.CPU`: inputs of at most `KERNEL_MAX_ROWS` rows (decode) go through the AVX2 kernel in
  packed_kernel.py, which reads the packed bytes directly and quantizes the activations to int8 per
  block of 32 (llama.cpp's scheme; the relative error it adds is ~1e-3 of the output scale); longer
  inputs (prefill) are dequantized and multiplied as with TORCH, once per call.
"""

from __future__ import annotations

import enum

import torch
from torch import nn
from torch.nn import functional as F

from openafm.nn.pack import PackedCodes, check_bits, pack, packed_bytes, unpack
from openafm.nn.packed_kernel import packed_matvec

KERNEL_MAX_ROWS = 8


class PackedKernel(enum.Enum):
    TORCH = "torch"   # unpack + dequantize + F.linear on every call
    CPU = "cpu"       # AVX2 packed matvec for <= KERNEL_MAX_ROWS rows, dequantize + matmul beyond


def per_channel(value, out: int, what: str) -> torch.Tensor:
    """A scalar, a [] tensor or an [out] tensor -> float32 [out]."""
    t = torch.as_tensor(value, dtype=torch.float32).detach()
    if t.ndim == 0:
        return t.expand(out).clone()
    if t.shape != (out,):
        raise ValueError(f"{what} must be a scalar or have shape [{out}] (one per output channel), "
                         f"got shape {tuple(t.shape)}")
    return t.clone().contiguous()


def dequantize(packed: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, bits: int,
               in_features: int) -> torch.Tensor:
    """-> float32 weight [out, in_features]."""
    codes = unpack(PackedCodes(packed, bits, in_features))                  # uint8 [out, in]
    return (codes.float() - zero[:, None]) * scale[:, None]


def packed_matmul(x: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, bits: int,
                  in_features: int, kernel: PackedKernel) -> torch.Tensor:
    """x [..., in] -> [..., out] (float32) with the weight held packed."""
    if not isinstance(kernel, PackedKernel):
        raise TypeError(f"kernel must be a PackedKernel ({[k.value for k in PackedKernel]}), got {kernel!r}")
    if x.shape[-1] != in_features:
        raise ValueError(f"input has {x.shape[-1]} features, this layer takes {in_features}")
    rows = x.numel() // in_features
    # The kernel has no backward: an input that needs a gradient takes the differentiable path.
    needs_grad = x.requires_grad and torch.is_grad_enabled()
    if kernel is PackedKernel.CPU and rows <= KERNEL_MAX_ROWS and x.device.type == "cpu" and not needs_grad:
        flat = x.reshape(rows, in_features).float().contiguous()            # [M, in]
        return packed_matvec(flat, packed, scale, zero, bits, in_features).view(*x.shape[:-1], -1)
    return F.linear(x.float(), dequantize(packed, scale, zero, bits, in_features))


class PackedLinear(nn.Module):
    """A bias-free linear layer y = x W^T with W held as packed b-bit codes (buffers: packed, scale, zero)."""

    def __init__(self, codes_packed: torch.Tensor, scale, zero, bits: int, in_features: int,
                 kernel: PackedKernel = PackedKernel.CPU):
        super().__init__()
        self.bits, self.in_features = check_bits(bits), int(in_features)
        if codes_packed.dtype != torch.uint8 or codes_packed.ndim != 2:
            raise ValueError(f"codes_packed must be uint8 [out, bytes], got {codes_packed.dtype} "
                             f"{tuple(codes_packed.shape)}")
        if codes_packed.shape[1] != packed_bytes(self.in_features, self.bits):
            raise ValueError(f"codes_packed rows hold {codes_packed.shape[1]} bytes; {self.in_features} "
                             f"{self.bits}-bit codes pack into {packed_bytes(self.in_features, self.bits)}")
        self.out_features = codes_packed.shape[0]
        self.kernel = PackedKernel(kernel)
        self.register_buffer("packed", codes_packed.contiguous())                     # uint8 [out, bytes]
        self.register_buffer("scale", per_channel(scale, self.out_features, "scale"))  # float32 [out]
        self.register_buffer("zero", per_channel(zero, self.out_features, "zero"))     # float32 [out]

    @classmethod
    def from_codes(cls, codes: torch.Tensor, scale, zero, bits: int, kernel: PackedKernel = PackedKernel.CPU):
        """uint8 codes [out, in] -> a PackedLinear holding them packed."""
        p = pack(codes, bits)
        return cls(p.data, scale, zero, bits, p.in_features, kernel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [..., in] -> [..., out] float32
        return packed_matmul(x, self.packed, self.scale, self.zero, self.bits, self.in_features, self.kernel)

    def weight_dequantized(self) -> torch.Tensor:
        return dequantize(self.packed, self.scale, self.zero, self.bits, self.in_features)

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, bits={self.bits}, kernel={self.kernel.value}"


class PackedEmbedding(nn.Module):
    """Token embeddings held as packed codes with a per-row scale (and zero). A lookup unpacks only the
    rows it uses; `attend(x)` is the tied output head x E^T computed from the same packed rows."""

    def __init__(self, codes_packed: torch.Tensor, scale, zero, bits: int, dim: int,
                 kernel: PackedKernel = PackedKernel.CPU):
        super().__init__()
        self.table = PackedLinear(codes_packed, scale, zero, bits, dim, kernel)   # rows = tokens
        self.num_embeddings, self.embedding_dim = self.table.out_features, dim

    @classmethod
    def from_codes(cls, codes: torch.Tensor, scale, zero, bits: int = 4, kernel: PackedKernel = PackedKernel.CPU):
        p = pack(codes, bits)
        return cls(p.data, scale, zero, bits, p.in_features, kernel)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # [...] token ids -> [..., dim] float32
        t = self.table
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.num_embeddings):
            raise IndexError(f"token id out of range [0, {self.num_embeddings}): "
                             f"min {int(ids.min())}, max {int(ids.max())}")
        flat = ids.reshape(-1)
        rows = unpack(PackedCodes(t.packed.index_select(0, flat), t.bits, t.in_features))  # uint8 [N, dim]
        vecs = (rows.float() - t.zero[flat, None]) * t.scale[flat, None]                  # [N, dim]
        return vecs.view(*ids.shape, self.embedding_dim)

    def attend(self, x: torch.Tensor) -> torch.Tensor:  # [..., dim] -> [..., vocab]
        return self.table(x)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}, bits={self.table.bits}"
