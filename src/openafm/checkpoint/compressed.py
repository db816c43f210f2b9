"""A compressed checkpoint: one safetensors file holding packed low-bit weights and everything else.

Tensors: for each quantized weight `<m>.weight` the file holds `<m>.packed` (uint8 [out, bytes], the
pack.py layout), `<m>.scale` and `<m>.zero` (float32 [out]); every other tensor of the model's state
dict (norms, unquantized layers) is stored as it is. The safetensors metadata holds JSON:

  format, format_version, model_kind, config  (openafm.models.build conventions),
  base_sha256   a hash of the base (uncompressed) model's state dict, so a compressed checkpoint is
                never paired with weights it was not made from (adapters, evaluation against the base),
  quantized     {module path: {"bits", "in_features", "module": "linear" | "embedding"}}.

Writes are atomic (a temporary sibling file renamed into place), like checkpoint/native.py.

A compressed checkpoint *directory* (`save_compressed_checkpoint`) holds that file as compressed.safetensors
next to the tokenizer files; `openafm.load(directory)` runs it from the packed weights.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open
from torch import nn

from openafm.checkpoint.atomic import save_safetensors_atomic
from openafm.checkpoint.fingerprint import weights_fingerprint
from openafm.checkpoint.tagged import read_tagged_metadata
from openafm.errors import CheckpointError
from openafm.models.build import build_model, config_from_dict, model_kind
from openafm.nn.pack import pack
from openafm.nn.packed_linear import PackedEmbedding, PackedKernel, PackedLinear
from openafm.nn.packed_model import as_codes, module_path, packed_module, set_module

FORMAT = "openafm-compressed"
FORMAT_VERSION = 1
COMPRESSED_FILE = "compressed.safetensors"


def save_compressed(model: nn.Module, quantized: dict, path: str | Path, *, base_sha256: str | None = None) -> Path:
    """Write the base `model` with the weights in `quantized` (see packed_model.py) packed, to `path`.
    base_sha256: the hash recorded as the base (default: `model`'s own weights; QAT passes the hash of the
    model it started from, since its unquantized tensors have trained on)."""
    path = Path(path)
    if any(isinstance(m, (PackedLinear, PackedEmbedding)) for m in model.modules()):
        raise ValueError("save_compressed takes the uncompressed base model and the quantized weights; "
                         "this model already holds packed layers")
    state = model.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    layout: dict[str, dict] = {}
    for name, q in quantized.items():
        if name not in state:
            raise KeyError(f"quantized weight {name!r} is not in the model's state dict")
        path_ = module_path(name)
        original = model.get_submodule(path_)
        qc = as_codes(name, q)
        if tuple(qc.codes.shape) != tuple(state[name].shape):
            raise ValueError(f"quantized[{name!r}] codes have shape {tuple(qc.codes.shape)}, the weight has "
                             f"{tuple(state[name].shape)}")
        p = pack(qc.codes, qc.bits)
        mod = packed_module(original, name, p.data, qc.scale, qc.zero, qc.bits, p.in_features, PackedKernel.TORCH)
        lin = mod.table if isinstance(mod, PackedEmbedding) else mod
        tensors.update({f"{path_}.packed": lin.packed, f"{path_}.scale": lin.scale, f"{path_}.zero": lin.zero})
        layout[path_] = {"bits": qc.bits, "in_features": p.in_features,
                         "module": "embedding" if isinstance(mod, PackedEmbedding) else "linear"}
    for name, t in state.items():
        if name not in quantized:
            tensors[name] = t
    meta = {"format": FORMAT, "format_version": str(FORMAT_VERSION), "model_kind": model_kind(model.config),
            "config": json.dumps(model.config.to_dict()),
            "base_sha256": base_sha256 or weights_fingerprint(model),
            "quantized": json.dumps(layout)}
    return save_safetensors_atomic(tensors, path, meta)


def save_compressed_checkpoint(directory: str | Path, model: nn.Module, quantized: dict, *, tokenizer=None,
                               base_sha256: str | None = None) -> Path:
    """A directory openafm.load runs from packed weights: compressed.safetensors plus the tokenizer files."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    save_compressed(model, quantized, directory / COMPRESSED_FILE, base_sha256=base_sha256)
    if tokenizer is not None:
        tokenizer.save(directory)
    return directory


def is_compressed_checkpoint(directory: str | Path) -> bool:
    return (Path(directory) / COMPRESSED_FILE).is_file()


def read_metadata(path: str | Path) -> dict:
    """The artifact's metadata with config and quantized parsed (raises naming the file when it is not one)."""
    meta = read_tagged_metadata(path, fmt=FORMAT, version=FORMAT_VERSION, what="compressed checkpoint")
    meta["config"], meta["quantized"] = json.loads(meta["config"]), json.loads(meta["quantized"])
    return meta


def load_compressed(path: str | Path, base: nn.Module | None = None,
                    kernel: PackedKernel = PackedKernel.CPU) -> nn.Module:
    """Build the model with packed modules from a compressed checkpoint. With `base`, first check that
    the checkpoint was made from that model (its weights hash), raising naming both hashes if not."""
    path = Path(path)
    meta = read_metadata(path)
    if base is not None:
        found = weights_fingerprint(base)
        if found != meta["base_sha256"]:
            raise CheckpointError(f"{path} was compressed from base weights sha256 {meta['base_sha256']}, but the "
                                  f"given base model hashes to {found}")
    config = config_from_dict(meta["model_kind"], meta["config"], str(path))
    model = build_model(config, device="meta")
    with safe_open(str(path), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    for mpath, info in meta["quantized"].items():
        parts = [tensors.pop(f"{mpath}.{k}") for k in ("packed", "scale", "zero")]
        set_module(model, mpath, packed_module(model.get_submodule(mpath), mpath, *parts, info["bits"],
                                               info["in_features"], kernel))
    packed_keys = {k for k, _ in model.named_buffers() if k.rpartition(".")[0].removesuffix(".table") in meta["quantized"]}
    missing, unexpected = model.load_state_dict(tensors, strict=False, assign=True)
    missing = [k for k in missing if k not in packed_keys]
    if missing or unexpected:
        raise CheckpointError(f"{path}: tensors do not match the model: missing {missing}, unexpected {unexpected}")
    empty = [k for k, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta]
    if empty:
        raise CheckpointError(f"{path}: no values for {empty}")
    return model.eval()
