"""A KV cache that knows each layer's kind.

- global layers (RoPE or NoPE): a full buffer of `capacity` slots;
- sliding layers: a ring buffer of `window` slots (slot = time step mod window);
- layers that read another layer's cache: no storage at all.

Slots are indexed by the shared time step (the same for every row of the batch). The absolute position
held in each slot (-1 = empty or left padding) is kept once per group of layers that share a slot
layout (all full layers; all ring layers of one window), and masks are derived from it.

What a slot holds is the cache's `KVStorage` kind: the model's dtype (NATIVE), or int8 with one scale
per token and head (INT8: K and V quantized on write, dequantized to the model's dtype on read; readers
of a shared cache get the dequantized tensors like the owner).
"""

from __future__ import annotations

import enum

import torch

from openafm.errors import ContextWindowExceededError
from openafm.models.plan import AttentionKind, DecoderConfig, LayerSpec
from openafm.nn.kv import KeyLayout, LayerKV


class KVStorage(enum.Enum):
    NATIVE = "native"  # K/V stored in the cache dtype
    INT8 = "int8"      # int8 codes + one scale per (token, head): ~1/4 of fp32, ~1/2 of bf16


class DenseSlots:
    """Slots [B, Hkv, S, Dh] in the cache dtype."""

    def __init__(self, batch: int, heads: int, slots: int, head_dim: int, dtype, device):
        self.data = torch.zeros(batch, heads, slots, head_dim, dtype=dtype, device=device)

    @property
    def shape(self) -> torch.Size:
        return self.data.shape

    def set(self, idx, x: torch.Tensor) -> None:      # idx: slice or index tensor over slots; x [B, H, n, Dh]
        self.data[:, :, idx] = x

    def get(self, idx) -> torch.Tensor:               # -> [B, H, n, Dh]
        return self.data[:, :, idx]

    def copy_slots(self, other: "DenseSlots", src, dst) -> None:
        self.data[:, :, dst] = other.data[:, :, src]

    def nbytes(self) -> int:
        return self.data.nbytes


class Int8Slots:
    """Slots as int8 codes [B, Hkv, S, Dh] and a scale per token and head [B, Hkv, S, 1] (cache dtype):
    x ~ scale * code, scale = max|x| / 127 over the head dimension, so |error| <= scale / 2 per element."""

    def __init__(self, batch: int, heads: int, slots: int, head_dim: int, dtype, device):
        self.dtype = dtype
        self.codes = torch.zeros(batch, heads, slots, head_dim, dtype=torch.int8, device=device)
        self.scale = torch.zeros(batch, heads, slots, 1, dtype=dtype, device=device)

    @property
    def shape(self) -> torch.Size:
        return self.codes.shape

    def set(self, idx, x: torch.Tensor) -> None:
        codes, scale = quantize_int8(x)
        self.codes[:, :, idx] = codes
        self.scale[:, :, idx] = scale.to(self.dtype)

    def get(self, idx) -> torch.Tensor:
        return self.codes[:, :, idx].to(self.dtype) * self.scale[:, :, idx]

    def copy_slots(self, other: "Int8Slots", src, dst) -> None:
        self.codes[:, :, dst] = other.codes[:, :, src]
        self.scale[:, :, dst] = other.scale[:, :, src]

    def nbytes(self) -> int:
        return self.codes.nbytes + self.scale.nbytes


def quantize_int8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., Dh] -> (int8 codes [..., Dh], float32 scale [..., 1]) with x ~ scale * codes."""
    xf = x.float()
    scale = xf.abs().amax(-1, keepdim=True) / 127                            # [..., 1]
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    codes = torch.round(xf / safe).clamp_(-127, 127).to(torch.int8)
    return codes, scale


SLOTS = {KVStorage.NATIVE: DenseSlots, KVStorage.INT8: Int8Slots}


class FullLayerCache:
    def __init__(self, batch: int, heads: int, capacity: int, head_dim: int, dtype, device,
                 storage: KVStorage = KVStorage.NATIVE):
        self.k = SLOTS[storage](batch, heads, capacity, head_dim, dtype, device)
        self.v = SLOTS[storage](batch, heads, capacity, head_dim, dtype, device)

    def write(self, t0: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        t1 = t0 + k.shape[2]
        self.k.set(slice(t0, t1), k)
        self.v.set(slice(t0, t1), v)
        return self.k.get(slice(0, t1)), self.v.get(slice(0, t1))

    def nbytes(self) -> int:
        return self.k.nbytes() + self.v.nbytes()


class RingLayerCache:
    def __init__(self, batch: int, heads: int, window: int, head_dim: int, dtype, device,
                 storage: KVStorage = KVStorage.NATIVE):
        self.window = window
        self.k = SLOTS[storage](batch, heads, window, head_dim, dtype, device)
        self.v = SLOTS[storage](batch, heads, window, head_dim, dtype, device)

    def write(self, t0: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        w, t = self.window, k.shape[2]
        if t == 1:
            slot = t0 % w
            self.k.set(slice(slot, slot + 1), k)
            self.v.set(slice(slot, slot + 1), v)
            filled = min(t0 + 1, w)
            return self.k.get(slice(0, filled)), self.v.get(slice(0, filled))
        # Several new tokens attend to what the ring held before them plus each other (as stored).
        slots, keep = _ring_slots(t0, t, w, k.device)
        if t0 == 0 and keep == t:
            self.k.set(slots, k)
            self.v.set(slots, v)
            return self.k.get(slots), self.v.get(slots)
        filled = min(t0, w)
        before = (self.k.get(slice(0, filled)), self.v.get(slice(0, filled))) if t0 else None
        new_k, new_v = _as_stored(self.k, k), _as_stored(self.v, v)
        out = (new_k, new_v) if before is None else (torch.cat([before[0], new_k], 2), torch.cat([before[1], new_v], 2))
        self.k.set(slots, k[:, :, -keep:])
        self.v.set(slots, v[:, :, -keep:])
        return out

    def nbytes(self) -> int:
        return self.k.nbytes() + self.v.nbytes()


def _as_stored(slots, x: torch.Tensor) -> torch.Tensor:
    """x as the slots would return it after a round trip (itself for dense storage)."""
    if isinstance(slots, DenseSlots):
        return x
    codes, scale = quantize_int8(x)
    return codes.to(slots.dtype) * scale.to(slots.dtype)


def _ring_slots(t0: int, t: int, window: int, device) -> tuple[torch.Tensor, int]:
    """Slots receiving the last min(t, window) of t steps written from step t0."""
    keep = min(t, window)
    return torch.arange(t0 + t - keep, t0 + t, device=device) % window, keep


class Sliding(enum.Enum):
    """How a sliding-window layer is stored."""

    RING = "ring"      # `window` slots, step mod window (memory of the window)
    FULL = "full"      # every step, keys masked by the window (a cache whose rows are copied elsewhere: the engine)


class KVCache:
    """Per-layer storage for one batch of sequences, up to `capacity` time steps."""

    def __init__(self, config: DecoderConfig, *, batch_size: int, capacity: int,
                 dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu",
                 storage: KVStorage = KVStorage.NATIVE, sliding: Sliding = Sliding.RING):
        if not isinstance(storage, KVStorage):
            raise ValueError(f"storage={storage!r} is not a KVStorage; use one of "
                             f"{[f'KVStorage.{k.name}' for k in KVStorage]}")
        if capacity > config.max_seq_len:
            raise ContextWindowExceededError(capacity, config.max_seq_len)
        self.config, self.capacity, self.batch_size = config, capacity, batch_size
        self.dtype, self.device, self.storage, self.sliding = dtype, torch.device(device), storage, Sliding(sliding)
        self.steps = 0           # time steps written so far (shared by all rows)
        self.padded = False      # whether any stored slot is left padding
        hkv, dh = config.n_kv_heads, config.attn_head_dim
        self.layers: list[FullLayerCache | RingLayerCache | None] = []
        self._pos: dict[int | None, torch.Tensor] = {}        # group (window or None) -> [B, slots]
        for spec in config.layers:
            if not spec.owns_kv:
                self.layers.append(None)
                continue
            window = self._group_of(spec)
            slots = capacity if window is None else window
            self._pos.setdefault(window, torch.full((batch_size, slots), -1, dtype=torch.long, device=device))
            cls = FullLayerCache if window is None else RingLayerCache
            self.layers.append(cls(batch_size, hkv, slots, dh, dtype, device, storage))
        self._visible: dict[int | None, tuple[torch.Tensor, KeyLayout]] = {}
        self._written: dict[int, LayerKV] = {}
        self._t = 0

    # --- the nn.kv store contract -------------------------------------------------------------
    def begin(self, positions: torch.Tensor) -> None:
        """Record the positions of the T new tokens ([B, T]) in every slot group."""
        t0, t = self.steps, positions.shape[1]
        if t0 + t > self.capacity:
            raise ContextWindowExceededError(t0 + t, self.capacity)
        self._t = t
        for window, pos in self._pos.items():
            if window is None:
                pos[:, t0:t0 + t] = positions
                self._visible[window] = (pos[:, :t0 + t], KeyLayout.PREFIX)
            elif t == 1:
                pos[:, t0 % window] = positions[:, 0]
                layout = KeyLayout.PREFIX if t0 < window else KeyLayout.ALL_VISIBLE
                self._visible[window] = (pos[:, :min(t0 + 1, window)], layout)
            else:
                if t0 == 0:
                    self._visible[window] = (positions, KeyLayout.PREFIX)
                else:
                    before = pos[:, :min(t0, window)].clone()
                    self._visible[window] = (torch.cat([before, positions], 1), KeyLayout.ARBITRARY)
                slots, keep = _ring_slots(t0, t, window, positions.device)
                pos[:, slots] = positions[:, -keep:]

    def write(self, layer: int, spec: LayerSpec, k: torch.Tensor, v: torch.Tensor) -> LayerKV:
        k_all, v_all = self.layers[layer].write(self.steps, k, v)
        k_pos, layout = self._visible[self._group_of(spec)]
        kv = self._written[layer] = LayerKV(k_all, v_all, k_pos, layout)
        return kv

    def read(self, layer: int) -> LayerKV:
        return self._written[layer]

    def _group_of(self, spec: LayerSpec) -> int | None:
        """The slot group of an owner layer here: its ring's window, or None (stored whole)."""
        return _group(spec, self.capacity) if self.sliding is Sliding.RING else None

    def end(self, positions: torch.Tensor) -> None:
        self.steps += self._t
        self.padded = self.padded or bool((positions < 0).any())
        self._written.clear()
        self._visible.clear()

    # --- growth -------------------------------------------------------------------------------
    def grown(self, capacity: int) -> "KVCache":
        """A cache of a larger capacity holding the same steps (slots remapped: a sliding layer that was
        stored whole while shorter than its window becomes a ring buffer once the cache outgrows it)."""
        if capacity <= self.capacity:
            return self
        return self._moved(capacity)

    def copy(self) -> "KVCache":
        """An independent cache of the same capacity holding the same steps (for two requests to continue one
        prefix: a request continuing a cache may write into it)."""
        return self._moved(self.capacity)

    def _moved(self, capacity: int) -> "KVCache":
        new = KVCache(self.config, batch_size=self.batch_size, capacity=capacity,
                      dtype=self.dtype, device=self.device, storage=self.storage, sliding=self.sliding)
        new.steps, new.padded = self.steps, self.padded
        for old_layer, new_layer in zip(self.layers, new.layers):
            if old_layer is not None:
                src, dst = self._slots_of(old_layer), new._slots_of(new_layer)
                new_layer.k.copy_slots(old_layer.k, src, dst)
                new_layer.v.copy_slots(old_layer.v, src, dst)
        for window, pos in new._pos.items():
            old_window = window if window in self._pos else None
            src, dst = self._step_slots(old_window), new._step_slots(window)
            pos[:, dst] = self._pos[old_window][:, src]
        return new

    def _slots_of(self, layer) -> torch.Tensor:
        return self._step_slots(layer.window if isinstance(layer, RingLayerCache) else None)

    def _step_slots(self, window: int | None) -> torch.Tensor:
        """Slots holding the steps this layout keeps, in step order (the last `window` for a ring)."""
        first = 0 if window is None else max(0, self.steps - window)
        steps = torch.arange(first, self.steps)
        return steps if window is None else steps % window

    # --- rewinding -----------------------------------------------------------------------------
    def can_rewind(self, steps: int) -> bool:
        """Whether the first `steps` steps are still all held: always for full layers; for a ring of window w
        only if no step was written past slot w (a later step overwrites the slot of the step w before it)."""
        if not 0 <= steps <= self.steps:
            return False
        return steps == self.steps or all(self.steps <= w for w in self._pos if w is not None)

    def rewind(self, steps: int) -> None:
        """Forget every step from `steps` on: the next forward pass writes step `steps`."""
        if not 0 <= steps <= self.steps:
            raise ValueError(f"cannot rewind a cache of {self.steps} steps to {steps}: use 0 <= steps <= {self.steps}")
        if not self.can_rewind(steps):
            windows = sorted(w for w in self._pos if w is not None)
            raise ValueError(f"cannot rewind a cache of {self.steps} steps to {steps}: its sliding-window rings "
                             f"(windows {windows}) have wrapped over the steps before {steps}; rebuild it instead")
        self.steps = steps

    # --- the fused decode step's view -------------------------------------------------------------
    def layer_storage(self, layer: int) -> tuple | None:
        """An owner layer's storage as (k, v, k_scale, v_scale, positions [B, slots], ring window or 0);
        k and v are [B, Hkv, slots, Dh] (the cache dtype, or int8 codes with scales [B, Hkv, slots, 1]).
        None for a layer that reads another layer's cache."""
        cache = self.layers[layer]
        if cache is None:
            return None
        ring = cache.window if isinstance(cache, RingLayerCache) else 0
        pos = self._pos[ring or None]
        if isinstance(cache.k, Int8Slots):
            return cache.k.codes, cache.v.codes, cache.k.scale, cache.v.scale, pos, ring
        return cache.k.data, cache.v.data, None, None, pos, ring

    # --- bookkeeping --------------------------------------------------------------------------
    @property
    def next_position(self) -> int:
        """The next position of an unpadded batch (every row at the same position)."""
        return self.steps

    def nbytes(self) -> int:
        """Bytes held by K/V storage (the per-group position bookkeeping is excluded)."""
        return sum(layer.nbytes() for layer in self.layers if layer is not None)


def _group(spec: LayerSpec, capacity: int) -> int | None:
    """The slot group of an owner layer: None for full layers, the window for ring layers. A window at
    least as long as the whole cache never wraps, so such a layer is stored as a full layer."""
    if spec.attention is AttentionKind.SLIDING_ROPE and spec.window < capacity:
        return spec.window
    return None
