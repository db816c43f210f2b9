"""SwiGLU feed-forward: down(silu(gate(x)) * up(x)), with gate and up fused into one matmul."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from openafm.nn.linear import Linear


class SwiGLU(nn.Module):
    def __init__(self, dim: int, hidden: int, device=None):
        super().__init__()
        self.hidden = hidden
        self.gate_up = Linear(dim, 2 * hidden, bias=False, device=device)  # rows [0, H): gate, [H, 2H): up
        self.down = Linear(hidden, dim, bias=False, device=device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [B, T, D] -> [B, T, D]
        gate, up = self.gate_up(x).split(self.hidden, dim=-1)
        return self.down(F.silu(gate) * up)
