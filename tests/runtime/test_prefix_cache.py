"""The prefix cache keeps the most recently used prompts within a count and a byte budget (LRU), never one larger
than the whole budget, and a new prompt starts from the longest prefix it shares with one kept."""

from __future__ import annotations

import torch

from openafm.runtime.kv_cache import KVCache, Sliding
from openafm.runtime.prefix_cache import PrefixCache
from tiny import make_tiny


def _cache(plan, tokens: int) -> KVCache:
    return KVCache(plan, batch_size=1, capacity=tokens, dtype=torch.float32, device=torch.device("cpu"),
                   sliding=Sliding.FULL)


def test_the_byte_budget_evicts_the_least_recently_used_prompts():
    plan = make_tiny("smollm2-tiny").kv_plan
    per_token = _cache(plan, 10).nbytes() // 10
    prefixes = PrefixCache(plan, size=64, min_prefix=2, dtype=torch.float32, device=torch.device("cpu"),
                           max_bytes=25 * per_token)
    for first in (1, 2, 3):                                  # three 10-token prompts: the third evicts the first
        prefixes.remember([first] * 10, _cache(plan, 10))
    assert len(prefixes) == 2 and prefixes.nbytes() <= 25 * per_token
    assert prefixes.start([1] * 10 + [7])[1] == 0             # evicted: nothing reused
    assert prefixes.start([3] * 10 + [7])[1] == 10            # kept: its 10 tokens reused
    prefixes.remember([9] * 30, _cache(plan, 30))             # larger than the whole budget: not kept
    assert len(prefixes) == 2 and prefixes.start([9] * 31)[1] == 0


def test_the_count_bounds_it_too():
    plan = make_tiny("smollm2-tiny").kv_plan
    prefixes = PrefixCache(plan, size=2, min_prefix=2, dtype=torch.float32, device=torch.device("cpu"),
                           max_bytes=None)
    for first in (1, 2, 3):
        prefixes.remember([first] * 4, _cache(plan, 4))
    assert len(prefixes) == 2 and prefixes.start([1] * 5)[1] == 0 and prefixes.start([2] * 5)[1] == 4
