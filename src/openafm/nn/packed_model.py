"""Swap a model's linear layers and embedding for packed ones (PackedLinear / PackedEmbedding).

`quantized` maps a weight's state-dict name ("layers.3.ffn.gate_up.weight", "embed.weight",
"lm_head.weight") to its quantized form: any object with `codes` (uint8 [out, in]), `scale` ([] or
[out]), a zero point `z` or `zero` (scalar or [out]) and `bits` (the QAT contract,
W ~ scale * (codes - z)), or a `QuantizedCodes`.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from openafm.nn.pack import pack
from openafm.nn.packed_linear import PackedEmbedding, PackedKernel, PackedLinear


@dataclasses.dataclass
class QuantizedCodes:
    codes: torch.Tensor    # uint8 [out, in], values 0..2^bits-1
    scale: torch.Tensor    # float32 [] or [out]
    zero: torch.Tensor     # float32 [] or [out]
    bits: int


def as_codes(name: str, q) -> QuantizedCodes:
    """The contract's fields of one quantized weight (raises naming the weight when one is missing)."""
    zero = getattr(q, "z", getattr(q, "zero", None))
    missing = [f for f, v in (("codes", getattr(q, "codes", None)), ("scale", getattr(q, "scale", None)),
                              ("z or zero", zero), ("bits", getattr(q, "bits", None))) if v is None]
    if missing:
        raise TypeError(f"quantized[{name!r}] ({type(q).__name__}) lacks {missing}: a quantized weight has "
                        f"codes, scale, z (or zero) and bits")
    return QuantizedCodes(q.codes, torch.as_tensor(q.scale), torch.as_tensor(zero), int(q.bits))


def module_path(weight_name: str) -> str:
    if not weight_name.endswith(".weight"):
        raise ValueError(f"quantized key {weight_name!r} is not a weight name (expected '<module>.weight')")
    return weight_name[: -len(".weight")]


def packed_module(original: nn.Module, name: str, packed: torch.Tensor, scale, zero, bits: int,
                  in_features: int, kernel: PackedKernel) -> nn.Module:
    """The packed replacement of `original` (an nn.Linear without bias, or an nn.Embedding)."""
    if isinstance(original, nn.Embedding):
        return PackedEmbedding(packed, scale, zero, bits, in_features, kernel)
    if isinstance(original, nn.Linear):
        if original.bias is not None:
            raise ValueError(f"{name}: packed linear layers have no bias; this layer has one")
        return PackedLinear(packed, scale, zero, bits, in_features, kernel)
    raise TypeError(f"{name} is a {type(original).__name__}; only Linear and Embedding layers can be packed")


def set_module(model: nn.Module, path: str, module: nn.Module) -> None:
    parent, _, leaf = path.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, leaf, module)


def pack_model(model: nn.Module, quantized: dict, kernel: PackedKernel = PackedKernel.CPU) -> nn.Module:
    """Replace every quantized weight's module with its packed form, in place; returns the model."""
    for name, q in quantized.items():
        path = module_path(name)
        original = model.get_submodule(path)
        qc = as_codes(name, q)
        if tuple(qc.codes.shape) != tuple(original.weight.shape):
            raise ValueError(f"quantized[{name!r}] codes have shape {tuple(qc.codes.shape)}, the weight has "
                             f"{tuple(original.weight.shape)}")
        p = pack(qc.codes, qc.bits)
        set_module(model, path, packed_module(original, name, p.data, qc.scale, qc.zero, qc.bits,
                                              p.in_features, kernel))
    return model
