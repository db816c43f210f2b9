"""Adapter files: a LoRA adapter for one base model, as a single safetensors file.

The file holds only the adapter's tensors ("<layer>.lora_A" [r, in], "<layer>.lora_B" [out, r]) and, in
the safetensors metadata, the format, rank, alpha, the adapted layer names and the base model's name and
weights fingerprint. An adapter only makes sense on the weights it was trained against (Apple's adapters
are tied to one base model version the same way), so attaching it to another base raises.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import nn

from openafm.checkpoint.atomic import save_safetensors_atomic
from openafm.checkpoint.fingerprint import weights_fingerprint
from openafm.checkpoint.tagged import read_tagged_metadata
from openafm.errors import CheckpointError
from openafm.nn.lora import LoRALinear, apply_lora, load_lora_state_dict, lora_layers, lora_state_dict

FORMAT = "openafm-lora-adapter"
FORMAT_VERSION = 1
ADAPTER_FILE = "adapter.safetensors"      # an adapter's name inside a directory (an SFT or RL run, an exported bundle)


@dataclasses.dataclass(frozen=True)
class AdapterFile:
    path: Path
    rank: int
    alpha: float
    targets: tuple[str, ...]          # attribute names wrapped (e.g. "qkv", "down")
    base_name: str
    base_fingerprint: str
    tensors: dict[str, torch.Tensor]


def save_adapter(path: str | Path, model: nn.Module, *, base_name: str, base_fingerprint: str) -> Path:
    """Write the LoRA layers of `model` (atomically: temp file, fsync, rename)."""
    layers = lora_layers(model)
    if not layers:
        raise ValueError("the model has no LoRA layers to save (wrap it with openafm.nn.lora.apply_lora)")
    ranks = {m.rank for m in layers.values()}
    alphas = {m.alpha for m in layers.values()}
    if len(ranks) != 1 or len(alphas) != 1:
        raise ValueError(f"an adapter file holds one rank and alpha; the model's LoRA layers have ranks "
                         f"{sorted(ranks)} and alphas {sorted(alphas)}")
    meta = {"format": FORMAT, "format_version": str(FORMAT_VERSION), "rank": str(ranks.pop()),
            "alpha": repr(alphas.pop()), "targets": json.dumps(sorted({n.rsplit('.', 1)[-1] for n in layers})),
            "base_name": base_name, "base_fingerprint": base_fingerprint}
    return save_safetensors_atomic(lora_state_dict(model), path, meta)


def read_adapter(path: str | Path) -> AdapterFile:
    path = Path(path)
    meta = read_tagged_metadata(path, fmt=FORMAT, version=FORMAT_VERSION, what="adapter")
    tensors = load_file(str(path))
    return AdapterFile(path=path, rank=int(meta["rank"]), alpha=float(meta["alpha"]),
                       targets=tuple(json.loads(meta["targets"])), base_name=meta["base_name"],
                       base_fingerprint=meta["base_fingerprint"], tensors=tensors)


def attach_adapter(model: nn.Module, adapter: AdapterFile) -> nn.Module:
    """A copy of `model` with the adapter attached. The copy shares every base weight with `model` (no
    extra memory beyond the adapter) and `model` itself is left unchanged. Raises when the adapter was
    trained for other weights."""
    actual = weights_fingerprint(model)
    if actual != adapter.base_fingerprint:
        raise CheckpointError(f"{adapter.path}: adapter was trained for base model {adapter.base_name!r} with "
                              f"weights {adapter.base_fingerprint}, but this model's weights are {actual}")
    if any(isinstance(m, LoRALinear) for m in model.modules()):
        raise ValueError("the model already has LoRA layers; attach adapters to the plain base model")
    shared = {id(t): t for t in list(model.parameters()) + list(model.buffers())}
    trainable = {p: p.requires_grad for p in model.parameters()}
    clone = copy.deepcopy(model, memo=dict(shared))
    wrap_with_adapter(clone, adapter)
    for p, flag in trainable.items():          # apply_lora froze the shared base weights: not ours to change
        p.requires_grad_(flag)
    clone.eval()
    return clone


def wrap_with_adapter(model: nn.Module, adapter: AdapterFile) -> None:
    """Wrap `model`'s adapted layers in LoRA holding the adapter's factors, in place (every other weight frozen).
    The caller checks that the adapter was made for these weights."""
    apply_lora(model, rank=adapter.rank, alpha=adapter.alpha, targets=adapter.targets)
    load_lora_state_dict(model, adapter.tensors)
