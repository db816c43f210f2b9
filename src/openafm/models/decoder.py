"""The decoder: one stack of pre-norm blocks driven by a per-layer plan (`DecoderConfig.layers`).

`CausalLM` holds what every openafm language model shares — token embeddings, rotary tables, the
forward pass's set-up (positions, KV store, masks) and the output head; `Decoder` runs the plan's
blocks in order, `openafm.models.pt_moe.PTMoE` runs them as parallel tracks.
"""

from __future__ import annotations

import enum

import torch
from torch import nn

from openafm.models.plan import DecoderConfig, FFNKind, LayerSpec, NormPlacement
from openafm.nn.attention import Attention, ForwardContext
from openafm.nn.kv import FreshKV
from openafm.nn.linear import Linear, linear
from openafm.nn.mlp import SwiGLU
from openafm.nn.moe import MoE
from openafm.nn.norm import RMSNorm
from openafm.nn.rope import RotaryTable


class Logits(enum.Enum):
    ALL = "all"    # logits at every position [B, T, V]
    LAST = "last"  # logits at the last position only [B, 1, V]; lets trailing KV-reader layers skip the rest
    HIDDEN = "hidden"  # no logits: the final normalised hidden states [B, T, D], for the caller to apply `head`
    #                    where it needs logits (training on the few labelled positions of an SFT row)


class Block(nn.Module):
    """Pre-norm transformer layer. `index` is the layer's slot in the KV store (its flat layer index)."""

    def __init__(self, config: DecoderConfig, spec: LayerSpec, index: int, device=None):
        super().__init__()
        f = config.features
        self.attn_norm = RMSNorm(config.dim, config.norm_eps, device=device)
        self.attn = Attention(dim=config.dim, n_heads=config.n_heads, n_kv_heads=config.n_kv_heads,
                              head_dim=config.attn_head_dim, spec=spec, index=index, device=device,
                              math=f.attention_math(config.norm_eps))
        self.ffn_norm = RMSNorm(config.dim, config.norm_eps, device=device)
        if spec.ffn is FFNKind.MOE:
            m = config.moe
            self.ffn = MoE(config.dim, m.hidden, m.n_experts, m.top_k, device=device, routing=m.routing,
                           shared_hidden=m.shared_hidden)
        else:
            self.ffn = SwiGLU(config.dim, config.ffn_hidden, device=device, activation=f.activation)
        self.sandwich = f.norms is NormPlacement.SANDWICH
        if self.sandwich:   # Gemma 2/3: each sublayer's output is normalised before it joins the residual
            self.post_attn_norm = RMSNorm(config.dim, config.norm_eps, device=device)
            self.post_ffn_norm = RMSNorm(config.dim, config.norm_eps, device=device)

    def forward(self, x: torch.Tensor, ctx: ForwardContext) -> torch.Tensor:
        if self.sandwich:
            x = x + self.post_attn_norm(self.attn(self.attn_norm(x), ctx))
            return x + self.post_ffn_norm(self.ffn(self.ffn_norm(x)))
        x = x + self.attn(self.attn_norm(x), ctx)
        return x + self.ffn(self.ffn_norm(x))


class CausalLM(nn.Module):
    """Embeddings, rotary table and output head around a body of blocks (see `Decoder`, `PTMoE`)."""

    def __init__(self, config: DecoderConfig, device=None):
        super().__init__()
        # On the meta device (a checkpoint's weights are assigned next) there is nothing to initialize, and
        # Embedding's normal_ there imports torch._dynamo: 1.6 s of every load.
        meta = torch.device(device).type == "meta" if device is not None else False
        self.embed = nn.Embedding(config.vocab_size, config.dim, device=device,
                                  _weight=torch.empty(config.vocab_size, config.dim, device=device) if meta else None)
        self.norm = RMSNorm(config.dim, config.norm_eps, device=device)
        self.lm_head = (None if config.tie_embeddings
                        else Linear(config.dim, config.vocab_size, bias=False, device=device))
        self.rope = RotaryTable(config.attn_head_dim, config.rope_theta, config.max_seq_len, config.rope_scaling)
        local = config.features.local_rope_theta      # Gemma 3: sliding layers keep their own (unscaled) base
        self.local_rope = (None if local is None
                           else RotaryTable(config.attn_head_dim, local, config.max_seq_len))
        self.embed_scale = config.features.embed_scale
        self.logit_softcap = config.features.logit_softcap

    @property
    def kv_plan(self) -> DecoderConfig:
        """The flat layer plan the runtime's KV cache is built from (layer i = the Block with index i)."""
        raise NotImplementedError

    def begin(self, input_ids: torch.Tensor, cache, positions: torch.Tensor | None,
              segment_ids: torch.Tensor | None = None, embeds: torch.Tensor | None = None):
        """-> (embedded tokens [B, T, D], the forward's context). Opens the K/V store for T new tokens.
        embeds [B, T, D]: the input embeddings to use instead of the token embeddings (image tokens)."""
        b, t = input_ids.shape
        if segment_ids is not None:
            positions = _check_packed(input_ids, cache, positions, segment_ids)
        if positions is None:
            if cache is not None and cache.padded:
                raise ValueError("this cache holds a left-padded batch whose rows are at different positions; "
                                 "pass positions= explicitly")
            start = cache.next_position if cache is not None else 0
            positions = torch.arange(start, start + t, device=input_ids.device).expand(b, t)
        if embeds is not None and embeds.shape[:2] != input_ids.shape:
            raise ValueError(f"embeds shape {tuple(embeds.shape)} must be input_ids shape {tuple(input_ids.shape)} + [D]")
        x = self.embed_tokens(input_ids) if embeds is None else embeds         # [B, T, D]
        store = cache if cache is not None else FreshKV()
        ctx = ForwardContext(store=store, positions=positions, padded=store.padded or bool((positions < 0).any()),
                             segment_ids=segment_ids)
        if any(s.attention.uses_rope for s in self.kv_plan.layers):
            ctx.cos, ctx.sin = self.rope.lookup(positions, x.dtype)
            if self.local_rope is not None:
                ctx.local = self.local_rope.lookup(positions, x.dtype)
        store.begin(positions)
        return x, ctx

    def embed_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        """ids [...] -> the decoder's input vectors [..., D]: the embedding rows (times Gemma's sqrt(dim))."""
        x = self.embed(ids)
        return x if self.embed_scale == 1.0 else x * torch.tensor(self.embed_scale, dtype=x.dtype)

    def finish(self, x: torch.Tensor, ctx: ForwardContext, logits: "Logits") -> torch.Tensor:
        """Close the K/V store; final norm and output head -> logits [B, T or 1, V] (hidden [B, T, D] for HIDDEN)."""
        ctx.store.end(ctx.positions)
        if logits is Logits.LAST:
            x = x[:, -1:]
        return self.norm(x) if logits is Logits.HIDDEN else self.head(self.norm(x))

    def head(self, x: torch.Tensor) -> torch.Tensor:
        """Normalised hidden states [..., D] -> logits [..., V] (soft-capped where the model says so)."""
        if self.lm_head is not None:
            out = self.lm_head(x)
        elif (attend := getattr(self.embed, "attend", None)) is not None:
            out = attend(x)                               # a packed embedding computes x E^T from its codes
        else:
            out = linear(x, self.embed.weight)                                # tied embeddings
        if self.logit_softcap is not None:
            out = torch.tanh(out / self.logit_softcap) * self.logit_softcap
        return out

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


class Decoder(CausalLM):
    def __init__(self, config: DecoderConfig, *, device: torch.device | str | None = None):
        """device="meta" builds the structure without memory (to be filled by load_state_dict(assign=True));
        the rotary table is always real."""
        super().__init__(config, device)
        self.config = config
        self.layers = nn.ModuleList(Block(config, spec, i, device) for i, spec in enumerate(config.layers))
        # Layers from here on only read earlier caches, so nothing needs their outputs at earlier positions.
        self.bypass_from = next(i for i in range(config.n_layers + 1)
                                if all(not s.owns_kv for s in config.layers[i:]))

    @property
    def kv_plan(self) -> DecoderConfig:
        return self.config

    def forward(self, input_ids: torch.Tensor, *, cache=None, positions: torch.Tensor | None = None,
                segment_ids: torch.Tensor | None = None, logits: Logits = Logits.ALL,
                embeds: torch.Tensor | None = None) -> torch.Tensor:
        """input_ids [B, T] -> logits [B, T, V] (or [B, 1, V] with Logits.LAST).

        cache: a runtime KVCache to read and extend (None: a cache-free forward from position 0).
        positions: [B, T] absolute positions, -1 for left padding (default: continue the cache).
        segment_ids: [B, T] packed training rows: which document each token belongs to (non-decreasing
            along a row). A token then attends only to earlier tokens of its own document; positions
            should restart at each document (default: derived from segment_ids). Cache-free only.
        embeds: [B, T, D] input embeddings used in place of embed(input_ids): how image tokens enter
            (openafm.models.vlm splices them in at the image placeholders).
        """
        x, ctx = self.begin(input_ids, cache, positions, segment_ids, embeds)
        for i, layer in enumerate(self.layers):
            if i == self.bypass_from and logits is Logits.LAST and x.shape[1] > 1:
                x = x[:, -1:]                                                  # prefill bypass
            x = layer(x, ctx)
        return self.finish(x, ctx, logits)


def _check_packed(input_ids: torch.Tensor, cache, positions: torch.Tensor | None,
                  segment_ids: torch.Tensor) -> torch.Tensor:
    """Validate a packed-row forward; -> positions [B, T] (given, or restarting at each segment change)."""
    if cache is not None and not isinstance(cache, FreshKV):     # FreshKV stores (training) keep no cache
        raise ValueError("segment_ids (packed training rows) need a cache-free forward; got a KV cache")
    if segment_ids.shape != input_ids.shape:
        raise ValueError(f"segment_ids shape {tuple(segment_ids.shape)} must equal input_ids shape "
                         f"{tuple(input_ids.shape)}")
    if segment_ids.dtype.is_floating_point or segment_ids.dtype == torch.bool:
        raise ValueError(f"segment_ids must be an integer tensor, got {segment_ids.dtype}")
    if bool((segment_ids[:, 1:] < segment_ids[:, :-1]).any()):
        raise ValueError("segment_ids must be non-decreasing along each row (documents are contiguous)")
    if positions is None:
        return segment_positions(segment_ids)
    if positions.shape != input_ids.shape:
        raise ValueError(f"positions shape {tuple(positions.shape)} must equal input_ids shape "
                         f"{tuple(input_ids.shape)}")
    if bool((positions < 0).any()):
        raise ValueError("positions of packed rows must be >= 0 (packed rows have no padding)")
    return positions


def segment_positions(segment_ids: torch.Tensor) -> torch.Tensor:
    """segment_ids [B, T] -> positions [B, T] counting from 0 at each segment's first token."""
    b, t = segment_ids.shape
    slot = torch.arange(t, device=segment_ids.device).expand(b, t)
    starts = torch.ones_like(segment_ids, dtype=torch.bool)
    starts[:, 1:] = segment_ids[:, 1:] != segment_ids[:, :-1]
    start_slot = torch.where(starts, slot, torch.zeros_like(slot)).cummax(dim=1).values  # [B, T]
    return slot - start_slot
