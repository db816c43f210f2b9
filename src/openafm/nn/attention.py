"""Grouped-query attention of the three kinds, with K/V from own projections or an earlier layer's cache.

`AttentionMath` holds what imported families add to the plain form: q/k/v biases (Qwen2), an RMSNorm over
each head's q and k before RoPE (Qwen3, Gemma 3), another softmax scale and tanh soft-capping of the scores
(Gemma 2). Soft-capped scores cannot go through the fused SDPA kernel, so those layers compute the scores
explicitly (same masks, float32 softmax).
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn
from torch.nn import functional as F

from openafm.nn.kv import KeyLayout, LayerKV
from openafm.nn.layer_spec import LayerSpec
from openafm.nn.linear import Linear
from openafm.nn.mask import document_mask, visibility_mask
from openafm.nn.norm import RMSNorm
from openafm.nn.rope import apply_rope


@dataclasses.dataclass(frozen=True)
class AttentionMath:
    bias: bool = False                   # q, k, v projections have a bias (a separate parameter: any weight form)
    qk_norm_eps: float | None = None     # RMSNorm over each head's q and k (None: none)
    scale: float | None = None           # softmax scale; None: 1 / sqrt(head_dim)
    softcap: float | None = None         # scores -> softcap * tanh(scores / softcap)

    @property
    def plain(self) -> bool:
        return self == AttentionMath()


@dataclasses.dataclass
class ForwardContext:
    """What every layer of one forward pass shares: the K/V store, positions, rotary tables, masks."""

    store: object                    # nn.kv.FreshKV or runtime.kv_cache.KVCache (begin/write/read/end)
    positions: torch.Tensor          # [B, T] positions of the new tokens (-1 = left padding)
    padded: bool                     # any padding in the batch: always use explicit masks
    cos: torch.Tensor | None = None  # [B, T, 1, Dh]
    sin: torch.Tensor | None = None  # [B, T, 1, Dh], sign folded in (see nn.rope)
    masks: dict = dataclasses.field(default_factory=dict)
    segment_ids: torch.Tensor | None = None  # [B, T] documents of packed rows (cache-free forwards only)
    local: tuple[torch.Tensor, torch.Tensor] | None = None  # cos/sin of sliding layers, where they differ (Gemma 3)

    def rotary(self, tq: int, spec: LayerSpec | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """cos/sin of the last tq tokens (all of them unless the prefill bypass sliced the queries), from the
        sliding layers' own table when the model has one and `spec` is a sliding layer."""
        cos, sin = self.cos, self.sin
        if self.local is not None and spec is not None and spec.window is not None:
            cos, sin = self.local
        if tq == self.positions.shape[1]:
            return cos, sin
        return cos[:, -tq:], sin[:, -tq:]

    def mask(self, spec: LayerSpec, tq: int, kv: LayerKV) -> tuple[torch.Tensor | None, bool]:
        """(attn_mask, is_causal) for the last tq queries over kv; cached per kind and shape."""
        s = kv.k_pos.shape[1]
        window = spec.window
        if self.segment_ids is not None:
            key = ("documents", window, tq)
            if key not in self.masks:
                self.masks[key] = document_mask(self.segment_ids, self.positions, tq, window)
            return self.masks[key], False
        if not self.padded:
            fits = window is None or s <= window
            if kv.layout is KeyLayout.PREFIX and fits and tq == s:
                return None, True
            if tq == 1 and (kv.layout is KeyLayout.ALL_VISIBLE or (kv.layout is KeyLayout.PREFIX and fits)):
                return None, False
        key = (spec.attention, window, tq, s)
        if key not in self.masks:
            self.masks[key] = visibility_mask(self.positions[:, -tq:], kv.k_pos, window)
        return self.masks[key], False


class Attention(nn.Module):
    def __init__(self, *, dim: int, n_heads: int, n_kv_heads: int, head_dim: int, spec: LayerSpec, index: int,
                 device=None, math: AttentionMath = AttentionMath()):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, head_dim
        self.spec, self.index, self.math = spec, index, math
        q_out, kv_out = n_heads * head_dim, n_kv_heads * head_dim
        self.split = (q_out, kv_out, kv_out)
        in_out = q_out + 2 * kv_out if spec.owns_kv else q_out
        if spec.owns_kv:
            self.qkv = Linear(dim, in_out, bias=False, device=device)  # rows: q, k, v
        else:
            self.q = Linear(dim, q_out, bias=False, device=device)  # K/V come from layer spec.kv_source
        self.out = Linear(q_out, dim, bias=False, device=device)
        # The bias is the attention's own parameter, not its Linear's, so it stays whatever form the weight
        # takes (GGUF blocks, packed codes, LoRA).
        self.in_bias = nn.Parameter(torch.zeros(in_out, device=device)) if math.bias else None  # [q (+ k + v)]
        if math.qk_norm_eps is not None:
            self.q_norm = RMSNorm(head_dim, math.qk_norm_eps, device=device)
            self.k_norm = RMSNorm(head_dim, math.qk_norm_eps, device=device) if spec.owns_kv else None

    def forward(self, x: torch.Tensor, ctx: ForwardContext) -> torch.Tensor:  # [B, T, D] -> [B, T, D]
        b, t, _ = x.shape
        h, hkv, dh = self.n_heads, self.n_kv_heads, self.head_dim
        rope = self.spec.attention.uses_rope
        # Queries are the last T of the forward's tokens (T < all when the prefill bypass sliced them).
        cos, sin = ctx.rotary(t, self.spec) if rope else (None, None)
        if self.spec.owns_kv:
            qkv = self._project(self.qkv, x).view(b, t, h + 2 * hkv, dh)       # [B, T, H + 2Hkv, Dh]
            if self.math.qk_norm_eps is not None:
                qkv = torch.cat([self.q_norm(qkv[:, :, :h]), self.k_norm(qkv[:, :, h:h + hkv]), qkv[:, :, h + hkv:]], 2)
            qk = apply_rope(qkv[:, :, :h + hkv], cos, sin) if rope else qkv    # rotate q and k together
            q, k, v = qk[:, :, :h], qk[:, :, h:h + hkv], qkv[:, :, h + hkv:]
            kv = ctx.store.write(self.index, self.spec, k.transpose(1, 2), v.transpose(1, 2))
        else:
            q = self._project(self.q, x).view(b, t, h, dh)
            q = self.q_norm(q) if self.math.qk_norm_eps is not None else q
            q = apply_rope(q, cos, sin) if rope else q
            kv = ctx.store.read(self.spec.kv_source)
        mask, causal = ctx.mask(self.spec, t, kv)
        o = self._attend(q.transpose(1, 2), kv.k, kv.v, mask, causal)         # [B, H, T, Dh]
        return self.out(o.transpose(1, 2).reshape(b, t, h * dh))

    def _project(self, linear: nn.Module, x: torch.Tensor) -> torch.Tensor:
        y = linear(x)
        return y if self.in_bias is None else y + self.in_bias

    def _attend(self, q, k, v, mask, causal) -> torch.Tensor:
        b, h, t, dh = q.shape
        groups = self.n_heads // self.n_kv_heads
        if self.math.softcap is not None:
            return self._attend_softcapped(q, k, v, mask, causal)
        scale = self.math.scale
        if t == 1 and groups > 1:
            # One query per head: fold each KV group's query heads into the query axis so K/V are not repeated.
            qg = q.reshape(b, self.n_kv_heads, groups, dh)                           # [B, Hkv, G, Dh]
            og = F.scaled_dot_product_attention(qg, k, v, attn_mask=mask, scale=scale)  # mask [B, 1, 1, S]
            return og.view(b, h, 1, dh)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=groups > 1,
                                              scale=scale)

    def _attend_softcapped(self, q, k, v, mask, causal) -> torch.Tensor:
        """Explicit scores, c * tanh(s / c), masked float32 softmax: q [B, H, T, Dh], k/v [B, Hkv, S, Dh]."""
        groups = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1)   # [B, H, S, Dh]
        scale = self.math.scale if self.math.scale is not None else self.head_dim ** -0.5
        scores = torch.matmul(q, k.transpose(-1, -2)) * scale                    # [B, H, T, S]
        cap = self.math.softcap
        scores = torch.tanh(scores / cap) * cap
        t, s = scores.shape[-2:]
        if causal:
            mask = torch.ones(t, s, dtype=torch.bool, device=q.device).tril(s - t)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.float().softmax(-1).to(q.dtype)
        return torch.matmul(weights, v)
