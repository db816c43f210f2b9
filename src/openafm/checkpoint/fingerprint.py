"""Fingerprints of a model: of its weights (what adapters and compressed checkpoints record about their base), and of
its token embeddings (what drafts and vision towers record about their target; see embedding_fingerprint).

SHA-256 over every state-dict entry in name order: the name, dtype, shape and raw bytes. Two models have
the same fingerprint exactly when their weights are bit-identical (same names, dtypes, shapes, values).
Hashing 135M fp32 weights takes ~1 s, so the result is cached on the module until its weights change
version (`torch.Tensor._version` counts in-place writes).

A model running from packed low-bit layers (nn.packed_linear) is hashed by the weights it computes
with: each packed layer enters as `<layer>.weight` = its dequantized float32 matrix (a PackedEmbedding as
`<embedding>.weight`), not as its packed buffers. A packed checkpoint and the plain "baked" model holding
the same dequantized values therefore share a fingerprint, so an adapter trained on one attaches to the other.
"""

from __future__ import annotations

import hashlib

import torch
from torch import nn

from openafm.nn.packed_linear import PackedEmbedding, PackedLinear


def _logical_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The state dict with every packed layer's buffers replaced by its dequantized weight."""
    state = model.state_dict()
    modules = dict(model.named_modules())
    for path, m in modules.items():
        if not isinstance(m, PackedLinear):
            continue
        parent = path.rpartition(".")[0]
        logical = parent if path.endswith(".table") and isinstance(modules.get(parent), PackedEmbedding) else path
        for buf in ("packed", "scale", "zero"):
            state.pop(f"{path}.{buf}", None)
        state[f"{logical}.weight" if logical else "weight"] = m.weight_dequantized()
    return state


def weights_fingerprint(model: nn.Module) -> str:
    versions = tuple(t._version for t in model.state_dict().values())     # of the tensors actually held
    cached = getattr(model, "_openafm_fingerprint", None)
    if cached is not None and cached[0] == versions:
        return cached[1]
    state = _logical_state(model)
    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().contiguous().cpu()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    digest = f"sha256:{h.hexdigest()}"
    object.__setattr__(model, "_openafm_fingerprint", (versions, digest))
    return digest


def embedding_fingerprint(model) -> str:
    """SHA-256 of the model's token embedding table as float32 values, whatever form holds them (float, GGUF blocks,
    packed): what a draft's head and a vision tower's image tokens are tied to. A bundled adapter leaves it as is."""
    with torch.no_grad():
        table = model.embed(torch.arange(model.kv_plan.vocab_size)).float().contiguous()      # [V, D]
    return "sha256:" + hashlib.sha256(table.numpy().tobytes()).hexdigest()
