"""The row cache keeps every row's K/V and positions through splices, steps, compaction, growth, moves and
shrinking: checked against a plain per-row record of what was written (no model needed)."""

from __future__ import annotations

import pytest
import torch
from tiny import make_tiny

from openafm.runtime.kv_cache import KVCache, Sliding
from openafm.runtime.row_cache import RowCache, RowCacheUnsupported


@pytest.fixture(scope="module")
def config():
    return make_tiny("smollm2-tiny").kv_plan


def prefilled(config, length: int, seed: int) -> tuple[KVCache, dict]:
    """A single-row cache holding `length` random steps, and what it holds per owner layer ([Hkv, length, Dh])."""
    cache = KVCache(config, batch_size=1, capacity=length)
    g = torch.Generator().manual_seed(seed)
    held = {}
    for i in range(len(config.layers)):
        storage = cache.layer_storage(i)
        if storage is None:
            continue
        k, v, *_, pos, _ = storage
        k.copy_(torch.randn(k.shape, generator=g))
        v.copy_(torch.randn(v.shape, generator=g))
        pos[0, :length] = torch.arange(length)
        held[i] = (k[0].clone(), v[0].clone())
    cache.steps = length
    return cache, held


def check(rc: RowCache, rows: list[dict]) -> None:
    """Row r holds exactly rows[r]'s K/V, right-aligned at the shared step, with positions 0..len-1."""
    for r, held in enumerate(rows):
        length = next(iter(held.values()))[0].shape[1]
        assert rc.lengths[r] == length
        live = slice(rc.steps - length, rc.steps)
        assert torch.equal(rc.pos[r, live], torch.arange(length))
        assert bool((rc.pos[r, :rc.steps - length] == -1).all()) and bool((rc.pos[r, rc.steps:] == -1).all())
        for i, (k, v) in held.items():
            assert torch.equal(rc.t[i][0][r, :, live], k) and torch.equal(rc.t[i][1][r, :, live], v)


def step(rc: RowCache, rows: list[dict], seed: int) -> None:
    """One decode step over rows [0, n) through the view (as the model's forward writes), recorded in `rows`."""
    n = len(rows)
    rc.reserve(n)
    view = rc.view(n)
    positions = torch.tensor([[rc.lengths[r]] for r in range(n)])
    view.begin(positions)
    g = torch.Generator().manual_seed(seed)
    for i in rc.owners:
        k = torch.randn(n, rc.config.n_kv_heads, 1, rc.config.attn_head_dim, generator=g)
        v = torch.randn(k.shape, generator=g)
        kv = view.write(i, None, k, v)
        assert torch.equal(kv.k_pos[:, -1:], positions)
        for r in range(n):
            old_k, old_v = rows[r][i]
            rows[r][i] = (torch.cat([old_k, k[r]], 1), torch.cat([old_v, v[r]], 1))
    view.end(positions)


def test_rows_survive_splices_steps_compaction_growth_moves_and_shrinking(config):
    rc = RowCache(config, rows=3, capacity=8, max_capacity=128)
    caches = [prefilled(config, n, seed) for seed, n in enumerate((5, 12, 3))]
    rows = []
    for r, (cache, held) in enumerate(caches):
        rc.splice(r, cache, cache.steps)                     # the 12-token prompt realigns and grows the cache
        rows.append(dict(held))
        check(rc, rows)
    assert rc.capacity >= 12
    for s in range(40):                                      # compaction and growth under the rows
        step(rc, rows, 100 + s)
        check(rc, rows)
    grown = rc.capacity
    assert grown > 40
    rc.release(0)                                            # the first row leaves; the last moves into its slot
    rc.move(2, 0)
    rows = [rows[2], rows[1]]
    rc.release(1)                                            # the longest leaves too
    rows = rows[:1]
    check(rc, rows)
    for s in range(200):
        step(rc, rows, 500 + s)
        if len(rows[0][rc.owners[0]][0][0]) > 60:            # restart the row with a short prompt
            rc.release(0)
            cache, held = prefilled(config, 4, 900 + s)
            rc.splice(0, cache, 4)
            rows = [dict(held)]
        check(rc, rows)
    assert rc.capacity < grown                               # the long rows are gone: memory given back


def test_sliding_layers_are_held_whole_and_ring_caches_cannot_be_spliced():
    plan = make_tiny("afm-server-dense-tiny").kv_plan                 # 3 sliding (window 16) + 1 global NoPE
    rc = RowCache(plan, rows=2, capacity=8, max_capacity=64)          # windows shorter than the context: whole
    ring = KVCache(plan, batch_size=1, capacity=32)                   # rings of 16 slots
    with pytest.raises(RowCacheUnsupported, match=r"sliding-window layers are stored whole \(KVCache\(sliding"):
        rc.splice(0, ring, 20)
    whole = KVCache(plan, batch_size=1, capacity=32, sliding=Sliding.FULL)
    assert all(s is None or s[5] == 0 for s in (whole.layer_storage(i) for i in range(plan.n_layers)))
