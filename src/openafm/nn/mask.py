"""Attention masks from absolute positions, shared by every attention kind.

A key at position k is visible to a query at position q when 0 <= k <= q and, for a sliding layer of
window W, q - k < W (the query sees itself and the W - 1 positions before it). Padding has position -1.
"""

from __future__ import annotations

import torch


def visibility_mask(q_pos: torch.Tensor, k_pos: torch.Tensor, window: int | None) -> torch.Tensor:
    """q_pos [B, Tq], k_pos [B, S] -> bool mask [B, 1, Tq, S] (True = attend)."""
    q = q_pos[:, :, None]
    k = k_pos[:, None, :]
    allowed = (k >= 0) & (k <= q)
    if window is not None:
        allowed &= (q - k) < window
    # A padding query sees nothing; let it see everything so softmax stays finite (its output is never read).
    allowed |= (q < 0)
    return allowed[:, None]
