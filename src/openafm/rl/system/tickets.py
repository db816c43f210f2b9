"""Tickets: which prompts a trajectory generator samples next, and whether it may sample them yet.

Ticket b is one batch of P prompts (the synchronous run's step b: the same mixture draw, the same sampling seed),
so every prompt of the run is drawn exactly once, in one order, however many generators ask. A generator holding
policy version v gets a ticket only while the batches alive (issued and not dropped) stay within max_staleness
versions of its weights:

    issue iff  live_batches + 1 <= v + max_staleness + 1      live = issued - dropped / P

With nothing dropped this is b <= v + max_staleness: the PU takes batch b at version b, so a batch is never
sampled more than max_staleness versions behind the weights that train on it (bounded staleness as in AReaL's
max_head_offpolicyness, enforced before generating rather than by discarding work). With max_staleness 0 one
batch is alive at a time: generate, update, generate — the synchronous schedule. Dropped groups (the buffer's
guard) free room for replacement batches, so the run cannot stall on them.

A ticket is leased to a generator until its groups reach the buffer; `release(generator)` (the generator died)
puts its leased tickets back, to be issued again with the same prompts and seed, so a batch is never lost and
the buffer's duplicate check stops it from being counted twice.

    tickets = Tickets(pool_sizes=[1000, 200], weights=[0.8, 0.2], seed=0, prompts_per_batch=8, max_staleness=1)
    ticket = tickets.issue(generator=0, version=3, dropped_groups=0)   # -> (b, [(set, index in pool)]) or None
    tickets.done(b)
"""

from __future__ import annotations

from openafm.errors import CheckpointError
from openafm.rl.run import PromptMixture

Ticket = tuple[int, list[tuple[int, int]]]          # (batch number, [(prompt set, index in its train pool)])


class Tickets:
    def __init__(self, *, pool_sizes: list[int], weights: list[float], seed: int, prompts_per_batch: int,
                 max_staleness: int):
        self.mixture = PromptMixture([list(range(n)) for n in pool_sizes], weights, seed)
        self.per_batch, self.max_staleness = prompts_per_batch, max_staleness
        self.next = 0                                  # the next new batch number
        self.leased: dict[int, tuple[int, list]] = {}  # batch -> (generator, prompts)
        self.returned: list[tuple[int, list]] = []     # (batch, prompts) put back by a dead generator

    def may_issue(self, version: int, dropped_groups: int) -> bool:
        live = self.next - dropped_groups // self.per_batch
        return bool(self.returned) or live + 1 <= version + self.max_staleness + 1

    def issue(self, *, generator: int, version: int, dropped_groups: int) -> Ticket | None:
        if self.returned:
            b, prompts = self.returned.pop(0)
        elif self.may_issue(version, dropped_groups):
            b, prompts = self.next, [(s, int(i)) for s, i in self.mixture.draw(self.next, self.per_batch)]
            self.next += 1
        else:
            return None
        self.leased[b] = (generator, prompts)
        return b, prompts

    def done(self, batch: int) -> None:
        self.leased.pop(batch, None)

    def release(self, generator: int) -> list[int]:
        """Put back the tickets leased to `generator` (it died). -> their batch numbers."""
        mine = sorted(b for b, (g, _) in self.leased.items() if g == generator)
        for b in mine:
            self.returned.append((b, self.leased.pop(b)[1]))
        self.returned.sort()
        return mine

    def state_dict(self) -> dict:
        """Leased tickets are saved as returned: after a restart they are issued again."""
        pending = sorted(self.returned + [(b, p) for b, (_, p) in self.leased.items()])
        return {"next": self.next, "mixture": self.mixture.state_dict(),
                "returned": [[b, [list(x) for x in p]] for b, p in pending]}

    def load_state_dict(self, state: dict) -> None:
        if set(state) != {"next", "mixture", "returned"}:
            raise CheckpointError(f"tickets state has keys {sorted(state)}; expected next, mixture, returned")
        self.next = state["next"]
        self.mixture.load_state_dict(state["mixture"])
        self.leased = {}
        self.returned = [(b, [tuple(x) for x in p]) for b, p in state["returned"]]
