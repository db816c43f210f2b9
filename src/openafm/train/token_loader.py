"""A loader over one token array (a tokenized text): rows of `seq_len` tokens cut at random offsets.

Micro-batch n of the whole job depends only on (seed, n), like the synthetic loader: every rank builds the
same global micro-batch and keeps its own rows, and the position saved in a checkpoint is just n. Each row
is one window of the array (one document: positions 0..T-1, one segment), labels are the next tokens.

`english_text_loader` is a `data.kind: callable` factory: the train split of openafm.eval.texts, tokenized
with the config's model's tokenizer.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import torch

from openafm.checkpoint.load import load_model
from openafm.errors import ConfigError
from openafm.eval.texts import english_text
from openafm.train.synthetic import SyntheticBatch


class TokenArrayLoader:
    def __init__(self, token_ids, *, seq_len: int, global_batch: int, seed: int = 0, rank: int = 0,
                 world_size: int = 1):
        self.ids = torch.as_tensor(token_ids, dtype=torch.long).flatten()          # [N]
        if len(self.ids) < seq_len + 1:
            raise ConfigError(f"the token array has {len(self.ids)} tokens; rows of seq_len={seq_len} need at "
                              f"least {seq_len + 1}")
        if global_batch % world_size:
            raise ConfigError(f"global micro-batch of {global_batch} rows does not split over world_size={world_size}")
        if not 0 <= rank < world_size:
            raise ConfigError(f"rank={rank} is outside 0..{world_size - 1}")
        self.seq_len, self.global_batch, self.seed = seq_len, global_batch, seed
        self.rank, self.world_size = rank, world_size
        self._next = 0

    def batch(self, n: int) -> SyntheticBatch:
        """Micro-batch n: this rank's rows of the global micro-batch."""
        rng = np.random.default_rng([self.seed, 0x70CE, n])
        starts = rng.integers(0, len(self.ids) - self.seq_len, size=self.global_batch)    # [G]
        per_rank = self.global_batch // self.world_size
        starts = starts[self.rank * per_rank:(self.rank + 1) * per_rank]
        offsets = torch.as_tensor(starts, dtype=torch.long)[:, None] + torch.arange(self.seq_len + 1)  # [B, T+1]
        rows = self.ids[offsets]                                                  # [B, T+1]
        positions = torch.arange(self.seq_len).expand(per_rank, -1).clone()      # [B, T]
        return SyntheticBatch(input_ids=rows[:, :-1].contiguous(), labels=rows[:, 1:].contiguous(),
                              positions=positions, segment_ids=torch.zeros_like(positions))

    def __iter__(self) -> Iterator[SyntheticBatch]:
        while True:
            b = self.batch(self._next)
            self._next += 1
            yield b

    def state_dict(self) -> dict[str, Any]:
        return {"next": self._next, "tokens": len(self.ids), "seed": self.seed}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("tokens") != len(self.ids) or state.get("seed") != self.seed:
            raise ConfigError(f"loader state for {state.get('tokens')} tokens / seed {state.get('seed')} does not "
                              f"match this loader ({len(self.ids)} tokens, seed {self.seed})")
        self._next = int(state["next"])


def english_text_loader(config, *, rank: int = 0, world_size: int = 1, split: str = "train") -> TokenArrayLoader:
    """data: {kind: callable, target: "openafm.train.token_loader:english_text_loader"} (options: split)."""
    if split != "train":
        raise ConfigError(f"split={split!r}: training reads the train split only (held-out text is for evaluation)")
    lm = load_model(config.model)
    if lm.tokenizer is None:
        raise ConfigError(f"model {config.model!r} has no tokenizer to tokenize the training text")
    rows = config.rows_per_rank(world_size) * world_size
    return TokenArrayLoader(lm.tokenizer.encode(english_text(split)), seq_len=config.seq_len, global_batch=rows,
                            seed=config.seed, rank=rank, world_size=world_size)
