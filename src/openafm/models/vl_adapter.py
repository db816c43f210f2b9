"""The vision-language adapter (report §2.3): the encoder's patch grid -> a fixed number of decoder-embedding tokens.

Whatever the image size (a 672x672 view gives a 42x42 grid with 16-pixel patches, a 224x224 view 14x14), the
adapter squeezes the grid to `tokens` = s*s embeddings in the decoder's space: 144 (12x12) for a full view,
9 (3x3) in rapid mode. The report names no compressor; three are here behind `AdapterKind`:

    C_ABSTRACTOR   Honeybee's C-Abstractor: a residual conv block on the grid, adaptive average pooling to s x s,
                   a second conv block, then an MLP into the decoder's width. Convolution keeps local
                   context that plain pooling averages away.
    PIXEL_SHUFFLE  adaptive pooling to 2s x 2s, then each 2x2 neighbourhood stacked into one 4D-wide token
                   (space-to-depth, as InternVL / Idefics3), then an MLP. The default: in the measured ablation
                   (benchmarks/vl_adapter_ablation.py, docs/results/vl_adapter_ablation.json: equal steps, held-out
                   emoji style) it scored best and runs ~11x faster per 672x672 view than the C-Abstractor, which
                   had not left chance after the same steps.
    AVG_POOL       adaptive average pooling to s x s, then an MLP (the baseline: no learned spatial mixing).
"""

from __future__ import annotations

import dataclasses
import enum
import math

import torch
import torch.nn.functional as F
from torch import nn

from openafm.errors import ConfigError


class AdapterKind(enum.Enum):
    C_ABSTRACTOR = "c-abstractor"
    PIXEL_SHUFFLE = "pixel-shuffle"
    AVG_POOL = "avg-pool"


@dataclasses.dataclass(frozen=True, kw_only=True)
class AdapterConfig:
    in_dim: int                         # the encoder's width D
    out_dim: int                        # the decoder's embedding width
    kind: AdapterKind = AdapterKind.PIXEL_SHUFFLE
    hidden: int | None = None           # the MLP / conv width (default: out_dim)

    def __post_init__(self) -> None:
        if isinstance(self.kind, str):
            object.__setattr__(self, "kind", AdapterKind(self.kind))
        for name in ("in_dim", "out_dim"):
            if getattr(self, name) < 1:
                raise ConfigError(f"adapter {name}={getattr(self, name)} must be positive")
        if self.hidden is not None and self.hidden < 1:
            raise ConfigError(f"adapter hidden={self.hidden} must be positive or None")

    @property
    def width(self) -> int:
        return self.hidden if self.hidden is not None else self.out_dim


def grid_side(tokens: int) -> int:
    """144 -> 12: the side of the square token grid; a count that is not a square raises."""
    side = math.isqrt(tokens) if tokens > 0 else 0
    if side < 1 or side * side != tokens:
        raise ConfigError(f"image tokens={tokens} must be a positive perfect square (9, 144, ...): the adapter "
                          f"pools the patch grid to a square")
    return side


class ConvBlock(nn.Module):
    """Residual block on a grid: x + conv3x3(SiLU(conv3x3(norm(x)))) (C-Abstractor's ResNet block, slimmed)."""

    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.GroupNorm(1, dim)
        self.conv1 = nn.Conv2d(dim, dim, 3, padding=1)
        self.conv2 = nn.Conv2d(dim, dim, 3, padding=1)
        nn.init.zeros_(self.conv2.weight)
        nn.init.zeros_(self.conv2.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:      # [B, C, h, w]
        return x + self.conv2(F.silu(self.conv1(self.norm(x))))


class VLAdapter(nn.Module):
    """patches [B, h, w, D] -> image tokens [B, s*s, out_dim] in the decoder's embedding space."""

    def __init__(self, config: AdapterConfig):
        super().__init__()
        self.config = config
        c, width = config.in_dim, config.width
        if config.kind is AdapterKind.C_ABSTRACTOR:
            self.proj_in = nn.Conv2d(c, width, 1)
            self.pre = ConvBlock(width)
            self.post = ConvBlock(width)
            mlp_in = width
        elif config.kind is AdapterKind.PIXEL_SHUFFLE:
            mlp_in = 4 * c
        else:
            mlp_in = c
        self.norm = nn.LayerNorm(mlp_in)
        self.mlp = nn.Sequential(nn.Linear(mlp_in, width), nn.GELU(), nn.Linear(width, config.out_dim))

    def forward(self, patches: torch.Tensor, tokens: int) -> torch.Tensor:
        if patches.ndim != 4 or patches.shape[-1] != self.config.in_dim:
            raise ValueError(f"patches must be [B, h, w, {self.config.in_dim}], got {tuple(patches.shape)}")
        s = grid_side(tokens)
        x = patches.permute(0, 3, 1, 2)                                          # [B, D, h, w]
        kind = self.config.kind
        if kind is AdapterKind.C_ABSTRACTOR:
            x = self.pre(self.proj_in(x))                                        # [B, W, h, w]
            x = self.post(F.adaptive_avg_pool2d(x, s))                           # [B, W, s, s]
            x = x.flatten(2).transpose(1, 2)                                     # [B, s*s, W]
        elif kind is AdapterKind.PIXEL_SHUFFLE:
            x = F.adaptive_avg_pool2d(x, 2 * s)                                  # [B, D, 2s, 2s]
            x = F.pixel_unshuffle(x, 2)                                          # [B, 4D, s, s]
            x = x.flatten(2).transpose(1, 2)                                     # [B, s*s, 4D]
        else:
            x = F.adaptive_avg_pool2d(x, s).flatten(2).transpose(1, 2)           # [B, s*s, D]
        return self.mlp(self.norm(x))                                            # [B, s*s, out_dim]
