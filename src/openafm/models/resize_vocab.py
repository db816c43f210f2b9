"""Grow a model's vocabulary after a tokenizer extension: old rows kept, new rows initialised as the mean
of the old rows of the tokens each new token stands for (its decomposition into old ids, see
`openafm.tokenizer.extend.VocabExtension.decompositions`).

The same rule applies to an untied output head (its rows are output embeddings). With tied embeddings
the head is the embedding matrix, so one resize covers both. The mean keeps a new token's input vector
where the model already represents its pieces, and its output logit near the pieces' logits.

    resize_embeddings(lm.model, ext.decompositions())     # vocab 49152 -> 49152 + ext.n_added
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from openafm.nn.linear import Linear


def resize_embeddings(model: nn.Module, decompositions: dict[int, list[int]]) -> int:
    """Append one row per new id to `model.embed` (and `model.lm_head` when untied); returns the new
    vocabulary size. New ids must be exactly old_size, old_size + 1, ...; each decomposes into old ids."""
    weight = model.embed.weight                                                    # [V_old, D]
    old_size, dim = weight.shape
    new_ids = sorted(decompositions)
    if new_ids != list(range(old_size, old_size + len(new_ids))):
        raise ValueError(f"new token ids must be {old_size}..{old_size + len(new_ids) - 1} (after the model's "
                         f"{old_size} rows); got {new_ids[:3]}...{new_ids[-3:]}")
    for token_id, parts in decompositions.items():
        if not parts or min(parts) < 0 or max(parts) >= old_size:
            raise ValueError(f"new token {token_id} decomposes into {parts}; need old ids in 0..{old_size - 1}")
    new_size = old_size + len(new_ids)
    model.embed = _grown_embedding(model.embed, new_ids, decompositions)
    if getattr(model, "lm_head", None) is not None:
        model.lm_head = _grown_head(model.lm_head, new_ids, decompositions)
    _set_vocab_size(model, new_size)
    return new_size


def mean_rows(weight: torch.Tensor, new_ids: list[int], decompositions: dict[int, list[int]]) -> torch.Tensor:
    """[N_new, D]: row i is the mean of weight[decompositions[new_ids[i]]] (repeated ids count repeatedly)."""
    parts = [decompositions[i] for i in new_ids]
    flat = torch.tensor([p for ps in parts for p in ps], device=weight.device)     # [sum of lengths]
    owner = torch.repeat_interleave(torch.arange(len(parts), device=weight.device),
                                    torch.tensor([len(ps) for ps in parts], device=weight.device))
    sums = torch.zeros(len(parts), weight.shape[1], dtype=torch.float32, device=weight.device)
    sums.index_add_(0, owner, weight[flat].float())                               # [N_new, D]
    counts = torch.tensor([len(ps) for ps in parts], dtype=torch.float32, device=weight.device)
    return (sums / counts[:, None]).to(weight.dtype)


def _grown_embedding(embed: nn.Embedding, new_ids: list[int], decompositions: dict[int, list[int]]) -> nn.Embedding:
    old = embed.weight.data                                                        # [V_old, D]
    grown = nn.Embedding(old.shape[0] + len(new_ids), old.shape[1], device=old.device, dtype=old.dtype)
    with torch.no_grad():
        grown.weight[: old.shape[0]] = old
        grown.weight[old.shape[0]:] = mean_rows(old, new_ids, decompositions)
    return grown


def _grown_head(head: nn.Linear, new_ids: list[int], decompositions: dict[int, list[int]]) -> nn.Linear:
    if head.bias is not None:
        raise ValueError("an output head with a bias is not supported (openafm heads have none)")
    old = head.weight.data                                                         # [V_old, D]
    grown = Linear(old.shape[1], old.shape[0] + len(new_ids), bias=False, device=old.device, dtype=old.dtype)
    with torch.no_grad():
        grown.weight[: old.shape[0]] = old
        grown.weight[old.shape[0]:] = mean_rows(old, new_ids, decompositions)
    return grown


def _set_vocab_size(model: nn.Module, size: int) -> None:
    """Keep the model's config (and a PT-MoE's per-track config and cached plan) in step with its rows."""
    config = getattr(model, "config", None)
    if config is None:
        return
    if hasattr(config, "track"):                                                   # PT-MoE: vocab is per track
        model.config = dataclasses.replace(config, track=dataclasses.replace(config.track, vocab_size=size))
        if hasattr(model, "_kv_plan"):
            model._kv_plan = dataclasses.replace(model._kv_plan, vocab_size=size)
    else:
        model.config = dataclasses.replace(config, vocab_size=size)
