"""`StackedLinear`: one linear layer whose output rows come from parts held in different forms.

A fused projection (q/k/v, gate/up) is one matrix in openafm; a quantized file may store its parts in
different types (llama.cpp's Q4_K_M keeps V in Q6_K beside Q4_K queries and keys). Each part stays as
stored, and the layer concatenates their outputs: y = cat(part_1(x), ..., part_n(x)).
"""

from __future__ import annotations

import torch
from torch import nn


class StackedLinear(nn.Module):
    def __init__(self, parts: list[nn.Module]):
        super().__init__()
        ins = {p.in_features for p in parts}
        if len(ins) != 1:
            raise ValueError(f"StackedLinear parts must take the same input width; got {sorted(ins)}")
        self.parts = nn.ModuleList(parts)
        self.in_features = ins.pop()
        self.out_features = sum(p.out_features for p in parts)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [..., in] -> [..., sum of parts' out]
        return torch.cat([part(x) for part in self.parts], dim=-1)

    def weight_dequantized(self) -> torch.Tensor:  # -> float32 [out, in]
        return torch.cat([_dense(p) for p in self.parts], 0)

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, parts={len(self.parts)}"


def _dense(part: nn.Module) -> torch.Tensor:
    get = getattr(part, "weight_dequantized", None)
    return get() if get is not None else part.weight.detach().float()
