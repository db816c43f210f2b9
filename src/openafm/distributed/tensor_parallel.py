"""Megatron tensor parallelism for a dense `Decoder`: the baseline track parallelism is measured against.

Every layer splits its attention heads and its FFN hidden units over the W ranks of a group:

    attention:  h = copy_to_parallel(attn_norm(x))          # [B, T, D] on every rank
                o = out_r(attend(qkv_r(h)))                  # column-parallel qkv (local heads), row-parallel out
                x = x + reduce_from_parallel(o)              # all-reduce 1
    FFN:        h = copy_to_parallel(ffn_norm(x))
                x = x + reduce_from_parallel(down_r(silu(gate_r(h)) * up_r(h)))   # all-reduce 2

so a forward pass issues 2 all-reduces per layer, and a backward pass 2 more (the conjugates). Rank r holds
query heads [r H/W, (r+1) H/W) with KV heads [r Hkv/W, (r+1) Hkv/W) — contiguous blocks, so each query
head keeps its GQA group — and FFN hidden units [r F/W, (r+1) F/W). A local layer is an ordinary
`Attention` / `SwiGLU` with H/W heads and F/W hidden units, so masks, rotary positions and sliding windows
are the single-process code. Embedding, final norm and head are replicated; as in track parallelism their
gradients come out identical on every rank (see `openafm.distributed.track_parallel`).

`load_full_state_dict` takes a single-process `Decoder.state_dict()` and keeps this rank's slices:

    qkv     [(H + 2 Hkv) Dh, D]  rows q_r; k_r; v_r      out   [D, H Dh]  columns of q_r
    gate_up [2F, D]              rows gate_r; up_r       down  [D, F]     columns of the same units
"""

from __future__ import annotations

import torch
from torch import nn

from openafm.distributed.collectives import copy_to_parallel, group_rank_and_size, reduce_from_parallel
from openafm.errors import ConfigError
from openafm.models.decoder import CausalLM, Decoder, Logits
from openafm.models.plan import DecoderConfig, FFNKind, LayerSpec
from openafm.nn.attention import Attention, ForwardContext
from openafm.nn.mlp import SwiGLU
from openafm.nn.norm import RMSNorm


def check_splittable(config: DecoderConfig, world_size: int) -> None:
    """Raise ConfigError naming the values unless heads and FFN hidden split evenly over world_size ranks."""
    for name in ("n_heads", "n_kv_heads", "ffn_hidden"):
        value = getattr(config, name)
        if value % world_size:
            raise ConfigError(f"{name}={value} is not divisible by world size {world_size}: tensor parallelism "
                              f"splits it evenly over the ranks")
    moe = [i for i, s in enumerate(config.layers) if s.ffn is FFNKind.MOE]
    if moe:
        raise ConfigError(f"layers {moe} have ffn=moe; this tensor-parallel baseline splits dense FFNs only")


class TensorParallelBlock(nn.Module):
    """One pre-norm layer with this rank's heads and FFN units; state-dict keys as `Block`'s, shapes sliced."""

    def __init__(self, config: DecoderConfig, spec: LayerSpec, index: int, world_size: int, group, device=None):
        super().__init__()
        self.group = group
        self.attn_norm = RMSNorm(config.dim, config.norm_eps, device=device)
        self.attn = Attention(dim=config.dim, n_heads=config.n_heads // world_size,
                              n_kv_heads=config.n_kv_heads // world_size, head_dim=config.attn_head_dim,
                              spec=spec, index=index, device=device)
        self.ffn_norm = RMSNorm(config.dim, config.norm_eps, device=device)
        self.ffn = SwiGLU(config.dim, config.ffn_hidden // world_size, device=device)

    def forward(self, x: torch.Tensor, ctx: ForwardContext) -> torch.Tensor:  # [B, T, D] -> [B, T, D]
        h = copy_to_parallel(self.attn_norm(x), self.group)
        x = x + reduce_from_parallel(self.attn(h, ctx), self.group)
        h = copy_to_parallel(self.ffn_norm(x), self.group)
        return x + reduce_from_parallel(self.ffn(h), self.group)


class TensorParallelDecoder(CausalLM):
    """A dense `Decoder` with every layer split over the ranks of `group` (None: the default group)."""

    def __init__(self, config: DecoderConfig, group=None, *, device: torch.device | str | None = None):
        rank, world = group_rank_and_size(group)
        check_splittable(config, world)
        super().__init__(config, device)
        self.config, self.group, self.rank, self.world_size = config, group, rank, world
        self.layers = nn.ModuleList(TensorParallelBlock(config, spec, i, world, group, device)
                                    for i, spec in enumerate(config.layers))

    @classmethod
    def from_decoder(cls, model: Decoder, group=None) -> "TensorParallelDecoder":
        tp = cls(model.config, group, device=model.embed.weight.device)
        tp.load_full_state_dict(model.state_dict())
        return tp.to(model.embed.weight.dtype)

    @property
    def kv_plan(self) -> DecoderConfig:
        return self.config

    def forward(self, input_ids: torch.Tensor, logits: Logits = Logits.ALL) -> torch.Tensor:
        """input_ids [B, T] (the same on every rank) -> logits [B, T, V] (or [B, 1, V]), the same on every rank.
        Cache-free: training and scoring."""
        x, ctx = self.begin(input_ids, None, None)                             # [B, T, D]
        for layer in self.layers:
            x = layer(x, ctx)
        return self.finish(x, ctx, logits)

    def is_replicated(self, name: str) -> bool:
        """Whether parameter `name` is held in full by every rank (norms included) rather than sliced."""
        return not name.startswith("layers.") or name.endswith("norm.weight")

    def load_full_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Load a single-process `Decoder.state_dict()`, keeping this rank's slice of each split weight."""
        local = {}
        for key, value in state.items():
            if key.startswith("layers."):
                index = int(key.split(".")[1])
                value = self.shard(key, value, self.config.layers[index])
            local[key] = value
        self.load_state_dict(local, strict=True)

    def shard(self, key: str, full: torch.Tensor, spec: LayerSpec) -> torch.Tensor:
        """This rank's slice of the full weight `key` of a layer with plan `spec`."""
        c, r, w = self.config, self.rank, self.world_size
        dh = c.attn_head_dim
        q, kv = c.n_heads * dh, c.n_kv_heads * dh              # full widths
        ql, kvl = q // w, kv // w                               # local widths
        f, fl = c.ffn_hidden, c.ffn_hidden // w
        name = key.split(".", 2)[2]
        if name == "attn.qkv.weight":                          # [q + 2 kv, D]
            return torch.cat([full[r * ql:(r + 1) * ql],
                              full[q + r * kvl:q + (r + 1) * kvl],
                              full[q + kv + r * kvl:q + kv + (r + 1) * kvl]])
        if name == "attn.q.weight":                            # [q, D] (a KV-reading layer)
            return full[r * ql:(r + 1) * ql]
        if name == "attn.out.weight":                          # [D, q]
            return full[:, r * ql:(r + 1) * ql]
        if name == "ffn.gate_up.weight":                       # [2F, D]
            return torch.cat([full[r * fl:(r + 1) * fl], full[f + r * fl:f + (r + 1) * fl]])
        if name == "ffn.down.weight":                          # [D, F]
            return full[:, r * fl:(r + 1) * fl]
        if name in ("attn_norm.weight", "ffn_norm.weight"):
            return full
        raise ConfigError(f"{key}: no tensor-parallel split is defined for a layer weight named {name!r}")
