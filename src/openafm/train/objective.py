"""What a training step minimises. An `Objective` maps (model, batch) -> (loss, metrics); the trainer owns
everything else (accumulation, distribution, clipping, logging). Pretraining, upcycling, distillation, QAT and
LoRA recovery differ only in the objective and the model they hand the trainer.

`weight(batch)` is the count the loss averages over (e.g. labelled tokens): the trainer weights micro-batches
and ranks by it, so the step's loss is the mean over every labelled token of the global batch, whatever the
split into micro-batches and ranks.
"""

from __future__ import annotations

import inspect
from typing import Protocol

import torch
from torch.nn import functional as F

from openafm.models.decoder import CausalLM, Logits
from openafm.train.batch_protocol import IGNORE_INDEX, Batch


class Objective(Protocol):
    def __call__(self, model: torch.nn.Module, batch: Batch) -> tuple[torch.Tensor, dict[str, float]]:
        """-> (scalar loss averaged over `weight(batch)` units, metrics averaged the same way)."""
        ...

    def weight(self, batch: Batch) -> int: ...


def forward_logits(model: torch.nn.Module, batch: Batch, **kwargs) -> torch.Tensor:
    """model(input_ids, positions=..., [segment_ids=...], **kwargs) -> logits [B, T, V]. segment_ids is passed
    only to a model whose forward accepts it (a model that does not attends across packed documents)."""
    kwargs["positions"] = batch.positions
    if accepts_segment_ids(model):
        kwargs["segment_ids"] = batch.segment_ids
    return model(batch.input_ids, **kwargs)


def accepts_segment_ids(model: torch.nn.Module) -> bool:
    inner = getattr(model, "module", model)   # DDP wraps the model in .module
    return "segment_ids" in inspect.signature(inner.forward).parameters


def labelled_tokens(batch: Batch) -> int:
    return int((batch.labels != IGNORE_INDEX).sum())


def at_least_fp32(x: torch.Tensor) -> torch.Tensor:
    """Half-precision logits (bf16 autocast) -> fp32 for the softmax; fp32 / fp64 as they are."""
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over labels != IGNORE_INDEX. logits [B, T, V], labels [B, T].
    A batch with no labelled token gives 0 (with a gradient path), not NaN."""
    flat = at_least_fp32(logits.flatten(0, 1))                                          # [B*T, V]
    total = F.cross_entropy(flat, labels.flatten(), ignore_index=IGNORE_INDEX, reduction="sum")
    return total / max(int((labels != IGNORE_INDEX).sum()), 1)


class LMObjective:
    """Language modelling: cross-entropy of the model's logits against the batch's labels. On an openafm decoder
    (not wrapped for distribution) the output head runs only where a label is: an SFT row labels its assistant
    tokens only (~20% of a tool-use row), and the head and softmax over 49k words are a fifth of the step."""

    def __call__(self, model, batch):
        if isinstance(model, CausalLM):
            keep = batch.labels != IGNORE_INDEX                                 # [B, T]
            hidden = forward_logits(model, batch, logits=Logits.HIDDEN)         # [B, T, D]
            loss = cross_entropy(model.head(hidden[keep])[None], batch.labels[keep][None])    # logits [1, N, V]
        else:
            loss = cross_entropy(forward_logits(model, batch), batch.labels)    # logits [B, T, V]
        return loss, {"ce": float(loss.detach())}

    def weight(self, batch) -> int:
        return labelled_tokens(batch)
