"""Cancelling a generation from another thread: a `CancelToken` the generation checks between forward passes.

The caller (an event loop, a server) owns the token and may `cancel()` it from any thread. `generate_tokens`
checks it before the prefill and before every decode step, and raises `GenerationCancelled` there, so a
cancelled generation runs no further forward pass and the KV cache it ran on holds only whole steps
(a `Conversation` can rewind it). Work that waits on something else (a tool call) registers an
`on_cancel` callback to be interrupted too.
"""

from __future__ import annotations

import threading
from typing import Callable

from openafm.errors import OpenAFMError


class GenerationCancelled(OpenAFMError):
    """The generation's CancelToken was cancelled; it stopped before its next forward pass."""

    def __init__(self, where: str):
        self.where = where
        super().__init__(f"generation cancelled {where}")


class CancelToken:
    """A one-way flag: not cancelled, then cancelled for good. Thread-safe."""

    def __init__(self):
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self) -> None:
        """Cancel (idempotent); runs the registered callbacks once, in this thread."""
        with self._lock:
            if self._event.is_set():
                return
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn()

    def raise_if_cancelled(self, where: str) -> None:
        """Raise GenerationCancelled (saying `where`, e.g. "before decode step 3") once cancelled."""
        if self._event.is_set():
            raise GenerationCancelled(where)

    def on_cancel(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Call fn when the token is cancelled (at once if it already is); returns a function that
        unregisters it."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(fn)
                return lambda: self._forget(fn)
        fn()
        return lambda: None

    def _forget(self, fn: Callable[[], None]) -> None:
        with self._lock:
            if fn in self._callbacks:
                self._callbacks.remove(fn)
