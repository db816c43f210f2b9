"""A KV cache whose rows join and leave at different times: the continuous-batching engine's cache.

`runtime.kv_cache.KVCache` indexes slots by one time step shared by every row. Rows that start at different
times keep that rule here by being right-aligned: every live row's tokens occupy the slots just before the
shared step (`[steps - length, steps)`), each slot holding the row's own absolute position (-1 = empty), so
a row that joins late is what a left-padded row is to `KVCache`, and masks come from positions as everywhere
else. That layout is what the fused C++ decode step (runtime.fused_step) reads, so batched decode steps run
fused, with one query position per row.

- `splice(row, source)` copies a prefilled single-row `KVCache` (its first `length` steps) in front of the
  shared step; a prompt longer than the steps so far first moves every row right (`_realign`).
- `extract(row, below)` is the way back: the row's tokens of positions [0, below) as a single-row `KVCache`
  (a session's sequence goes on from it in its next request).
- `release(row)` forgets a row (its positions become -1); the engine keeps live rows packed at the front
  (`move` copies the last live row into a freed one), so a step over n rows reads rows [0, n).
- when the shared step reaches the capacity, every row is moved left to end at the longest live row
  (one slice copy: the rows are right-aligned), and the capacity doubles only if that is not enough (and
  halves back towards its initial size once the long rows have left).
- a step may write several slots per row (a speculative step: a row's next token and guesses, or padding);
  `forget` empties the slots of rejected guesses. Such holes are masked like padding (position -1) and counted in
  the row's length (its span) until the next compaction squeezes them out row by row.
- `view(n)` is the nn.kv store (begin/write/read/end) and fused-step view (`layer_storage`) over rows
  [0, n): contiguous slices of the same storage.

Storage is the model's floating dtype (KVStorage.NATIVE) or int8 codes with one scale per token and head
(KVStorage.INT8, as runtime.kv_cache): each owner layer's tensors (k, v, and for int8 their scales [R, Hkv, S, 1])
move together under every operation below. A
sliding-window layer is held like a full one, every step, its keys masked by the window (a ring, slot = step mod
window, would need its slots rotated when rows move): correct, with the memory of max_capacity, not of the window.
"""

from __future__ import annotations

import torch

from openafm.errors import ContextWindowExceededError
from openafm.models.plan import DecoderConfig
from openafm.nn.kv import KeyLayout, LayerKV
from openafm.runtime.kv_cache import KVCache, KVStorage, Sliding, quantize_int8


class RowCacheUnsupported(ValueError):
    """The model's plan or the cache's storage is one RowCache does not hold (the message says which)."""


class RowCache:
    def __init__(self, config: DecoderConfig, *, rows: int, capacity: int, max_capacity: int,
                 dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu",
                 storage: KVStorage = KVStorage.NATIVE):
        if not dtype.is_floating_point:
            raise RowCacheUnsupported(f"dtype={dtype}: the row cache holds floating-point K/V")
        if max_capacity > config.max_seq_len:
            raise ContextWindowExceededError(max_capacity, config.max_seq_len)
        self.config, self.rows, self.dtype, self.device = config, rows, dtype, torch.device(device)
        self.storage = KVStorage(storage)
        self.max_capacity = max_capacity
        self.owners = [i for i, spec in enumerate(config.layers) if spec.owns_kv]
        self.steps = 0
        self.lengths = [0] * rows                  # tokens held per row (0 = free)
        self.initial = min(capacity, max_capacity)
        self._alloc(self.initial)

    def _alloc(self, capacity: int) -> None:
        hkv, dh = self.config.n_kv_heads, self.config.attn_head_dim
        shape = (self.rows, hkv, capacity, dh)
        self.capacity = capacity
        if self.storage is KVStorage.NATIVE:          # per owner layer: [k, v] or [k, v, k_scale, v_scale]
            self.t = {i: [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in range(2)]
                      for i in self.owners}
        else:
            self.t = {i: [torch.zeros(shape, dtype=torch.int8, device=self.device) for _ in range(2)]
                      + [torch.zeros(*shape[:3], 1, dtype=self.dtype, device=self.device) for _ in range(2)]
                      for i in self.owners}
        self.pos = torch.full((self.rows, capacity), -1, dtype=torch.long, device=self.device)   # [R, S]
        self._token_bytes = sum(x[0, :, 0].nbytes for ts in self.t.values() for x in ts)
        self._views: dict[int, RowView] = {}

    # --- rows joining and leaving ---------------------------------------------------------------
    def check_source(self, source: KVCache) -> None:
        """Raise RowCacheUnsupported unless `source` is a cache `splice` takes."""
        if source.storage is not self.storage or source.batch_size != 1 or source.padded:
            raise RowCacheUnsupported(f"the row cache takes an unpadded single-row KVCache with {self.storage.value} "
                                      f"storage; got {source.batch_size} rows, storage {source.storage.value}, "
                                      f"padded={source.padded}")
        if source.sliding is not Sliding.FULL and any(w is not None for w in source._pos):
            raise RowCacheUnsupported("the row cache takes a cache whose sliding-window layers are stored whole "
                                      "(KVCache(sliding=Sliding.FULL)), not as rings")

    def splice(self, row: int, source: KVCache, length: int) -> None:
        """Copy the first `length` steps of a single-row cache (positions 0..length-1) into `row`."""
        self.check_source(source)
        if source.dtype != self.dtype:
            raise RowCacheUnsupported(f"a {source.dtype} cache cannot join a {self.dtype} row cache")
        if self.lengths[row]:
            raise ValueError(f"row {row} is in use ({self.lengths[row]} tokens); release it first")
        if length > self.steps:
            self._realign(length)
        t0 = self.steps - length
        for i in self.owners:
            for mine, theirs in zip(self.t[i], _tensors(source.layer_storage(i)), strict=True):   # [1, Hkv, S, *]
                mine[row, :, t0:self.steps] = theirs[0, :, :length]
        self.pos[row] = -1
        self.pos[row, t0:self.steps] = torch.arange(length, device=self.device)
        self.lengths[row] = length

    def extract(self, row: int, below: int) -> KVCache:
        """Row `row`'s K/V of positions [0, below) as a single-row KVCache (sliding layers stored whole)."""
        pos = self.pos[row, :self.steps]                                                      # [S]
        live = torch.nonzero((pos >= 0) & (pos < below)).flatten()                           # [below] slots
        if live.numel() != below:
            raise ValueError(f"row {row} holds {live.numel()} of the positions below {below}")
        out = KVCache(self.config, batch_size=1, capacity=max(1, below), dtype=self.dtype, device=self.device,
                      sliding=Sliding.FULL, storage=self.storage)
        for i in self.owners:
            for theirs, mine in zip(_tensors(out.layer_storage(i)), self.t[i], strict=True):  # [1, Hkv, S, *]
                theirs[0, :, :below] = mine[row, :, live]
        out.layer_storage(self.owners[0])[4][0, :below] = torch.arange(below, device=self.device)
        out.steps = below
        return out

    def release(self, row: int) -> None:
        self.pos[row] = -1
        self.lengths[row] = 0

    def move(self, src: int, dst: int) -> None:
        """Copy row `src` into the free row `dst` and free `src` (keeps live rows packed at the front).

        Only `src`'s span (the slots [steps - length, steps)) is copied: every other slot of `dst` is masked by its
        position (-1), whatever it holds. Copying whole rows (capacity slots of every layer) cost 1-2 ms alone, but
        right after a step, with the kernel pool's idle workers still spinning, each of those large copies
        (an OpenMP region per layer's tensor) waited for a core: 160-480 ms per move measured on 2 cores beside one
        CPU-bound process, most of a batch's wall time when rows finish one by one."""
        span = slice(self.steps - self.lengths[src], self.steps)
        for i in self.owners:
            for x in self.t[i]:
                x[dst, :, span] = x[src, :, span]
        self.pos[dst] = self.pos[src]
        self.lengths[dst], self.lengths[src] = self.lengths[src], 0
        self.pos[src] = -1

    def reserve(self, n: int, t: int = 1) -> None:
        """Make room for one step of ``t`` slots over rows [0, n): squeeze out holes and compact, or grow when
        that is not enough."""
        if self.steps + t <= self.capacity:
            return
        self._squeeze(n)
        longest = max(self.lengths[:n], default=0)
        if longest + t > self.max_capacity:
            raise ContextWindowExceededError(longest + t, self.max_capacity)
        if longest + t > self.capacity * 3 // 4:
            self._grow(min(self.max_capacity, max(2 * self.capacity, longest + t)))
        self._realign(longest)
        if self.capacity > self.initial and 4 * (longest + t) <= self.capacity:
            self._shrink(max(self.initial, 2 * (longest + t)))       # long rows have left: give the memory back

    def forget(self, row: int, start: int, stop: int) -> None:
        """Empty slots [start, stop) of ``row`` (a speculative step's rejected guesses): a hole, masked like
        padding, squeezed out at the next compaction."""
        self.pos[row, start:stop] = -1

    def _squeeze(self, n: int) -> None:
        """Move each of rows [0, n) that has holes so its tokens sit contiguously, right-aligned at the step."""
        for r in range(n):
            span = self.pos[r, self.steps - self.lengths[r]:self.steps]
            live = torch.nonzero(span >= 0).flatten() + (self.steps - self.lengths[r])          # [L] slot indices
            if live.numel() == self.lengths[r]:
                continue
            dst = slice(self.steps - live.numel(), self.steps)
            for i in self.owners:
                for x in self.t[i]:
                    x[r, :, dst] = x[r, :, live].clone()
            kept = self.pos[r, live].clone()
            self.pos[r] = -1
            self.pos[r, dst] = kept
            self.lengths[r] = live.numel()

    def _realign(self, steps: int) -> None:
        """Move every row so that it ends at `steps` (growing the storage when `steps` does not fit)."""
        if steps > self.capacity:
            self._grow(min(self.max_capacity, max(2 * self.capacity, steps)))
        keep = min(self.steps, steps)                         # the last `keep` slots hold every live row
        src, dst = slice(self.steps - keep, self.steps), slice(steps - keep, steps)
        for i in self.owners:
            for x in self.t[i]:
                x[:, :, dst] = x[:, :, src].clone()
        moved = self.pos[:, src].clone()
        self.pos.fill_(-1)
        self.pos[:, dst] = moved
        self.steps = steps

    def _grow(self, capacity: int) -> None:
        if capacity <= self.capacity:
            return
        old, old_pos, old_cap = self.t, self.pos, self.capacity
        self._alloc(capacity)
        for i in self.owners:
            for x, y in zip(self.t[i], old[i], strict=True):
                x[:, :, :old_cap] = y
        self.pos[:, :old_cap] = old_pos

    def _shrink(self, capacity: int) -> None:
        """Fewer slots, once the rows are realigned to end at `steps` <= capacity."""
        if capacity >= self.capacity or self.steps > capacity:
            return
        old, old_pos = self.t, self.pos
        self._alloc(capacity)
        for i in self.owners:
            for x, y in zip(self.t[i], old[i], strict=True):
                x[:, :, :self.steps] = y[:, :, :self.steps]
        self.pos[:, :self.steps] = old_pos[:, :self.steps]

    # --- the stores one forward pass writes through ----------------------------------------------
    def view(self, n: int) -> "RowView":
        """The store over rows [0, n) (kept per n, so the fused step binds it once until storage moves)."""
        if n not in self._views:
            self._views[n] = RowView(self, n)
        return self._views[n]

    def nbytes(self) -> int:
        return sum(x.nbytes for ts in self.t.values() for x in ts)

    def bytes_per_token(self) -> int:
        """K/V bytes one token of one row holds."""
        return self._token_bytes


class RowView:
    """The nn.kv store contract (and the fused step's `layer_storage`) over rows [0, n) of a RowCache."""

    padded = True               # rows sit at different positions: masks always come from positions

    def __init__(self, cache: RowCache, n: int):
        self.cache, self.n = cache, n
        self.dtype, self.device, self.config, self.storage = cache.dtype, cache.device, cache.config, cache.storage
        self._t = 0
        self._written: dict[int, LayerKV] = {}

    @property
    def steps(self) -> int:
        return self.cache.steps

    @property
    def capacity(self) -> int:
        return self.cache.capacity

    @property
    def next_position(self) -> int:
        raise ValueError("rows of a RowCache sit at different positions; pass positions= explicitly")

    def begin(self, positions: torch.Tensor) -> None:              # positions [n, T]
        c, t = self.cache, positions.shape[1]
        if c.steps + t > c.capacity:
            raise ContextWindowExceededError(c.steps + t, c.capacity)
        c.pos[:self.n, c.steps:c.steps + t] = positions
        self._t = t

    def write(self, layer: int, spec, k: torch.Tensor, v: torch.Tensor) -> LayerKV:   # k, v [n, Hkv, T, Dh]
        c, t1, n = self.cache, self.cache.steps + self._t, self.n
        ts = c.t[layer]
        if c.storage is KVStorage.NATIVE:
            ts[0][:n, :, c.steps:t1], ts[1][:n, :, c.steps:t1] = k, v
            k_all, v_all = ts[0][:n, :, :t1], ts[1][:n, :, :t1]
        else:                                      # int8: quantize on write, dequantize what attention reads
            (ts[0][:n, :, c.steps:t1], ts[2][:n, :, c.steps:t1]), (ts[1][:n, :, c.steps:t1], ts[3][:n, :, c.steps:t1]) \
                = quantize_int8(k), quantize_int8(v)
            k_all = ts[0][:n, :, :t1].to(c.dtype) * ts[2][:n, :, :t1]
            v_all = ts[1][:n, :, :t1].to(c.dtype) * ts[3][:n, :, :t1]
        kv = self._written[layer] = LayerKV(k_all, v_all, c.pos[:n, :t1], KeyLayout.ARBITRARY)
        return kv

    def read(self, layer: int) -> LayerKV:
        return self._written[layer]

    def end(self, positions: torch.Tensor) -> None:
        self.cache.steps += self._t
        for r in range(self.n):
            self.cache.lengths[r] += self._t
        self._written.clear()

    def layer_storage(self, layer: int) -> tuple | None:
        c = self.cache
        if layer not in c.t:
            return None
        ts = [x[:self.n] for x in c.t[layer]]
        k_scale, v_scale = (ts[2], ts[3]) if len(ts) == 4 else (None, None)
        return ts[0], ts[1], k_scale, v_scale, c.pos[:self.n], 0

    def nbytes(self) -> int:
        return self.cache.nbytes()


def _tensors(storage: tuple) -> list[torch.Tensor]:
    """A KVCache layer's storage tuple (k, v, k_scale, v_scale, positions, ring) -> [k, v] or [k, v, ks, vs], the
    order RowCache keeps."""
    k, v, ks, vs, _, _ = storage
    return [k, v] if ks is None else [k, v, ks, vs]
