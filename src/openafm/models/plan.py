"""A model is a plan, not a subclass: a decoder config is a list of per-layer specs over shared blocks.

Each layer says which attention it runs (global RoPE, sliding-window RoPE, global NoPE), where its
keys and values come from (its own projections, or the KV cache of an earlier layer), and which FFN
it has. The on-device model, the server model and an imported Llama-family model are all plans.
"""

from __future__ import annotations

import dataclasses
import enum

from openafm import config as cfg
from openafm.errors import ConfigError


class AttentionKind(str, enum.Enum):
    GLOBAL_ROPE = "global-rope"     # causal attention over every earlier position, rotary positions
    SLIDING_ROPE = "sliding-rope"   # causal attention over the last `window` positions, rotary positions
    GLOBAL_NOPE = "global-nope"     # causal attention over every earlier position, no positional encoding

    @property
    def uses_rope(self) -> bool:
        return self is not AttentionKind.GLOBAL_NOPE


class FFNKind(str, enum.Enum):
    DENSE = "dense"                 # SwiGLU with the config's ffn_hidden
    MOE = "moe"                     # dropless top-k mixture of SwiGLU experts (the config's `moe` spec)


@dataclasses.dataclass(frozen=True, kw_only=True)
class MoESpec:
    n_experts: int
    top_k: int
    hidden: int                     # each expert's SwiGLU hidden size

    def __post_init__(self) -> None:
        if self.n_experts < 1 or self.hidden < 1:
            raise ConfigError(f"moe: n_experts={self.n_experts} and hidden={self.hidden} must be positive")
        if not 1 <= self.top_k <= self.n_experts:
            raise ConfigError(f"moe: top_k={self.top_k} must be between 1 and n_experts={self.n_experts}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class LayerSpec:
    attention: AttentionKind = AttentionKind.GLOBAL_ROPE
    # Sliding layers attend to the last `window` positions, the query's own included.
    window: int | None = None
    # None: the layer has its own K/V projections and cache. An int: the index of an earlier layer whose
    # KV cache this layer reads (it has no K/V projections and stores nothing).
    kv_source: int | None = None
    ffn: FFNKind = FFNKind.DENSE

    @property
    def owns_kv(self) -> bool:
        return self.kv_source is None


@dataclasses.dataclass(kw_only=True)
class DecoderConfig:
    vocab_size: int
    dim: int
    n_heads: int
    n_kv_heads: int
    head_dim: int | None = None            # default dim // n_heads
    ffn_hidden: int
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    max_seq_len: int = 2048
    tie_embeddings: bool = True
    layers: list[LayerSpec]
    moe: MoESpec | None = None             # required when any layer has ffn=moe

    def __post_init__(self) -> None:
        self.layers = [cfg.from_dict(LayerSpec, l) if isinstance(l, dict) else l for l in self.layers]
        if isinstance(self.moe, dict):
            self.moe = cfg.from_dict(MoESpec, self.moe, "moe")
        self.validate()

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    @property
    def attn_head_dim(self) -> int:
        return self.head_dim if self.head_dim is not None else self.dim // self.n_heads

    def validate(self) -> None:
        for name in ("vocab_size", "dim", "n_heads", "n_kv_heads", "ffn_hidden", "max_seq_len"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if self.n_heads % self.n_kv_heads:
            raise ConfigError(f"n_heads={self.n_heads} must be a multiple of n_kv_heads={self.n_kv_heads}")
        if self.head_dim is None and self.dim % self.n_heads:
            raise ConfigError(f"dim={self.dim} is not divisible by n_heads={self.n_heads}; set head_dim")
        if self.attn_head_dim % 2:
            raise ConfigError(f"head_dim={self.attn_head_dim} must be even for rotary embeddings")
        if not self.layers:
            raise ConfigError("a decoder needs at least one layer; layers=[]")
        moe_layers = [i for i, l in enumerate(self.layers) if l.ffn is FFNKind.MOE]
        if moe_layers and self.moe is None:
            raise ConfigError(f"layers {moe_layers} have ffn=moe but the config has no moe spec")
        if self.moe is not None and not moe_layers:
            raise ConfigError(f"moe={self.moe} is set but no layer has ffn=moe")
        for i, layer in enumerate(self.layers):
            if layer.attention is AttentionKind.SLIDING_ROPE:
                if layer.window is None or layer.window <= 0:
                    raise ConfigError(f"layers.{i}: a sliding-rope layer needs a positive window, got {layer.window}")
            elif layer.window is not None:
                raise ConfigError(f"layers.{i}: window={layer.window} is only valid for sliding-rope layers, "
                                  f"not {layer.attention.value}")
            if layer.kv_source is not None:
                src = layer.kv_source
                if not 0 <= src < i:
                    raise ConfigError(f"layers.{i}: kv_source={src} must name an earlier layer (0..{i - 1})")
                source = self.layers[src]
                if not source.owns_kv:
                    raise ConfigError(f"layers.{i}: kv_source={src} reads layer {src}, which has no KV cache of its "
                                      f"own (it reads layer {source.kv_source}); point at an owner layer")
                if (source.attention, source.window) != (layer.attention, layer.window):
                    raise ConfigError(
                        f"layers.{i}: attention {layer.attention.value} (window {layer.window}) cannot read the cache "
                        f"of layer {src}, which is {source.attention.value} (window {source.window}): kinds must match")

    def to_dict(self) -> dict:
        return cfg.to_dict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "DecoderConfig":
        return cfg.from_dict(cls, data)

    def param_count(self, *, active: bool = False) -> int:
        """Parameters of the model this config builds (closed form, checked against the module in tests).
        active=True counts what one token uses: the router and top_k experts of each MoE layer."""
        total = self.vocab_size * self.dim * (1 if self.tie_embeddings else 2) + self.dim  # embed (+ head), norm
        return total + sum(self.layer_param_count(layer, active=active) for layer in self.layers)

    def layer_param_count(self, layer: LayerSpec, *, active: bool = False) -> int:
        d, hd = self.dim, self.attn_head_dim
        q, kv = self.n_heads * hd, self.n_kv_heads * hd
        total = 2 * d                                        # two RMSNorm weights
        total += d * q + q * d                               # wq, wo
        total += 2 * d * kv if layer.owns_kv else 0          # wk, wv
        if layer.ffn is FFNKind.DENSE:
            total += 3 * d * self.ffn_hidden                 # SwiGLU gate, up, down
        else:
            experts = self.moe.top_k if active else self.moe.n_experts
            total += d * self.moe.n_experts + experts * 3 * d * self.moe.hidden   # router + experts
        return total
