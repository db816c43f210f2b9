"""The contract between attention layers and whatever holds their keys and values.

A forward pass calls `begin(positions)` once, then each owner layer `write`s the K/V of the new tokens
and gets back the keys it must attend to (cached plus new) with their positions; a reader layer (no K/V
projections) `read`s what its source layer got back; `end()` closes the pass. `FreshKV` is the store
of a cache-free forward (training, scoring); the runtime's `KVCache` keeps K/V across calls.
"""

from __future__ import annotations

import dataclasses
import enum

import torch

from openafm.nn.layer_spec import LayerSpec


class KeyLayout(enum.Enum):
    PREFIX = "prefix"            # keys are positions 0..S-1 in order; the queries are the last Tq of them
    ALL_VISIBLE = "all-visible"  # a single query that may see every key returned (a full sliding ring)
    ARBITRARY = "arbitrary"      # anything else: an explicit mask from positions is needed


@dataclasses.dataclass
class LayerKV:
    k: torch.Tensor      # [B, Hkv, S, Dh]
    v: torch.Tensor      # [B, Hkv, S, Dh]
    k_pos: torch.Tensor  # [B, S] absolute positions, -1 = empty or padding
    layout: KeyLayout


class FreshKV:
    """K/V of one cache-free forward pass: each owner's fresh K/V, kept for the layers that read them."""

    padded = False

    def __init__(self) -> None:
        self._by_layer: dict[int, LayerKV] = {}
        self._positions: torch.Tensor | None = None

    def begin(self, positions: torch.Tensor) -> None:
        self._positions = positions

    def write(self, layer: int, spec: LayerSpec, k: torch.Tensor, v: torch.Tensor) -> LayerKV:
        kv = LayerKV(k, v, self._positions, KeyLayout.PREFIX)
        self._by_layer[layer] = kv
        return kv

    def read(self, layer: int) -> LayerKV:
        return self._by_layer[layer]

    def end(self, positions: torch.Tensor) -> None:
        self._by_layer.clear()
