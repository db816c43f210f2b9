"""The CLIP pair (report §5.1, encoder pretraining): the vision encoder, a small text tower, and one shared space.

Images and captions are mapped to unit vectors in an `embed_dim` space; their dot products, scaled by a
learned temperature, are the logits of the contrastive loss (train/vision/clip.py). The image side is the
encoder's register (Register-Window; the mean of the patches for a plain ViTDet), projected. The text side
is a small bidirectional transformer over the SmolLM2 tokenizer's ids (the ViT blocks of models/vision.py
with a key mask over padding), mean-pooled over the caption's tokens and projected. The report does not
describe its text tower; this one is small because captions here are names ("grinning face").
"""

from __future__ import annotations

import dataclasses
import math

import torch
from torch import nn
from torch.nn import functional as F

from openafm import config as cfg
from openafm.errors import ConfigError
from openafm.models.vision import Block, VisionConfig, VisionEncoder, get_vision_preset

SMOLLM2_VOCAB = 49152
MAX_LOGIT_SCALE = 100.0     # CLIP clips the learned scale at 100 (temperature 0.01)


@dataclasses.dataclass(frozen=True, kw_only=True)
class TextConfig:
    vocab_size: int = SMOLLM2_VOCAB
    max_tokens: int = 32        # captions are cut to this many tokens
    width: int = 128
    depth: int = 2
    heads: int = 4
    mlp_ratio: float = 4.0
    norm_eps: float = 1e-6

    def __post_init__(self) -> None:
        for name in ("vocab_size", "max_tokens", "width", "depth", "heads"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"text: {name} must be positive, got {getattr(self, name)}")
        if self.width % self.heads:
            raise ConfigError(f"text: width={self.width} is not divisible by heads={self.heads}")

    @property
    def mlp_hidden(self) -> int:
        return round(self.width * self.mlp_ratio)

    def param_count(self) -> int:
        d, h = self.width, self.mlp_hidden
        block = 4 * d + (3 * d * d + 3 * d) + (d * d + d) + (d * h + h) + (h * d + d)
        return self.vocab_size * d + self.max_tokens * d + self.depth * block + 2 * d


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClipConfig:
    vision: VisionConfig
    text: TextConfig = TextConfig()
    embed_dim: int = 128
    init_temperature: float = 0.07     # CLIP's initial temperature; learned (as log 1/T) from there

    def __post_init__(self) -> None:
        if self.embed_dim <= 0:
            raise ConfigError(f"clip: embed_dim must be positive, got {self.embed_dim}")
        if not 1 / MAX_LOGIT_SCALE <= self.init_temperature <= 1:
            raise ConfigError(f"clip: init_temperature={self.init_temperature} must lie in "
                              f"[{1 / MAX_LOGIT_SCALE}, 1]")

    def to_dict(self) -> dict:
        return cfg.to_dict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "ClipConfig":
        return cfg.from_dict(cls, data)

    def param_count(self) -> int:
        return (self.vision.param_count() + self.text.param_count()
                + (self.vision.width + self.text.width) * self.embed_dim + 1)


def clip_preset(vision: str = "vision-small") -> ClipConfig:
    """A vision preset with a 2-layer text tower as wide as the encoder (at most 128, 32 per head) and an
    embedding space of that width: vision-small gets a 128-wide text tower, vision-micro a 64-wide one."""
    v = get_vision_preset(vision)
    width = min(128, v.width)
    return ClipConfig(vision=v, text=TextConfig(width=width, heads=max(1, width // 32)), embed_dim=width)


class TextTower(nn.Module):
    def __init__(self, config: TextConfig, device=None):
        super().__init__()
        self.config = config
        d = config.width
        self.embed = nn.Embedding(config.vocab_size, d, device=device)
        self.pos = nn.Parameter(torch.randn(config.max_tokens, d, device=device) * 0.01)
        self.blocks = nn.ModuleList(Block(d, config.heads, config.mlp_hidden, config.norm_eps, device=device)
                                    for _ in range(config.depth))
        self.norm = nn.LayerNorm(d, eps=config.norm_eps, device=device)

    def forward(self, ids: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """ids [B, T] token ids, valid [B, T] bool (False: padding; each row needs one True) -> [B, D]."""
        if ids.shape[1] > self.config.max_tokens:
            raise ConfigError(f"text: {ids.shape[1]} tokens exceed max_tokens={self.config.max_tokens}")
        if not valid.any(1).all():
            raise ConfigError("text: every caption needs at least one token")
        x = self.embed(ids) + self.pos[: ids.shape[1]]                      # [B, T, D]
        for block in self.blocks:
            x = block.feed(block.attend(x, valid))
        x = self.norm(x)
        weights = valid.to(x.dtype)[..., None]                                # [B, T, 1]
        return (x * weights).sum(1) / weights.sum(1)                          # mean over the caption's tokens


class ClipModel(nn.Module):
    def __init__(self, config: ClipConfig, device=None):
        super().__init__()
        self.config = config
        self.vision = VisionEncoder(config.vision, device=device)
        self.text = TextTower(config.text, device=device)
        self.image_proj = nn.Linear(config.vision.width, config.embed_dim, bias=False, device=device)
        self.text_proj = nn.Linear(config.text.width, config.embed_dim, bias=False, device=device)
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / config.init_temperature), device=device))

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def scale(self) -> torch.Tensor:
        """exp(logit_scale) = 1 / temperature, clipped at MAX_LOGIT_SCALE (CLIP)."""
        return self.logit_scale.exp().clamp(max=MAX_LOGIT_SCALE)

    def encode_image(self, pixels: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
        """[B, 3, H, W] in [0, 1] (keep: FLIP's kept patches) -> [B, E] unit vectors."""
        return F.normalize(self.image_proj(self.vision(pixels, keep=keep).register), dim=-1)

    def encode_text(self, ids: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """[B, T] ids and valid mask -> [B, E] unit vectors."""
        return F.normalize(self.text_proj(self.text(ids, valid)), dim=-1)

    def logits(self, images: torch.Tensor, texts: torch.Tensor) -> torch.Tensor:
        """[B, E] x [C, E] unit vectors -> [B, C] scaled cosine similarities."""
        return self.scale() * images @ texts.T
