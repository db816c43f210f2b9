"""A fingerprint of a model's weights: what adapters and compressed checkpoints record about their base.

SHA-256 over every state-dict entry in name order: the name, dtype, shape and raw bytes. Two models have
the same fingerprint exactly when their weights are bit-identical (same names, dtypes, shapes, values).
Hashing 135M fp32 weights takes ~1 s, so the result is cached on the module until its weights change
version (`torch.Tensor._version` counts in-place writes).
"""

from __future__ import annotations

import hashlib

import torch
from torch import nn


def weights_fingerprint(model: nn.Module) -> str:
    state = model.state_dict()
    versions = tuple(t._version for t in state.values())
    cached = getattr(model, "_openafm_fingerprint", None)
    if cached is not None and cached[0] == versions:
        return cached[1]
    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().contiguous().cpu()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    digest = f"sha256:{h.hexdigest()}"
    object.__setattr__(model, "_openafm_fingerprint", (versions, digest))
    return digest
