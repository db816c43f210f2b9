"""Rotary position embeddings in the rotate-half layout (the Hugging Face Llama convention).

rotate_half(x) = cat(-x2, x1) for halves x1, x2 of the head dimension; we store sin with the sign
folded in (sin_signed = cat(-sin, sin) per half), so rope(x) = x * cos + swap_halves(x) * sin_signed.

Context-extension schemes (Llama 3's, LongRoPE, YaRN, linear interpolation) all come down to the same two
numbers here: a divisor per frequency (inv_freq_i / factor_i) and a scale on cos and sin (`RopeScaling`);
checkpoint/architectures.py computes them from a model's config, as llama.cpp stores them in `rope_freqs`.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from openafm.errors import ConfigError


@dataclasses.dataclass(frozen=True, kw_only=True)
class RopeScaling:
    kind: str                        # where the factors came from, in words: "llama3", "longrope", "yarn", ...
    freq_factors: list[float]        # [Dh / 2] divisors of each rotary frequency
    attention_factor: float = 1.0    # cos and sin are multiplied by it (LongRoPE, YaRN)

    def __post_init__(self) -> None:
        if not self.freq_factors or any(not f > 0 for f in self.freq_factors):
            raise ConfigError(f"rope_scaling ({self.kind}): frequency factors must be positive, "
                              f"got {list(self.freq_factors)[:4]}...")
        if not self.attention_factor > 0:
            raise ConfigError(f"rope_scaling ({self.kind}): attention_factor={self.attention_factor} must be positive")


class RotaryTable(nn.Module):
    """cos/sin for every position up to `max_positions` (buffers, so they follow the model's device)."""

    def __init__(self, head_dim: int, theta: float, max_positions: int, scaling: RopeScaling | None = None):
        super().__init__()
        inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        if scaling is not None:
            inv_freq = inv_freq / torch.tensor(scaling.freq_factors, dtype=torch.float64)
        angles = torch.arange(max_positions, dtype=torch.float64)[:, None] * inv_freq  # [P, Dh/2]
        cos, sin = angles.cos(), angles.sin()
        if scaling is not None:
            cos, sin = cos * scaling.attention_factor, sin * scaling.attention_factor
        self.register_buffer("cos", torch.cat([cos, cos], -1).float(), persistent=False)          # [P, Dh]
        self.register_buffer("sin_signed", torch.cat([-sin, sin], -1).float(), persistent=False)  # [P, Dh]

    def lookup(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """positions [B, T] (padding is -1, clamped to 0) -> cos, sin_signed [B, T, 1, Dh]."""
        idx = positions.clamp(min=0)
        return self.cos[idx].unsqueeze(2).to(dtype), self.sin_signed[idx].unsqueeze(2).to(dtype)


def swap_halves(x: torch.Tensor) -> torch.Tensor:
    """[..., Dh] -> [..., Dh] with the two halves exchanged (a roll by half the width)."""
    return torch.roll(x, x.shape[-1] // 2, dims=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor) -> torch.Tensor:
    """x [B, T, N, Dh], cos/sin_signed [B, T, 1, Dh] -> rotated x (equal to x*cos + rotate_half(x)*sin)."""
    return torch.addcmul(x * cos, swap_halves(x), sin_signed)
