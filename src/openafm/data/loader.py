"""A deterministic, resumable loader of packed rows over token shards and a mixture.

The global token stream: document draws d = 0, 1, 2, ... each pick a source (a (domain, language) group of
shards) with the mixture sampler, then that source's next document in a per-epoch shuffled order; every
document is followed by its EOS token. The stream is cut into rows of T + 1 tokens (inputs are the first T,
targets the last T). Step s of training uses global rows [s * B * W, (s + 1) * B * W); rank r of W data-
parallel ranks takes rows s * B * W + r * B + [0, B): ranks never share a token, and together they see
exactly what one rank with batch B * W would see.

Inside a row, segment_ids number the documents (0, 1, ...) and positions restart at 0 at each document and
at the row's first token (a document continued from the previous row). Attention is kept inside a segment,
and rotary attention depends only on position differences inside it, so restarting a continued piece at 0
changes nothing while keeping positions below T + 1. A label is -100 where the next token starts a new
document: nothing inside the previous document can predict it.

Everything is a function of counters (the seed, the draw index, each source's epoch and position), so the
loader's position is a few integers: `state_dict()` is small JSON, and after `load_state_dict()` the loader
yields bit for bit what an uninterrupted one would have.
"""

from __future__ import annotations

import dataclasses
import os
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch

from openafm.data.batch import IGNORE_INDEX, Batch
from openafm.data.mixture import MixtureConfig, MixtureSampler, SourceStats
from openafm.data.shards import HEADER_FILE, ShardError, TokenShard, Verify
from openafm.errors import ConfigError

STATE_VERSION = 1


@dataclasses.dataclass(kw_only=True)
class LoaderConfig:
    batch_size: int                 # rows per rank per step (B)
    seq_len: int                    # tokens per row given to the model (T); rows are cut at T + 1
    seed: int = 0
    total_steps: int | None = None  # training length: progress = step / total_steps drives a curriculum
    rank: int = 0
    world_size: int = 1

    def __post_init__(self) -> None:
        for name in ("batch_size", "seq_len", "world_size"):
            if not (isinstance(getattr(self, name), int) and getattr(self, name) >= 1):
                raise ConfigError(f"loader {name} {getattr(self, name)!r} must be an integer >= 1")
        if not (isinstance(self.rank, int) and 0 <= self.rank < self.world_size):
            raise ConfigError(f"loader rank {self.rank!r} must be in 0 .. world_size - 1 = {self.world_size - 1}")
        if self.total_steps is not None and not (isinstance(self.total_steps, int) and self.total_steps >= 1):
            raise ConfigError(f"loader total_steps {self.total_steps!r} must be an integer >= 1 or None")


def source_order(seed: int, source: str, epoch: int, n_docs: int) -> np.ndarray:
    """[n_docs] the order in which `source` yields its documents in `epoch` (a seeded permutation)."""
    return np.random.default_rng([int(seed), zlib.crc32(source.encode()), int(epoch)]).permutation(n_docs)


class Source:
    """The documents of one (domain, language), across one or more shards, as one indexable list."""

    def __init__(self, name: str, shards: Sequence[TokenShard]):
        self.name, self.shards = name, list(shards)
        self.first_doc = np.cumsum([0] + [len(s) for s in self.shards])      # [n_shards + 1]
        self.n_docs = int(self.first_doc[-1])
        self.lengths = np.concatenate([s.doc_lengths() for s in self.shards]) if self.shards else np.zeros(0, np.int64)
        self._order: tuple[int, np.ndarray] | None = None

    def stats(self) -> SourceStats:
        h = self.shards[0].header
        return SourceStats(domain=h.domain, lang=h.lang, n_tokens=int(self.lengths.sum()) + self.n_docs,
                           n_docs=self.n_docs)

    def tokens(self, doc: int) -> np.ndarray:
        shard = int(np.searchsorted(self.first_doc, doc, side="right")) - 1
        return self.shards[shard][doc - int(self.first_doc[shard])]

    def doc_at(self, seed: int, epoch: int, pos: int) -> int:
        if self._order is None or self._order[0] != epoch:
            self._order = (epoch, source_order(seed, self.name, epoch, self.n_docs))
        return int(self._order[1][pos])


def group_sources(shards: Sequence[TokenShard]) -> list[Source]:
    """Group shards by (domain, lang) into sources, in a stable (sorted) order."""
    if not shards:
        raise ConfigError("the loader needs at least one token shard")
    first = shards[0].header
    groups: dict[str, list[TokenShard]] = {}
    for shard in shards:
        h = shard.header
        if (h.vocab_size, h.eos_id) != (first.vocab_size, first.eos_id):
            raise ShardError(f"{shard.path}: vocab_size {h.vocab_size} / eos_id {h.eos_id} differ from "
                             f"{shards[0].path}'s {first.vocab_size} / {first.eos_id}; shards of one loader must "
                             "come from one tokenizer")
        if h.domain is None:
            raise ShardError(f"{shard.path}: the header has no domain; the mixture needs one of each shard")
        if len(shard) == 0:
            continue
        groups.setdefault(f"{h.domain}/{h.lang or '-'}", []).append(shard)
    return [Source(name, sorted(group, key=lambda s: str(s.path))) for name, group in sorted(groups.items())]


def find_shards(root: str | os.PathLike) -> list[Path]:
    """Every shard directory (one holding shard.json) under root, sorted."""
    root = Path(root)
    if not root.is_dir():
        raise ShardError(f"{root}: not a directory of token shards")
    found = sorted(p.parent for p in root.rglob(HEADER_FILE) if not p.parent.name.startswith("."))
    if not found:
        raise ShardError(f"{root}: no token shards ({HEADER_FILE}) found under it")
    return found


@dataclasses.dataclass
class _Cursor:
    """Where the stream is: documents drawn so far, each source's (epoch, position), the open document."""

    draws: int
    sources: list[list[int]]            # per source [epoch, position in that epoch's order]
    open_doc: list[int] | None          # [source, doc, tokens already emitted (EOS included)] or None


class PackedLoader:
    """`iter(loader)` yields `Batch`es forever; `state_dict()` / `load_state_dict()` save and restore its place."""

    def __init__(self, shards: Sequence[TokenShard], mixture: MixtureConfig, config: LoaderConfig):
        if mixture.curriculum is not None and config.total_steps is None:
            raise ConfigError("the mixture has a curriculum, so the loader needs total_steps (training length)")
        self.mixture, self.config = mixture, config
        self.sources = group_sources(shards)
        self.eos_id = shards[0].header.eos_id
        self.sampler = MixtureSampler(mixture, [s.stats() for s in self.sources], seed=config.seed)
        self.step = 0
        self._cursor = _Cursor(draws=0, sources=[[0, 0] for _ in self.sources], open_doc=None)

    @classmethod
    def from_dir(cls, root: str | os.PathLike, mixture: MixtureConfig, config: LoaderConfig,
                 verify: Verify = Verify.SIZES) -> "PackedLoader":
        """Open every shard under root (see `find_shards`) and build a loader over them."""
        return cls([TokenShard.open(p, verify) for p in find_shards(root)], mixture, config)

    # -- the protocol the trainer uses ---------------------------------------------------------------

    def __iter__(self) -> Iterator[Batch]:
        while True:
            yield self.next_batch()

    def next_batch(self) -> Batch:
        b, t, w, r = self.config.batch_size, self.config.seq_len, self.config.world_size, self.config.rank
        first_row = self.step * b * w
        self._skip(r * b, first_row)
        rows = [self._row(first_row + r * b + i) for i in range(b)]
        self._skip((w - 1 - r) * b, first_row + (r + 1) * b)
        self.step += 1
        tok, seg, pos, start = (np.stack(x) for x in zip(*rows))                  # each [B, T + 1]
        labels = np.where(start[:, 1:], IGNORE_INDEX, tok[:, 1:])
        return Batch(input_ids=torch.from_numpy(tok[:, :t]), labels=torch.from_numpy(labels),
                     positions=torch.from_numpy(pos[:, :t]), segment_ids=torch.from_numpy(seg[:, :t]))

    def state_dict(self) -> dict:
        c = self._cursor
        return {"version": STATE_VERSION, "step": self.step, "draws": c.draws,
                "sources": [list(x) for x in c.sources], "open_doc": None if c.open_doc is None else list(c.open_doc),
                "fingerprint": self._fingerprint()}

    def load_state_dict(self, state: dict) -> None:
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            raise ConfigError(f"loader state version {state.get('version') if isinstance(state, dict) else state!r} "
                              f"is not {STATE_VERSION}")
        mine = self._fingerprint()
        diff = {k: (state["fingerprint"].get(k), v) for k, v in mine.items() if state["fingerprint"].get(k) != v}
        if diff:
            raise ConfigError("loader state was saved by a different loader; (saved, this) differ in "
                              + ", ".join(f"{k}: {a!r} vs {b!r}" for k, (a, b) in diff.items()))
        self.step = int(state["step"])
        self._cursor = _Cursor(draws=int(state["draws"]), sources=[list(map(int, x)) for x in state["sources"]],
                               open_doc=None if state["open_doc"] is None else list(map(int, state["open_doc"])))

    # -- packing -------------------------------------------------------------------------------------

    def _fingerprint(self) -> dict:
        c = self.config
        return {"batch_size": c.batch_size, "seq_len": c.seq_len, "seed": c.seed, "total_steps": c.total_steps,
                "rank": c.rank, "world_size": c.world_size, "eos_id": self.eos_id,
                "sources": {s.name: [s.n_docs, int(s.lengths.sum())] for s in self.sources},
                "mixture": dataclasses.asdict(self.mixture)}

    def _progress(self, global_row: int) -> float:
        if self.config.total_steps is None:
            return 0.0
        return global_row / (self.config.total_steps * self.config.batch_size * self.config.world_size)

    def _next_doc(self, global_row: int) -> list[int]:
        """Draw the next document: -> [source, doc, 0]."""
        c = self._cursor
        i = self.sampler.choose(c.draws, self._progress(global_row))
        c.draws += 1
        epoch, pos = c.sources[i]
        doc = self.sources[i].doc_at(self.config.seed, epoch, pos)
        c.sources[i] = [epoch, pos + 1] if pos + 1 < self.sources[i].n_docs else [epoch + 1, 0]
        return [i, doc, 0]

    def _row(self, global_row: int):
        """The next T + 1 tokens -> (tokens, segment ids, positions, document-start flags), each [T + 1]."""
        n = self.config.seq_len + 1
        tok = np.empty(n, np.int64)
        seg = np.empty(n, np.int64)
        pos = np.empty(n, np.int64)
        start = np.zeros(n, bool)
        filled, segment = 0, 0
        while filled < n:
            src, doc, off = self._cursor.open_doc or self._next_doc(global_row)
            ids = self.sources[src].tokens(doc)
            length = len(ids) + 1                                                 # the document and its EOS
            take = min(length - off, n - filled)
            body = ids[off:min(off + take, len(ids))]
            tok[filled:filled + len(body)] = body
            if off + take == length:
                tok[filled + take - 1] = self.eos_id
            seg[filled:filled + take] = segment
            pos[filled:filled + take] = np.arange(take)
            start[filled] = off == 0
            filled, segment, off = filled + take, segment + 1, off + take
            self._cursor.open_doc = None if off == length else [src, doc, off]
        return tok, seg, pos, start

    def _skip(self, n_rows: int, global_row: int) -> None:
        """Advance past n_rows rows (other ranks' rows) reading only document lengths, not tokens."""
        remaining = n_rows * (self.config.seq_len + 1)
        row = global_row
        while remaining > 0:
            src, doc, off = self._cursor.open_doc or self._next_doc(row)
            length = int(self.sources[src].lengths[doc]) + 1
            take = min(length - off, remaining)
            remaining -= take
            off += take
            self._cursor.open_doc = None if off == length else [src, doc, off]
            row = global_row + (n_rows * (self.config.seq_len + 1) - remaining) // (self.config.seq_len + 1)
