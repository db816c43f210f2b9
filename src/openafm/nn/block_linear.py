"""Linear layers and embeddings that run from GGUF block weights kept as stored (Q8_0, Q4_0, Q4_1, Q5_0,
Q5_1, the K-quants Q4_K, Q5_K, Q6_K, and F16 / BF16 matrices).

A weight is one uint8 buffer [out, in / block values * block bytes]: each row is the file's blocks of 32
weights (256 for a K-quant super-block; one value for F16 / BF16), each block its scales (and minima)
and its codes. Resident memory is the file's bytes. Inputs of at most `KERNEL_MAX_ROWS` rows (decode) go through packed_kernel.py's kernels,
which read the blocks directly, with the activations in float32 (the default) or rounded to int8 per
block as llama.cpp does (`Activations.INT8`: faster, less exact); longer inputs (prefill) dequantize the
weight to float32 once per call and run one matrix product (ggml's float operations).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from openafm.nn.packed_kernel import BLOCK_SHAPES, Activations, WeightFormat, dequantize_blocks, matvec, weight_spec

KERNEL_MAX_ROWS = 8


def check_blocks(data: torch.Tensor, fmt: WeightFormat, in_features: int, what: str) -> WeightFormat:
    """The format, after checking that `data` holds whole rows of `in_features` values in it (ValueError)."""
    fmt = WeightFormat(fmt)
    if fmt not in BLOCK_SHAPES:
        raise ValueError(f"{what}: {fmt.name} is not a block format; accepted: {[f.name for f in BLOCK_SHAPES]}")
    values, nbytes = BLOCK_SHAPES[fmt]
    if in_features <= 0 or in_features % values:
        raise ValueError(f"{what}: {in_features} input features is not a whole number of {values}-value blocks "
                         f"({fmt.name}; accepted: multiples of {values})")
    want = in_features // values * nbytes
    if data.dtype != torch.uint8 or data.ndim != 2 or data.shape[1] != want:
        raise ValueError(f"{what}: {fmt.name} rows of {in_features} values are uint8 [out, {want}], got "
                         f"{data.dtype} {tuple(data.shape)}")
    return fmt


class BlockLinear(nn.Module):
    """A bias-free linear layer y = x W^T with W held in a GGUF block format (buffer `blocks`)."""

    def __init__(self, blocks: torch.Tensor, fmt: WeightFormat, in_features: int,
                 activations: Activations = Activations.FLOAT32):
        super().__init__()
        self.format = check_blocks(blocks, fmt, in_features, "BlockLinear")
        self.activations = Activations(activations)
        self.in_features, self.out_features = int(in_features), blocks.shape[0]
        self.register_buffer("blocks", blocks.contiguous())                  # uint8 [out, row bytes]

    def spec(self, lora=None) -> tuple:
        return weight_spec(self.format, self.out_features, self.in_features, self.blocks, lora=lora,
                           activations=self.activations)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [..., in] -> [..., out] float32
        if x.shape[-1] != self.in_features:
            raise ValueError(f"input has {x.shape[-1]} features, this layer takes {self.in_features}")
        rows = x.numel() // self.in_features
        # The kernels have no backward: an input that needs a gradient takes the differentiable path.
        if rows <= KERNEL_MAX_ROWS and x.device.type == "cpu" and not (x.requires_grad and torch.is_grad_enabled()):
            flat = x.reshape(rows, self.in_features).float()                  # [M, in]
            return matvec(flat, self.spec()).view(*x.shape[:-1], self.out_features)
        return F.linear(x.float(), self.weight_dequantized())

    def weight_dequantized(self) -> torch.Tensor:  # -> float32 [out, in]
        return dequantize_blocks(self.blocks, self.format, self.in_features)

    def extra_repr(self) -> str:
        return (f"in={self.in_features}, out={self.out_features}, format={self.format.name}, "
                f"activations={self.activations.value}")


class BlockRows(nn.Module):
    """A bias-free linear layer whose output rows are stored in several block formats, one BlockLinear per
    run of rows: a K-quant GGUF's fused q/k/v, whose v rows llama-quantize stores with more bits than q
    and k in some layers. y = [x W_0^T, x W_1^T, ...]."""

    def __init__(self, parts: list[BlockLinear]):
        super().__init__()
        if len(parts) < 2 or not all(isinstance(p, BlockLinear) for p in parts):
            raise ValueError(f"BlockRows joins two or more BlockLinear layers, got {[type(p).__name__ for p in parts]}")
        widths = {p.in_features for p in parts}
        if len(widths) > 1:
            raise ValueError(f"BlockRows parts must take the same input width, got {sorted(widths)}")
        self.parts = nn.ModuleList(parts)
        self.in_features, self.out_features = parts[0].in_features, sum(p.out_features for p in parts)

    def spec(self, lora=None) -> tuple:
        return weight_spec(WeightFormat.PARTS, self.out_features, self.in_features,
                           tuple(p.spec() for p in self.parts), lora=lora)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [..., in] -> [..., out] float32
        return torch.cat([p(x) for p in self.parts], dim=-1)

    def weight_dequantized(self) -> torch.Tensor:  # -> float32 [out, in]
        return torch.cat([p.weight_dequantized() for p in self.parts], dim=0)

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, formats={[p.format.name for p in self.parts]}"


class BlockEmbedding(nn.Module):
    """Token embeddings held as block rows; a lookup dequantizes only the rows it uses, and `attend(x)`
    is the tied output head x E^T computed from the same blocks."""

    def __init__(self, blocks: torch.Tensor, fmt: WeightFormat, dim: int,
                 activations: Activations = Activations.FLOAT32):
        super().__init__()
        self.table = BlockLinear(blocks, fmt, dim, activations)               # rows = tokens
        self.num_embeddings, self.embedding_dim = self.table.out_features, dim

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # [...] token ids -> [..., dim] float32
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.num_embeddings):
            raise IndexError(f"token id out of range [0, {self.num_embeddings}): "
                             f"min {int(ids.min())}, max {int(ids.max())}")
        rows = self.table.blocks.index_select(0, ids.reshape(-1))             # uint8 [N, row bytes]
        vecs = dequantize_blocks(rows, self.table.format, self.embedding_dim)  # [N, dim]
        return vecs.view(*ids.shape, self.embedding_dim)

    def attend(self, x: torch.Tensor) -> torch.Tensor:  # [..., dim] -> [..., vocab]
        return self.table(x)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}, format={self.table.format.name}"
