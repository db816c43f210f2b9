"""Attention masks from absolute positions, shared by every attention kind.

A key at position k is visible to a query at position q when 0 <= k <= q and, for a sliding layer of
window W, q - k < W (the query sees itself and the W - 1 positions before it). Padding has position -1.

A packed training row holds several documents; `document_mask` keeps each token inside its own document
(same segment id, an earlier or the same slot of the row), with positions restarting per document.
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


def document_mask(segment_ids: torch.Tensor, positions: torch.Tensor, tq: int, window: int | None) -> torch.Tensor:
    """Mask of the last tq queries of packed rows over all S tokens of the rows.

    segment_ids [B, S] (which document of the row each token belongs to), positions [B, S] (restarting at
    each document) -> bool mask [B, 1, tq, S] (True = attend): the key is in the query's document, at or
    before the query's slot and, for a sliding layer, fewer than `window` positions back.
    """
    s = segment_ids.shape[1]
    q_slot = torch.arange(s - tq, s, device=segment_ids.device)[:, None]   # [tq, 1]
    k_slot = torch.arange(s, device=segment_ids.device)[None, :]           # [1, S]
    allowed = (k_slot <= q_slot)[None] & (segment_ids[:, -tq:, None] == segment_ids[:, None, :])  # [B, tq, S]
    if window is not None:
        allowed &= (positions[:, -tq:, None] - positions[:, None, :]) < window
    return allowed[:, None]
