"""Parallel-Track Mixture-of-Experts (PT-MoE), the server model of report §2.2.

The model is `n_tracks` smaller transformers (tracks) over one shared residual stream. Each track is a
stack of track blocks of `block_depth` layers. At every track-block boundary all tracks read the same
hidden state, run their block independently, and their outputs are combined into the next boundary's
hidden state:

    h_{b+1} = mean_t( TrackBlock_{t,b}(h_b) )

so a forward pass has L / D synchronization points (one per block boundary) instead of the 2 per layer of
tensor parallelism. Mean, not sum: each track's output already carries the residual h_b, so the mean is
h_b + mean_t(update_t) and the residual stream keeps its scale whatever the track count; with one track it
is exactly the plain decoder. Inside a track, layers follow the track plan: the server pattern of 3
sliding-window RoPE layers + 1 global NoPE layer, and an MoE FFN every other layer with experts local to
the track.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from openafm import config as cfg
from openafm.errors import ConfigError
from openafm.models.decoder import Block, CausalLM, Logits
from openafm.models.plan import DecoderConfig, FFNKind, LayerSpec, interleaved_plan


@dataclasses.dataclass(kw_only=True)
class PTMoEConfig:
    n_tracks: int
    block_depth: int               # D: layers per track block (synchronization every D layers)
    track: DecoderConfig           # one track's plan; vocab, context and embedding tying are the model's

    def __post_init__(self) -> None:
        if isinstance(self.track, dict):
            self.track = DecoderConfig.from_dict(self.track)
        self.validate()

    def validate(self) -> None:
        if self.n_tracks < 1:
            raise ConfigError(f"n_tracks={self.n_tracks} must be at least 1")
        if self.block_depth < 1 or self.track.n_layers % self.block_depth:
            raise ConfigError(f"block_depth={self.block_depth} must divide the track's {self.track.n_layers} layers "
                              f"into whole track blocks")
        shared = [i for i, s in enumerate(self.track.layers) if not s.owns_kv]
        if shared:
            raise ConfigError(f"track layers {shared} read another layer's KV cache; PT-MoE tracks do not support "
                              f"KV sharing")

    @property
    def n_blocks(self) -> int:
        return self.track.n_layers // self.block_depth

    @property
    def max_seq_len(self) -> int:
        return self.track.max_seq_len

    def kv_plan(self) -> DecoderConfig:
        """Every track's layers one after another: track t's layer j has flat index t * L + j."""
        return dataclasses.replace(self.track, layers=self.track.layers * self.n_tracks)

    def param_count(self, *, active: bool = False) -> int:
        t = self.track
        shared = t.vocab_size * t.dim * (1 if t.tie_embeddings else 2) + t.dim
        per_track = sum(t.layer_param_count(layer, active=active) for layer in t.layers)
        return shared + self.n_tracks * per_track

    def to_dict(self) -> dict:
        return cfg.to_dict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "PTMoEConfig":
        return cfg.from_dict(cls, data)


def server_track_plan(n_layers: int, *, window: int, moe_every: int = 2) -> list[LayerSpec]:
    """3 sliding-window RoPE layers + 1 global NoPE layer, repeated; every `moe_every`-th layer's FFN is MoE."""
    return [dataclasses.replace(spec, ffn=FFNKind.MOE if i % moe_every == moe_every - 1 else FFNKind.DENSE)
            for i, spec in enumerate(interleaved_plan(n_layers, window=window))]


class PTMoE(CausalLM):
    def __init__(self, config: PTMoEConfig, *, device: torch.device | str | None = None):
        super().__init__(config.track, device)
        self.config = config
        n = config.track.n_layers
        self.tracks = nn.ModuleList(
            nn.ModuleList(Block(config.track, spec, t * n + j, device) for j, spec in enumerate(config.track.layers))
            for t in range(config.n_tracks))
        self._kv_plan = config.kv_plan()

    @property
    def kv_plan(self) -> DecoderConfig:
        return self._kv_plan

    def run_track_block(self, track: int, block: int, x: torch.Tensor, ctx) -> torch.Tensor:
        """One track's block `block` (layers [block*D, (block+1)*D)) on the shared hidden state x [B, T, D]."""
        d = self.config.block_depth
        for layer in self.tracks[track][block * d:(block + 1) * d]:
            x = layer(x, ctx)
        return x

    @staticmethod
    def combine(outputs: list[torch.Tensor]) -> torch.Tensor:
        """Track outputs [B, T, D] each -> the next block boundary's hidden state (their mean)."""
        return outputs[0] if len(outputs) == 1 else torch.stack(outputs).mean(0)

    def forward(self, input_ids: torch.Tensor, *, cache=None, positions: torch.Tensor | None = None,
                segment_ids: torch.Tensor | None = None, logits: Logits = Logits.ALL) -> torch.Tensor:
        """input_ids [B, T] -> logits [B, T, V] (or [B, 1, V] with Logits.LAST); as `Decoder.forward`."""
        x, ctx = self.begin(input_ids, cache, positions, segment_ids)
        for block in range(self.config.n_blocks):
            x = self.combine([self.run_track_block(t, block, x, ctx) for t in range(self.config.n_tracks)])
        return self.finish(x, ctx, logits)

    def moe_layers(self) -> list[nn.Module]:
        return [block.ffn for track in self.tracks for block in track if hasattr(block.ffn, "last_stats")]
