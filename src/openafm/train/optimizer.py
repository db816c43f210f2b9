"""AdamW with two parameter groups — weight decay on weight matrices, none on norms, embeddings and biases —
and the global gradient norm / clipping step."""

from __future__ import annotations

import math

import torch

from openafm.train.config import OptimizerConfig


def param_groups(model: torch.nn.Module, config: OptimizerConfig) -> list[dict]:
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        skip = p.ndim < 2 or any(s in name for s in config.no_decay)
        (no_decay if skip else decay).append(p)
    groups = [{"params": decay, "weight_decay": config.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return [g for g in groups if g["params"]]


def build_optimizer(model: torch.nn.Module, config: OptimizerConfig) -> torch.optim.AdamW:
    groups = param_groups(model, config)
    if not groups:
        raise ValueError("the model has no trainable parameters (every parameter has requires_grad=False)")
    return torch.optim.AdamW(groups, lr=config.lr, betas=tuple(config.betas), eps=config.eps)


def clip_gradients(parameters, max_norm: float | None) -> float:
    """Global L2 norm of the gradients before clipping; scales them to max_norm if above (None: no clip)."""
    params = [p for p in parameters if p.grad is not None]
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm if max_norm is not None else math.inf)
    if hasattr(norm, "full_tensor"):          # FSDP2: a DTensor
        norm = norm.full_tensor()
    return float(norm)
