"""Activation checkpointing per block: each block keeps only its input in the forward pass and is run again
in the backward pass to rebuild what its gradients need (memory O(layers) hidden states instead of every
intermediate), at the cost of a second forward of each block.

KV-sharing layers read K/V that an earlier layer wrote to the forward's K/V store, and the store normally
forgets them when the forward ends. Under checkpointing a reader block is recomputed after that, so the
model's forward gets a `RetainedKV` store that keeps them until the step's graph is freed.
"""

from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint

from openafm.models.decoder import Block
from openafm.nn.kv import FreshKV


class RetainedKV(FreshKV):
    """The cache-free store of one training forward, kept past the forward for recomputed blocks."""

    next_position = 0

    def end(self, positions: torch.Tensor) -> None:
        pass


def apply_activation_checkpointing(model: torch.nn.Module) -> int:
    """Checkpoint every `Block` of the model in place (parameter names unchanged). -> number of blocks."""
    blocks = [m for m in model.modules() if isinstance(m, Block)]
    if not blocks:
        raise TypeError(f"{type(model).__name__} has no openafm Block modules to checkpoint")
    for block in blocks:
        block.forward = _checkpointed(block.forward)
    begin = model.begin

    def begin_with_retained_kv(input_ids, cache, positions, *args, **kwargs):
        return begin(input_ids, cache if cache is not None else RetainedKV(), positions, *args, **kwargs)
    model.begin = begin_with_retained_kv
    return len(blocks)


def _checkpointed(forward):
    def run(x, ctx):
        return checkpoint(forward, x, ctx, use_reentrant=False)
    return run
