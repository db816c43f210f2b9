"""A model is a plan, not a subclass: a decoder config is a list of per-layer specs over shared blocks.

Each layer says which attention it runs (global RoPE, sliding-window RoPE, global NoPE), where its
keys and values come from (its own projections, or the KV cache of an earlier layer), and which FFN
it has. The on-device model, the server model and an imported Llama-family model are all plans.
"""

from __future__ import annotations

import dataclasses

from openafm import config as cfg
from openafm.errors import ConfigError
from openafm.nn.layer_spec import AttentionKind, FFNKind, LayerSpec


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


# --- plan builders: the report's layer patterns ------------------------------------------------

def kv_sharing_plan(n_layers: int, *, shared_fraction: float = 0.375, share: bool = True,
                    attention: AttentionKind = AttentionKind.GLOBAL_ROPE, window: int | None = None) -> list[LayerSpec]:
    """The on-device split (report §2.1): Block 1 = the first 62.5% of layers, with their own K/V;
    Block 2 = the last 37.5%, with no K/V projections, each reading the cache of the last Block-1 layer
    of the same attention kind (the report shares block 1's final-layer caches; SwiftKV and Gemma-3n
    make the same choice). share=False gives the same depth with every layer owning its K/V."""
    n_shared = n_layers * shared_fraction
    if n_shared != int(n_shared):
        raise ConfigError(f"n_layers={n_layers} x shared_fraction={shared_fraction} = {n_shared} is not a whole "
                          f"number of layers; use a multiple of {_denominator(shared_fraction)} layers")
    n_own = n_layers - int(n_shared)
    specs = [LayerSpec(attention=attention, window=window) for _ in range(n_own)]
    if not share:
        return specs + [LayerSpec(attention=attention, window=window) for _ in range(int(n_shared))]
    last_owner = {(s.attention, s.window): i for i, s in enumerate(specs)}
    source = last_owner[(attention, window)]
    return specs + [LayerSpec(attention=attention, window=window, kv_source=source) for _ in range(int(n_shared))]


def interleaved_plan(n_layers: int, *, window: int = 4096, sliding_per_global: int = 3) -> list[LayerSpec]:
    """The server attention pattern (report §2.2): repeating units of 3 sliding-window RoPE layers
    followed by 1 global NoPE layer."""
    unit = sliding_per_global + 1
    if n_layers % unit:
        raise ConfigError(f"n_layers={n_layers} is not a multiple of the interleave unit of {unit} layers "
                          f"({sliding_per_global} sliding + 1 global)")
    specs = []
    for i in range(n_layers):
        if i % unit == sliding_per_global:
            specs.append(LayerSpec(attention=AttentionKind.GLOBAL_NOPE))
        else:
            specs.append(LayerSpec(attention=AttentionKind.SLIDING_ROPE, window=window))
    return specs


def _denominator(fraction: float) -> int:
    return next(d for d in range(1, 1025) if (fraction * d).is_integer())
