"""What one decoder layer is: its attention kind, where its K/V come from, and its FFN kind.

These are the vocabulary the building blocks (attention, the KV contract) speak; `models/plan.py` composes a
model from a list of them.
"""

from __future__ import annotations

import dataclasses
import enum


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
