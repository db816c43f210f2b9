"""A KV cache that knows each layer's kind.

- global layers (RoPE or NoPE): a full buffer of `capacity` slots;
- sliding layers: a ring buffer of `window` slots (slot = time step mod window);
- layers that read another layer's cache: no storage at all.

Slots are indexed by the shared time step (the same for every row of the batch); each slot also keeps
the absolute position of what it holds per row (-1 = empty or left padding), from which masks follow.
"""

from __future__ import annotations

import torch

from openafm.errors import ContextWindowExceededError
from openafm.models.plan import AttentionKind, DecoderConfig
from openafm.nn.kv import KeyLayout, LayerKV


class FullLayerCache:
    def __init__(self, batch: int, heads: int, capacity: int, head_dim: int, dtype, device):
        self.k = torch.zeros(batch, heads, capacity, head_dim, dtype=dtype, device=device)
        self.v = torch.zeros_like(self.k)
        self.pos = torch.full((batch, capacity), -1, dtype=torch.long, device=device)

    def write(self, t0: int, k: torch.Tensor, v: torch.Tensor, k_pos: torch.Tensor) -> LayerKV:
        t1 = t0 + k.shape[2]
        self.k[:, :, t0:t1] = k
        self.v[:, :, t0:t1] = v
        self.pos[:, t0:t1] = k_pos
        return LayerKV(self.k[:, :, :t1], self.v[:, :, :t1], self.pos[:, :t1], KeyLayout.PREFIX)

    def nbytes(self) -> int:
        return self.k.nbytes + self.v.nbytes


class RingLayerCache:
    def __init__(self, batch: int, heads: int, window: int, head_dim: int, dtype, device):
        self.window = window
        self.k = torch.zeros(batch, heads, window, head_dim, dtype=dtype, device=device)
        self.v = torch.zeros_like(self.k)
        self.pos = torch.full((batch, window), -1, dtype=torch.long, device=device)

    def write(self, t0: int, k: torch.Tensor, v: torch.Tensor, k_pos: torch.Tensor) -> LayerKV:
        w, t = self.window, k.shape[2]
        if t == 1:
            slot = t0 % w
            self.k[:, :, slot] = k[:, :, 0]
            self.v[:, :, slot] = v[:, :, 0]
            self.pos[:, slot] = k_pos[:, 0]
            filled = min(t0 + 1, w)
            layout = KeyLayout.PREFIX if t0 < w else KeyLayout.ALL_VISIBLE
            return LayerKV(self.k[:, :, :filled], self.v[:, :, :filled], self.pos[:, :filled], layout)
        # Several new tokens: they attend to what the ring held before them plus each other.
        if t0 == 0:
            out = LayerKV(k, v, k_pos, KeyLayout.PREFIX)
        else:
            filled = min(t0, w)
            out = LayerKV(torch.cat([self.k[:, :, :filled], k], 2), torch.cat([self.v[:, :, :filled], v], 2),
                          torch.cat([self.pos[:, :filled], k_pos], 1), KeyLayout.ARBITRARY)
        keep = min(t, w)                                   # only the last `window` steps stay in the ring
        slots = torch.arange(t0 + t - keep, t0 + t, device=k.device) % w
        self.k[:, :, slots] = k[:, :, -keep:]
        self.v[:, :, slots] = v[:, :, -keep:]
        self.pos[:, slots] = k_pos[:, -keep:]
        return out

    def nbytes(self) -> int:
        return self.k.nbytes + self.v.nbytes


class KVCache:
    """Per-layer storage for one batch of sequences, up to `capacity` time steps."""

    def __init__(self, config: DecoderConfig, *, batch_size: int, capacity: int,
                 dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu"):
        if capacity > config.max_seq_len:
            raise ContextWindowExceededError(capacity, config.max_seq_len)
        self.config, self.capacity, self.batch_size = config, capacity, batch_size
        self.steps = 0           # time steps written so far (shared by all rows)
        self.padded = False      # whether any stored slot is left padding
        self._next_pos: torch.Tensor | None = None
        self.layers: list[FullLayerCache | RingLayerCache | None] = []
        hkv, dh = config.n_kv_heads, config.attn_head_dim
        for spec in config.layers:
            if not spec.owns_kv:
                self.layers.append(None)
            elif spec.attention is AttentionKind.SLIDING_ROPE:
                self.layers.append(RingLayerCache(batch_size, hkv, min(spec.window, capacity), dh, dtype, device))
            else:
                self.layers.append(FullLayerCache(batch_size, hkv, capacity, dh, dtype, device))
        self._written: dict[int, LayerKV] = {}

    # --- the nn.kv store contract -------------------------------------------------------------
    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor, k_pos: torch.Tensor) -> LayerKV:
        if self.steps + k.shape[2] > self.capacity:
            raise ContextWindowExceededError(self.steps + k.shape[2], self.capacity)
        kv = self.layers[layer].write(self.steps, k, v, k_pos)
        self._written[layer] = kv
        return kv

    def read(self, layer: int) -> LayerKV:
        return self._written[layer]

    # --- bookkeeping --------------------------------------------------------------------------
    @property
    def next_position(self) -> int:
        """The next position when no row is padded (all rows at the same position)."""
        return self.steps

    def next_positions(self) -> torch.Tensor:
        """[B] the next position of each row (rows of a left-padded batch differ)."""
        if self._next_pos is None:
            return torch.full((self.batch_size,), self.steps, dtype=torch.long)
        return self._next_pos

    def advance(self, positions: torch.Tensor) -> None:
        """Called by the decoder after a forward pass over `positions` [B, T]."""
        self.steps += positions.shape[1]
        self.padded = self.padded or bool((positions < 0).any())
        self._next_pos = positions.max(dim=1).values + 1
        self._written.clear()

    def nbytes(self) -> int:
        """Bytes held by K/V storage (position bookkeeping excluded)."""
        return sum(layer.nbytes() for layer in self.layers if layer is not None)
