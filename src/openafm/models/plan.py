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
from openafm.nn.attention import AttentionMath
from openafm.nn.layer_spec import AttentionKind, FFNKind, LayerSpec
from openafm.nn.mlp import Activation
from openafm.nn.moe import Routing
from openafm.nn.rope import RopeScaling


class NormPlacement(str, enum.Enum):
    PRE = "pre"                # x + f(norm(x)): Llama, Qwen, Mistral, Phi-3, AFM
    SANDWICH = "sandwich"      # x + norm'(f(norm(x))): Gemma 2/3 also normalise each sublayer's output


@dataclasses.dataclass(frozen=True, kw_only=True)
class Features:
    """What an imported architecture's math adds to the AFM/Llama block; the defaults are that block.

    Each is data the layers read (nn/): no subclass per family. checkpoint/families.py says which families
    use which, from a Hugging Face or GGUF config."""

    qkv_bias: bool = False                  # Qwen2: q, k, v projections have a bias
    qk_norm: bool = False                   # Qwen3, Gemma 3: RMSNorm over each head's q and k before RoPE
    norms: NormPlacement = NormPlacement.PRE
    activation: Activation = Activation.SILU   # the gated FFN's activation (Gemma: GELU, tanh approximation)
    embed_scale: float = 1.0                # Gemma: token embeddings times sqrt(dim)
    attn_scale: float | None = None         # softmax scale (None: 1 / sqrt(head_dim); Gemma: query_pre_attn_scalar)
    attn_softcap: float | None = None       # Gemma 2: scores -> c * tanh(scores / c)
    logit_softcap: float | None = None      # Gemma 2: logits -> c * tanh(logits / c)
    local_rope_theta: float | None = None   # Gemma 3: sliding layers rotate with this base (no scaling)

    def __post_init__(self) -> None:
        for name in ("attn_scale", "attn_softcap", "logit_softcap", "local_rope_theta"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ConfigError(f"features.{name}={value} must be positive (or null)")
        if not self.embed_scale > 0:
            raise ConfigError(f"features.embed_scale={self.embed_scale} must be positive")

    def attention_math(self, norm_eps: float) -> AttentionMath:
        return AttentionMath(bias=self.qkv_bias, qk_norm_eps=norm_eps if self.qk_norm else None,
                             scale=self.attn_scale, softcap=self.attn_softcap)


@dataclasses.dataclass(frozen=True, kw_only=True)
class MoESpec:
    n_experts: int
    top_k: int
    hidden: int                     # each expert's SwiGLU hidden size
    routing: Routing = Routing.RENORMALIZED
    shared_hidden: int | None = None    # Qwen2-MoE: one always-on SwiGLU expert of this width, sigmoid-gated

    def __post_init__(self) -> None:
        if self.shared_hidden is not None and self.shared_hidden < 1:
            raise ConfigError(f"moe: shared_hidden={self.shared_hidden} must be positive (or null)")
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
    rope_scaling: RopeScaling | None = None   # Llama 3, LongRoPE, YaRN, linear: per-frequency factors
    features: Features = dataclasses.field(default_factory=Features)

    def __post_init__(self) -> None:
        self.layers = [cfg.from_dict(LayerSpec, l) if isinstance(l, dict) else l for l in self.layers]
        if isinstance(self.moe, dict):
            self.moe = cfg.from_dict(MoESpec, self.moe, "moe")
        if isinstance(self.rope_scaling, dict):
            self.rope_scaling = cfg.from_dict(RopeScaling, self.rope_scaling, "rope_scaling")
        if isinstance(self.features, dict):
            self.features = cfg.from_dict(Features, self.features, "features")
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
        if self.rope_scaling is not None and len(self.rope_scaling.freq_factors) != self.attn_head_dim // 2:
            raise ConfigError(f"rope_scaling has {len(self.rope_scaling.freq_factors)} frequency factors; head_dim "
                              f"{self.attn_head_dim} rotates {self.attn_head_dim // 2} frequencies")
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
        d, hd, f = self.dim, self.attn_head_dim, self.features
        q, kv = self.n_heads * hd, self.n_kv_heads * hd
        total = 2 * d * (2 if f.norms is NormPlacement.SANDWICH else 1)   # RMSNorm weights
        total += d * q + q * d                               # wq, wo
        total += 2 * d * kv if layer.owns_kv else 0          # wk, wv
        if f.qkv_bias:
            total += q + (2 * kv if layer.owns_kv else 0)
        if f.qk_norm:
            total += hd * (2 if layer.owns_kv else 1)
        if layer.ffn is FFNKind.DENSE:
            total += 3 * d * self.ffn_hidden                 # gated FFN: gate, up, down
        else:
            experts = self.moe.top_k if active else self.moe.n_experts
            total += d * self.moe.n_experts + experts * 3 * d * self.moe.hidden   # router + experts
            if self.moe.shared_hidden is not None:
                total += 3 * d * self.moe.shared_hidden + d  # the shared expert and its gate
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
