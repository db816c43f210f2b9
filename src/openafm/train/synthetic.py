"""A deterministic in-memory loader that follows the `Loader` protocol: packed rows of documents drawn from a
fixed random Markov chain (so there is something to learn), for tests and benchmarks.

Micro-batch n of the whole job depends only on (seed, n): every rank builds the same global micro-batch and
keeps its own rows, so 2 ranks with 4 rows each see exactly what 1 rank with 8 rows sees.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator

import numpy as np
import torch

from openafm.errors import ConfigError
from openafm.train.batch_protocol import IGNORE_INDEX


@dataclasses.dataclass
class SyntheticBatch:
    input_ids: torch.Tensor    # [B, T]
    labels: torch.Tensor       # [B, T]
    positions: torch.Tensor    # [B, T]
    segment_ids: torch.Tensor  # [B, T]


class SyntheticLoader:
    """Rows of `seq_len` tokens packed with documents of `min_doc_len`..`max_doc_len` tokens.

    Each token's successor is one of `branching` tokens fixed per token (seeded), so a model can learn the
    chain down to a loss of about log(branching). The last token of a document has label IGNORE_INDEX.
    """

    def __init__(self, *, vocab_size: int, seq_len: int, global_batch: int, seed: int = 0, rank: int = 0,
                 world_size: int = 1, branching: int = 4, min_doc_len: int = 8, max_doc_len: int | None = None):
        if global_batch % world_size:
            raise ConfigError(f"global micro-batch of {global_batch} rows does not split over world_size={world_size}")
        if not 0 <= rank < world_size:
            raise ConfigError(f"rank={rank} is outside 0..{world_size - 1}")
        if vocab_size < 2 or seq_len < 2 or not 1 <= branching <= vocab_size:
            raise ConfigError(f"synthetic data needs vocab_size >= 2 (got {vocab_size}), seq_len >= 2 (got {seq_len}) "
                              f"and 1 <= branching <= vocab_size (got {branching})")
        self.vocab_size, self.seq_len, self.global_batch = vocab_size, seq_len, global_batch
        self.seed, self.rank, self.world_size, self.branching = seed, rank, world_size, branching
        self.min_doc_len, self.max_doc_len = min_doc_len, max_doc_len or seq_len
        table_rng = np.random.default_rng([seed, 0x5EED])
        self.successors = table_rng.integers(0, vocab_size, size=(vocab_size, branching))  # [V, branching]
        self._next = 0

    def state_dict(self) -> dict[str, Any]:
        return {"kind": "synthetic", "next_micro_batch": self._next}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("kind") != "synthetic" or not isinstance(state.get("next_micro_batch"), int):
            raise ConfigError(f"not a synthetic loader state: {state!r}; expected "
                              "{'kind': 'synthetic', 'next_micro_batch': int}")
        self._next = state["next_micro_batch"]

    def __iter__(self) -> Iterator[SyntheticBatch]:
        while True:
            batch = self.micro_batch(self._next)
            self._next += 1
            yield batch

    def micro_batch(self, index: int) -> SyntheticBatch:
        """This rank's rows of global micro-batch `index`."""
        rng = np.random.default_rng([self.seed, index])
        rows = [self._row(rng) for _ in range(self.global_batch)]
        per_rank = self.global_batch // self.world_size
        mine = rows[self.rank * per_rank:(self.rank + 1) * per_rank]
        ids, labels, pos, seg = (torch.from_numpy(np.stack([r[i] for r in mine])) for i in range(4))
        return SyntheticBatch(input_ids=ids, labels=labels, positions=pos, segment_ids=seg)

    def _row(self, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        t = self.seq_len
        ids = np.empty(t + 1, dtype=np.int64)
        pos = np.empty(t + 1, dtype=np.int64)
        seg = np.empty(t + 1, dtype=np.int64)
        start, doc = 0, 0
        while start < t + 1:
            length = min(int(rng.integers(self.min_doc_len, self.max_doc_len + 1)), t + 1 - start)
            tok = int(rng.integers(0, self.vocab_size))
            choices = rng.integers(0, self.branching, size=length)
            for j in range(length):
                ids[start + j] = tok
                tok = int(self.successors[tok, choices[j]])
            pos[start:start + length] = np.arange(length)
            seg[start:start + length] = doc
            start, doc = start + length, doc + 1
        labels = ids[1:].copy()
        labels[seg[1:] != seg[:-1]] = IGNORE_INDEX   # the next token starts another document
        return ids[:-1], labels, pos[:-1], seg[:-1]
