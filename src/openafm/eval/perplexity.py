"""Held-out perplexity of a causal LM over a token stream, in non-overlapping windows.

The stream is cut into windows of ``context`` tokens; inside each window every token after the first is
predicted from the ones before it. Windows do not overlap, so each token is scored once and a token at
the start of a window sees no earlier context: the figure is comparable between models evaluated with
the same ``context``, not with a sliding-window perplexity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F
from tqdm import tqdm


@dataclass(frozen=True)
class Perplexity:
    nll_sum: float      # summed negative log-likelihood, nats
    tokens: int         # predicted tokens

    @property
    def nll(self) -> float:
        return self.nll_sum / self.tokens

    @property
    def ppl(self) -> float:
        return math.exp(self.nll)


@torch.no_grad()
def perplexity(model: torch.nn.Module, token_ids: Sequence[int] | torch.Tensor, *, context: int = 512,
               batch_size: int = 4, max_tokens: int | None = None, progress: bool = False) -> Perplexity:
    """``model(ids [B, T]) -> logits [B, T, V]``; scores ``token_ids`` (truncated to ``max_tokens``)."""
    if context < 2:
        raise ValueError(f"context must be at least 2 tokens to predict anything, got {context}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    ids = torch.as_tensor(token_ids, dtype=torch.long).flatten()
    if max_tokens is not None:
        ids = ids[:max_tokens]
    n_windows = len(ids) // context
    if n_windows == 0:
        raise ValueError(f"need at least one full window of {context} tokens, got {len(ids)} tokens")
    windows = ids[: n_windows * context].view(n_windows, context)        # [N, T]
    starts = range(0, n_windows, batch_size)
    if progress:
        starts = tqdm(starts, desc="perplexity", unit="batch")
    nll_sum = sum(sum(window_nlls(model, windows[i:i + batch_size])) for i in starts)
    return Perplexity(nll_sum=nll_sum, tokens=n_windows * (context - 1))


@torch.no_grad()
def window_nlls(model: torch.nn.Module, windows: torch.Tensor) -> list[float]:
    """Summed NLL (nats) of tokens 1.. of each window [N, T], one forward for all N (each window scored alone)."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        batch = windows.to(device)                                            # [N, T]
        logits = model(batch).float()                                         # [N, T, V]
        loss = F.cross_entropy(logits[:, :-1].transpose(1, 2), batch[:, 1:], reduction="none")   # [N, T-1]
        return loss.sum(dim=1).tolist()
    finally:
        model.train(was_training)
