"""What the trainer reads: batches of token ids with labels, positions and segment ids, from a loader whose
position in the data can be saved and restored (so a resumed run sees exactly the batches it would have).

The data pipeline (`openafm.data`) implements these; `openafm.train.synthetic` is a small in-memory one.
"""

from __future__ import annotations

from typing import Any, Iterator, Protocol, runtime_checkable

import torch

IGNORE_INDEX = -100  # a label that contributes no loss (padding, prompt tokens, document boundaries)


@runtime_checkable
class Batch(Protocol):
    input_ids: torch.Tensor    # [B, T] int64 token ids
    labels: torch.Tensor       # [B, T] int64 next-token targets, IGNORE_INDEX = no loss
    positions: torch.Tensor    # [B, T] int64 position of each token inside its document
    segment_ids: torch.Tensor  # [B, T] int64 document index inside the packed row (attention stays within one)


@runtime_checkable
class Loader(Protocol):
    def __iter__(self) -> Iterator[Batch]: ...

    def state_dict(self) -> dict[str, Any]:
        """JSON-able position in the data: after load_state_dict(s), iteration continues from there."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...
