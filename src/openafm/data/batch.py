"""One training batch of packed rows: what the loader yields and the trainer consumes."""

from __future__ import annotations

import dataclasses

import torch

IGNORE_INDEX = -100  # a label with no target (cross_entropy's ignore_index)


@dataclasses.dataclass(kw_only=True)
class Batch:
    """Packed rows of documents.

    input_ids   [B, T] long: token ids.
    labels      [B, T] long: the next token of the same document, IGNORE_INDEX (-100) where there is none
                (the token before a document's first token: that token cannot be predicted from inside the
                previous document).
    positions   [B, T] long: positions restarting at 0 where each document (or a row's first piece) begins.
    segment_ids [B, T] long: 0, 1, 2, ... numbering the documents inside each row (non-decreasing).

    Feed it as `model(batch.input_ids, positions=batch.positions, segment_ids=batch.segment_ids)`.
    """

    input_ids: torch.Tensor
    labels: torch.Tensor
    positions: torch.Tensor
    segment_ids: torch.Tensor

    def __post_init__(self) -> None:
        shape = tuple(self.input_ids.shape)
        if len(shape) != 2:
            raise ValueError(f"Batch.input_ids must be [B, T], got shape {shape}")
        for f in dataclasses.fields(self):
            t = getattr(self, f.name)
            if not isinstance(t, torch.Tensor) or tuple(t.shape) != shape or t.dtype != torch.long:
                got = f"{type(t).__name__} {tuple(t.shape)} {t.dtype}" if isinstance(t, torch.Tensor) else type(t).__name__
                raise ValueError(f"Batch.{f.name} must be a torch.long tensor of shape {shape}, got {got}")

    @property
    def n_targets(self) -> int:
        """Tokens that carry a loss target."""
        return int((self.labels != IGNORE_INDEX).sum())

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "Batch":
        return Batch(**{f.name: getattr(self, f.name).to(device, non_blocking=non_blocking)
                        for f in dataclasses.fields(self)})
