"""`Linear`: nn.Linear (same parameters and state dict) with the fastest kernel for one-row inputs.

Decode multiplies a single row by every weight matrix, a memory-bound matrix-vector product. On the
CPUs measured here (benchmarks/decode.py) PyTorch's bf16 `linear` for one row is slower than its fp32
one, while `torch.mv` on bf16 weights is the fastest kernel of all; fp32 `linear` and `mv` are equal.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

MV_DTYPES = (torch.bfloat16,)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """F.linear, with torch.mv for a single row where that kernel is faster."""
    if bias is None and x.dtype in MV_DTYPES and x.device.type == "cpu" and x.numel() == x.shape[-1]:
        return torch.mv(weight, x.reshape(-1)).view(*x.shape[:-1], -1)
    return F.linear(x, weight, bias)


class Linear(nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [..., in] -> [..., out]
        return linear(x, self.weight, self.bias)
