"""What the engine tests collect: one request's RowEvents, its tokens and text, and a wait for its last event."""

from __future__ import annotations

import threading


class Collector:
    """Records one request's events; `wait()` until its last."""

    def __init__(self):
        self.events, self.done = [], threading.Event()

    def __call__(self, e):
        self.events.append(e)
        if e.finish is not None:
            self.done.set()

    @property
    def tokens(self) -> list[int]:
        return [e.token_id for e in self.events if e.token_id >= 0 and e.finish != "eos"]

    @property
    def text(self) -> str:
        return "".join(e.text for e in self.events)

    def wait(self, timeout: float = 120) -> "Collector":
        assert self.done.wait(timeout), "the request did not finish"
        return self
