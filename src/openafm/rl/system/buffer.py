"""The replay buffer of asynchronous RL: whole RLOO groups tagged with the policy version that sampled them.

A trajectory generator (TG) writes groups; the policy updater (PU) takes P groups per update. A group is one
prompt's k samples, all from one policy version (one generator call samples them together), so a group is the
unit stored, dropped and handed out: a prompt's samples are never split across versions or updates, and the
leave-one-out baseline always sees all k.

    buffer = ReplayBuffer(capacity=64, k=4, max_staleness=1, sampling=Sampling.FIFO)
    buffer.put(groups)                        # -> groups accepted (a group already seen is counted, not stored)
    taken = buffer.take(8, version=5)         # -> 8 groups, or None while fewer than 8 are fresh enough

Staleness of a group taken at PU version V: V - group.version (0: sampled by the weights being updated).
`take` first drops every group with staleness > max_staleness (counted in `stale_dropped`, never silent); a full
buffer evicts its oldest group to admit a new one (counted in `evicted`). Every group put is accounted for:

    put = taken + stale_dropped + evicted + depth          (duplicates are counted apart and never stored)

Sampling: FIFO hands out groups in arrival order; FRESHEST the newest policy version first (ties by arrival),
so older groups wait and may expire. The state (groups, counters, the keys seen) is plain JSON data, saved in the
PU's checkpoint.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from openafm.errors import ConfigError
from openafm.rl.config import Sampling
from openafm.rl.rollout import Row


@dataclasses.dataclass
class TrajectoryGroup:
    """One prompt's k samples from one policy version, rewarded and scored at generation time."""
    ticket: int                  # the prompt batch it was generated for (tickets.py)
    index: int                   # the prompt's place in that batch
    set_index: int               # the prompt set (config.prompt_sets[set_index])
    version: int                 # the policy version that sampled all k rows
    rows: list[Row]              # k rows
    rewards: list[float]         # k task rewards (before KL shaping)
    behaviour: list[list[float]]  # per row: log pi_version of each response token (the ratio's denominator)
    reference: list[list[float]]  # per row: log pi_ref of each response token (the KL shaping's)
    generator: int = 0           # the TG replica that made it
    finished_at: float = 0.0     # time.time() when it was written

    @property
    def key(self) -> tuple[int, int]:
        return (self.ticket, self.index)

    def check(self, k: int) -> None:
        n = len(self.rows)
        if n != k or len(self.rewards) != k or len(self.behaviour) != k or len(self.reference) != k:
            raise ValueError(f"group {self.key}: {n} rows, {len(self.rewards)} rewards, {len(self.behaviour)} "
                             f"behaviour and {len(self.reference)} reference log-prob lists; a group holds k={k} "
                             f"of each")
        for row, lp, ref in zip(self.rows, self.behaviour, self.reference):
            if len(lp) != len(row.response) or len(ref) != len(row.response):
                raise ValueError(f"group {self.key}: a row of {len(row.response)} response tokens has "
                                 f"{len(lp)} behaviour and {len(ref)} reference log-probs")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> TrajectoryGroup:
        return cls(**{**d, "rows": [Row(**r) for r in d["rows"]]})


@dataclasses.dataclass
class BufferStats:
    put: int = 0                 # groups accepted
    duplicates: int = 0          # groups whose (ticket, index) was already seen: not stored, not counted as put
    taken: int = 0
    stale_dropped: int = 0
    evicted: int = 0
    staleness: dict[int, int] = dataclasses.field(default_factory=dict)   # staleness -> groups taken


class ReplayBuffer:
    def __init__(self, *, capacity: int, k: int, max_staleness: int, sampling: Sampling = Sampling.FIFO):
        if capacity < 1 or k < 1 or max_staleness < 0:
            raise ConfigError(f"replay buffer: capacity={capacity} and k={k} must be >= 1, max_staleness="
                              f"{max_staleness} >= 0")
        self.capacity, self.k, self.max_staleness = capacity, k, max_staleness
        self.sampling = Sampling(sampling)
        self.groups: list[TrajectoryGroup] = []            # arrival order
        self.seen: set[tuple[int, int]] = set()
        self.stats = BufferStats()

    def __len__(self) -> int:
        return len(self.groups)

    def put(self, groups: list[TrajectoryGroup]) -> int:
        """Store the groups (checked whole); a key already seen is a duplicate (counted). -> groups accepted."""
        for g in groups:
            g.check(self.k)
        accepted = 0
        for g in groups:
            if g.key in self.seen:
                self.stats.duplicates += 1
                continue
            self.seen.add(g.key)
            if len(self.groups) >= self.capacity:
                self.groups.pop(0)
                self.stats.evicted += 1
            self.groups.append(g)
            self.stats.put += 1
            accepted += 1
        return accepted

    def drop_stale(self, version: int) -> int:
        """Drop the groups older than max_staleness at PU version `version`. -> groups dropped."""
        keep = [g for g in self.groups if version - g.version <= self.max_staleness]
        dropped = len(self.groups) - len(keep)
        self.groups = keep
        self.stats.stale_dropped += dropped
        return dropped

    def take(self, n: int, version: int) -> list[TrajectoryGroup] | None:
        """n groups for the update at PU version `version` (stale ones dropped first), or None while fewer than n
        are left (nothing is taken then)."""
        self.drop_stale(version)
        if len(self.groups) < n:
            return None
        order = range(len(self.groups))
        if self.sampling is Sampling.FRESHEST:
            order = sorted(order, key=lambda i: (-self.groups[i].version, i))
        chosen = sorted(list(order)[:n]) if self.sampling is Sampling.FIFO else list(order)[:n]
        taken = [self.groups[i] for i in chosen]
        gone = set(chosen)
        self.groups = [g for i, g in enumerate(self.groups) if i not in gone]
        self.stats.taken += n
        for g in taken:
            s = version - g.version
            self.stats.staleness[s] = self.stats.staleness.get(s, 0) + 1
        return taken

    def depth(self) -> int:
        return len(self.groups)

    def versions(self) -> Counter:
        return Counter(g.version for g in self.groups)

    def summary(self) -> dict:
        return {"depth": len(self.groups), **dataclasses.asdict(self.stats)}

    def state_dict(self) -> dict:
        stats = dataclasses.asdict(self.stats)
        stats["staleness"] = {str(s): n for s, n in self.stats.staleness.items()}    # JSON keys are strings
        return {"groups": [g.to_dict() for g in self.groups], "seen": sorted(self.seen), "stats": stats,
                "k": self.k}

    def load_state_dict(self, state: dict) -> None:
        if state["k"] != self.k:
            raise ConfigError(f"the checkpoint's buffer holds groups of k={state['k']}, this run k={self.k}")
        self.groups = [TrajectoryGroup.from_dict(g) for g in state["groups"]]
        self.seen = {tuple(key) for key in state["seen"]}
        stats = dict(state["stats"])
        stats["staleness"] = {int(s): n for s, n in stats["staleness"].items()}
        self.stats = BufferStats(**stats)
