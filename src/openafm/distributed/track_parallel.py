"""Track parallelism for PT-MoE (report §2.2): each rank runs its own tracks; ranks meet once per track block.

With W ranks and n tracks, rank r owns tracks [r n/W, (r+1) n/W). A forward pass is

    x = begin(ids)                                          # [B, T, D], replicated: every rank computes it
    for each block b:
        x_in  = copy_to_parallel(x)                         # identity; backward: all-reduce of dL/dx
        local = sum over owned t of TrackBlock_{t,b}(x_in)  # [B, T, D], this rank's partial sum
        x     = reduce_from_parallel(local) / n             # all-reduce: mean over every track
    logits = finish(x)                                      # replicated

so a forward pass issues L/D all-reduces (one per block boundary) and a backward pass L/D more (the
conjugates), against 2 per layer each way for tensor parallelism.

Why the replicated parameters (embedding, final norm, head) get identical gradients on every rank without a
gradient all-reduce of their own: every rank computes the same x after each combine (the all-reduce hands
all ranks the same sum), hence the same logits and, with the same targets, the same loss, so the head and
final norm see identical gradients. Going back through a block, `reduce_from_parallel`'s backward gives each
owned track the same gradient; `copy_to_parallel`'s backward sums the tracks' partial input gradients over
all ranks, which is exactly dL/dx of the whole model (x reaches the next boundary only through the tracks, the
residual included), and it is the same tensor on every rank. Down at block 0 that is the embedding's
gradient. A track's own parameters only get gradients on the rank that owns it.

Memory: the wrapper takes the model over and releases the tracks it does not own, replacing them in
`model.tracks` with `ReleasedTrack` placeholders that hold no parameters and raise if run. It still loads a
full single-process state dict (`load_full_state_dict` drops the released tracks' entries), so a
track-parallel run and a single-process run can start from identical weights.
"""

from __future__ import annotations

import torch
from torch import nn

from openafm.distributed.collectives import copy_to_parallel, group_rank_and_size, reduce_from_parallel
from openafm.errors import ConfigError
from openafm.models.decoder import Logits
from openafm.models.pt_moe import PTMoE


def owned_tracks(n_tracks: int, world_size: int, rank: int) -> range:
    """The tracks rank `rank` of `world_size` runs: a contiguous n_tracks / world_size of them."""
    if world_size < 1 or not 0 <= rank < world_size:
        raise ConfigError(f"rank={rank} is not in a world of size {world_size}")
    if n_tracks % world_size:
        raise ConfigError(f"n_tracks={n_tracks} is not divisible by world size {world_size}: track parallelism "
                          f"gives every rank the same number of whole tracks")
    per_rank = n_tracks // world_size
    return range(rank * per_rank, (rank + 1) * per_rank)


class ReleasedTrack(nn.Module):
    """Stands in for a track another rank owns: no parameters; running it raises.

    It iterates as empty, so `PTMoE.moe_layers()` lists this rank's experts only."""

    def __init__(self, track: int, owner: int):
        super().__init__()
        self.track, self.owner = track, owner

    def __getitem__(self, index):
        raise RuntimeError(f"track {self.track} lives on rank {self.owner}; this rank released it")

    def __iter__(self):
        return iter(())

    def __len__(self) -> int:
        return 0

    def extra_repr(self) -> str:
        return f"track={self.track}, owner=rank {self.owner}"


class TrackParallel(nn.Module):
    """A PT-MoE split by tracks over the ranks of `group` (None: the default process group)."""

    def __init__(self, model: PTMoE, group=None):
        super().__init__()
        rank, world = group_rank_and_size(group)
        n = model.config.n_tracks
        self.tracks = owned_tracks(n, world, rank)
        self.group, self.rank, self.world_size = group, rank, world
        per_rank = n // world
        for t in range(n):
            if t not in self.tracks:
                model.tracks[t] = ReleasedTrack(t, owner=t // per_rank)
        self.model = model

    @property
    def config(self):
        return self.model.config

    def forward(self, input_ids: torch.Tensor, logits: Logits = Logits.ALL) -> torch.Tensor:
        """input_ids [B, T] (the same on every rank) -> logits [B, T, V] (or [B, 1, V]), the same on every rank.
        Cache-free: training and scoring."""
        model, n = self.model, self.model.config.n_tracks
        x, ctx = model.begin(input_ids, None, None)                            # [B, T, D]
        for block in range(model.config.n_blocks):
            x_in = copy_to_parallel(x, self.group)
            local = None
            for t in self.tracks:
                y = model.run_track_block(t, block, x_in, ctx)                 # [B, T, D]
                local = y if local is None else local + y
            x = reduce_from_parallel(local, self.group) / n
        return model.finish(x, ctx, logits)

    def is_replicated(self, name: str) -> bool:
        """Whether parameter `name` (as in `self.model.named_parameters()`) is held by every rank."""
        return not name.startswith("tracks.")

    def load_full_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Load a single-process `PTMoE.state_dict()`: the replicated parts and this rank's tracks (strict);
        the released tracks' entries are checked to be present and then dropped."""
        released = [t for t in range(self.config.n_tracks) if t not in self.tracks]
        prefixes = tuple(f"tracks.{t}." for t in released)
        missing = [t for t in released if not any(k.startswith(f"tracks.{t}.") for k in state)]
        if missing:
            raise ConfigError(f"the state dict has no entries for tracks {missing}; expected a full PT-MoE state "
                              f"dict with {self.config.n_tracks} tracks")
        self.model.load_state_dict({k: v for k, v in state.items() if not k.startswith(prefixes)}, strict=True)
