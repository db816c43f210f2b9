"""The prefix cache: recent prompts' K/V, so a prompt that shares a prefix with one of them prefills only the rest.

A shared system prompt (or a conversation's earlier turns) is prefilled once; a later prompt starts from a copy
of the longest prefix it shares with a remembered prompt (at least ``min_prefix`` tokens; its last token is always
run, since its logits choose the first new token). The most recently used prompts are kept (LRU), at most
``size`` of them holding at most ``max_bytes`` of K/V together: a server whose clients cycle through more distinct
prompts than a handful (16 clients, 16 system prompts) still finds them, and a few long prompts cannot hold memory
without bound. A prompt larger than the whole budget is not kept.
"""

from __future__ import annotations

import collections

import torch

from openafm.models.plan import DecoderConfig
from openafm.runtime.kv_cache import KVCache, KVStorage, Sliding


class PrefixCache:
    def __init__(self, plan: DecoderConfig, *, size: int, min_prefix: int, dtype: torch.dtype, device: torch.device,
                 storage: KVStorage = KVStorage.NATIVE, max_bytes: int | None = None):
        self.plan, self.size, self.min_prefix, self.dtype, self.device = plan, size, min_prefix, dtype, device
        self.storage, self.max_bytes = storage, max_bytes
        self._entries: collections.OrderedDict[tuple[int, ...], KVCache] = collections.OrderedDict()

    def start(self, prompt: list[int]) -> tuple[KVCache, int]:
        """A single-row cache for ``prompt`` holding the longest reusable prefix; -> (cache, tokens held)."""
        cache = KVCache(self.plan, batch_size=1, capacity=len(prompt), dtype=self.dtype, device=self.device,
                        sliding=Sliding.FULL, storage=self.storage)     # spliced into the row cache as is
        best, best_len = None, 0
        for key, entry in self._entries.items():
            n = common_prefix(key, prompt)
            if n > best_len:
                best, best_len = (key, entry), n
        held = min(best_len, len(prompt) - 1)                     # the last prompt token is always run
        if best is None or held < self.min_prefix:
            return cache, 0
        self._entries.move_to_end(best[0])
        for i in range(len(self.plan.layers)):
            src, dst = best[1].layer_storage(i), cache.layer_storage(i)
            if src is None:
                continue
            for j in (0, 1, 2, 3):                                 # k, v (and int8 scales)
                if src[j] is not None:
                    dst[j][:, :, :held] = src[j][:, :, :held]
            dst[4][:, :held] = src[4][:, :held]
        cache.steps = held
        return cache, held

    def remember(self, prompt: list[int], cache: KVCache) -> None:
        if not self.size or (self.max_bytes is not None and cache.nbytes() > self.max_bytes):
            return
        self._entries[tuple(prompt)] = cache
        self._entries.move_to_end(tuple(prompt))
        while len(self._entries) > self.size or (self.max_bytes is not None and self.nbytes() > self.max_bytes):
            self._entries.popitem(last=False)

    def clear(self) -> None:
        """Forget every remembered prompt."""
        self._entries.clear()

    def nbytes(self) -> int:
        """K/V bytes the remembered prompts hold."""
        return sum(entry.nbytes() for entry in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)


def common_prefix(a, b) -> int:
    """How many leading items ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
