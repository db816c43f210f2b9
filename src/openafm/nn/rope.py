"""Rotary position embeddings in the rotate-half layout (the Hugging Face Llama convention)."""

from __future__ import annotations

import torch
from torch import nn


class RotaryTable(nn.Module):
    """cos/sin for every position up to `max_positions` (buffers, so they follow the model's device)."""

    def __init__(self, head_dim: int, theta: float, max_positions: int):
        super().__init__()
        inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        angles = torch.arange(max_positions, dtype=torch.float64)[:, None] * inv_freq  # [P, Dh/2]
        angles = torch.cat([angles, angles], dim=-1)                                   # [P, Dh]
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)

    def lookup(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """positions [B, T] (padding is -1, clamped to 0) -> cos, sin [B, 1, T, Dh]."""
        idx = positions.clamp(min=0)
        return self.cos[idx].unsqueeze(1).to(dtype), self.sin[idx].unsqueeze(1).to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [B, H, T, Dh], cos/sin [B, 1, T, Dh] -> rotated x."""
    return x * cos + rotate_half(x) * sin
