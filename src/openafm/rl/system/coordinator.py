"""The coordinator: the replay buffer and the tickets in one place (one Ray actor), so that handing out a batch,
receiving its groups and handing groups to the updater are each one atomic call, and their joint state is one
snapshot the policy updater saves in its checkpoint.

    coordinator = Coordinator(buffer, tickets)
    ticket = coordinator.issue(generator=0, version=3)      # tickets.py's gate, counting the buffer's drops
    coordinator.put(ticket[0], groups)                      # stored and the ticket closed, together
    groups = coordinator.take(8, version=4)                 # None while too few
"""

from __future__ import annotations

from openafm.errors import CheckpointError
from openafm.rl.system.buffer import ReplayBuffer, TrajectoryGroup
from openafm.rl.system.tickets import Ticket, Tickets


class Coordinator:
    def __init__(self, buffer: ReplayBuffer, tickets: Tickets | None = None):
        """tickets may come later (attach_tickets: their pool sizes are known once a policy actor has loaded)."""
        self.buffer, self.tickets = buffer, tickets

    def attach_tickets(self, tickets: Tickets) -> None:
        self.tickets = tickets

    def issue(self, *, generator: int, version: int) -> Ticket | None:
        lost = self.buffer.stats.stale_dropped + self.buffer.stats.evicted
        return self.tickets.issue(generator=generator, version=version, dropped_groups=lost)

    def put(self, batch: int, groups: list[TrajectoryGroup]) -> int:
        if any(g.ticket != batch for g in groups):
            raise ValueError(f"groups of batches {sorted({g.ticket for g in groups})} put as batch {batch}")
        accepted = self.buffer.put(groups)
        self.tickets.done(batch)
        return accepted

    def take(self, n: int, version: int) -> list[TrajectoryGroup] | None:
        return self.buffer.take(n, version)

    def release(self, generator: int) -> list[int]:
        return self.tickets.release(generator)

    def summary(self) -> dict:
        return {**self.buffer.summary(), "batches_issued": self.tickets.next, "batches_leased": len(self.tickets.leased)}

    def state_dict(self) -> dict:
        return {"buffer": self.buffer.state_dict(), "tickets": self.tickets.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        if set(state) != {"buffer", "tickets"}:
            raise CheckpointError(f"coordinator state has keys {sorted(state)}; expected buffer and tickets (a "
                                  f"checkpoint of a synchronous `openafm rl` run cannot resume with --async)")
        self.buffer.load_state_dict(state["buffer"])
        self.tickets.load_state_dict(state["tickets"])
