"""The recipe's loader factory for the trainer (`data.kind: callable`, target
`openafm.pipelines.loader:packed_loader`): packed rows over a shards stage's subset and a mixture."""

from __future__ import annotations

from openafm import config as cfg
from openafm.data.loader import LoaderConfig, PackedLoader
from openafm.data.mixture import MixtureConfig
from openafm.errors import ConfigError

TARGET = "openafm.pipelines.loader:packed_loader"


def packed_loader(config, *, rank: int, world_size: int, root: str, mixture: dict, skip_steps: int = 0) -> PackedLoader:
    """config: the TrainConfig; root: a token shard directory; mixture: a MixtureConfig as a dict;
    skip_steps: advance the stream by this many steps of this batch shape first (a continuation that picks
    up where an earlier stage's data stopped)."""
    if skip_steps < 0:
        raise ConfigError(f"skip_steps={skip_steps} must be >= 0")
    loader = PackedLoader.from_dir(root, cfg.from_dict(MixtureConfig, mixture, "mixture"), LoaderConfig(
        batch_size=config.rows_per_rank(world_size), seq_len=config.seq_len, seed=config.seed,
        total_steps=(config.steps + skip_steps) * config.grad_accum, rank=rank, world_size=world_size))
    # the loader counts micro-batches: progress (a curriculum) runs over the whole stream, skipped part included
    for _ in range(skip_steps * config.grad_accum):
        loader.next_batch()
    return loader
