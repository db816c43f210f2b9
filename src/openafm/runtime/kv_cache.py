"""A KV cache that knows each layer's kind.

- global layers (RoPE or NoPE): a full buffer of `capacity` slots;
- sliding layers: a ring buffer of `window` slots (slot = time step mod window);
- layers that read another layer's cache: no storage at all.

Slots are indexed by the shared time step (the same for every row of the batch). The absolute position
held in each slot (-1 = empty or left padding) is kept once per group of layers that share a slot
layout (all full layers; all ring layers of one window), and masks are derived from it.
"""

from __future__ import annotations

import torch

from openafm.errors import ContextWindowExceededError
from openafm.models.plan import AttentionKind, DecoderConfig, LayerSpec
from openafm.nn.kv import KeyLayout, LayerKV


class FullLayerCache:
    def __init__(self, batch: int, heads: int, capacity: int, head_dim: int, dtype, device):
        self.k = torch.zeros(batch, heads, capacity, head_dim, dtype=dtype, device=device)
        self.v = torch.zeros_like(self.k)

    def write(self, t0: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        t1 = t0 + k.shape[2]
        self.k[:, :, t0:t1] = k
        self.v[:, :, t0:t1] = v
        return self.k[:, :, :t1], self.v[:, :, :t1]

    def nbytes(self) -> int:
        return self.k.nbytes + self.v.nbytes


class RingLayerCache:
    def __init__(self, batch: int, heads: int, window: int, head_dim: int, dtype, device):
        self.window = window
        self.k = torch.zeros(batch, heads, window, head_dim, dtype=dtype, device=device)
        self.v = torch.zeros_like(self.k)

    def write(self, t0: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        w, t = self.window, k.shape[2]
        if t == 1:
            self.k[:, :, t0 % w] = k[:, :, 0]
            self.v[:, :, t0 % w] = v[:, :, 0]
            filled = min(t0 + 1, w)
            return self.k[:, :, :filled], self.v[:, :, :filled]
        # Several new tokens attend to what the ring held before them plus each other.
        if t0 == 0:
            out = (k, v)
        else:
            filled = min(t0, w)
            out = (torch.cat([self.k[:, :, :filled], k], 2), torch.cat([self.v[:, :, :filled], v], 2))
        slots, keep = _ring_slots(t0, t, w, k.device)
        self.k[:, :, slots] = k[:, :, -keep:]
        self.v[:, :, slots] = v[:, :, -keep:]
        return out

    def nbytes(self) -> int:
        return self.k.nbytes + self.v.nbytes


def _ring_slots(t0: int, t: int, window: int, device) -> tuple[torch.Tensor, int]:
    """Slots receiving the last min(t, window) of t steps written from step t0."""
    keep = min(t, window)
    return torch.arange(t0 + t - keep, t0 + t, device=device) % window, keep


class KVCache:
    """Per-layer storage for one batch of sequences, up to `capacity` time steps."""

    def __init__(self, config: DecoderConfig, *, batch_size: int, capacity: int,
                 dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu"):
        if capacity > config.max_seq_len:
            raise ContextWindowExceededError(capacity, config.max_seq_len)
        self.config, self.capacity, self.batch_size = config, capacity, batch_size
        self.steps = 0           # time steps written so far (shared by all rows)
        self.padded = False      # whether any stored slot is left padding
        hkv, dh = config.n_kv_heads, config.attn_head_dim
        self.layers: list[FullLayerCache | RingLayerCache | None] = []
        self._pos: dict[int | None, torch.Tensor] = {}        # group (window or None) -> [B, slots]
        for spec in config.layers:
            if not spec.owns_kv:
                self.layers.append(None)
                continue
            window = _group(spec, capacity)
            slots = capacity if window is None else window
            self._pos.setdefault(window, torch.full((batch_size, slots), -1, dtype=torch.long, device=device))
            cls = FullLayerCache if window is None else RingLayerCache
            self.layers.append(cls(batch_size, hkv, slots, dh, dtype, device))
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
        k_pos, layout = self._visible[_group(spec, self.capacity)]
        kv = self._written[layer] = LayerKV(k_all, v_all, k_pos, layout)
        return kv

    def read(self, layer: int) -> LayerKV:
        return self._written[layer]

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
        new = KVCache(self.config, batch_size=self.batch_size, capacity=capacity,
                      dtype=self._dtype(), device=self._device())
        new.steps, new.padded = self.steps, self.padded
        for old_layer, new_layer in zip(self.layers, new.layers):
            if old_layer is not None:
                src, dst = self._slots_of(old_layer), new._slots_of(new_layer)
                new_layer.k[:, :, dst] = old_layer.k[:, :, src]
                new_layer.v[:, :, dst] = old_layer.v[:, :, src]
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

    def _dtype(self) -> torch.dtype:
        return next(layer.k.dtype for layer in self.layers if layer is not None)

    def _device(self) -> torch.device:
        return next(layer.k.device for layer in self.layers if layer is not None)

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
