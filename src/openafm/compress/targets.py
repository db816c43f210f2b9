"""Which tensors of a decoder are quantized, and in which role.

* WEIGHT: every Linear's weight (fused qkv, q, out, gate_up, down, the MoE router) and the MoE expert
  stacks `gate_up` [E, 2H, D] and `down` [E, D, H] (each expert's matrix is its own [out, in] tensor).
* EMBEDDING: the token-embedding table [V, D], and an untied `lm_head` [V, D] (the same kind of table).
  A tied head has no tensor of its own: it reads `embed.weight`, quantized once.

Biases and 1-D parameters (RMSNorm gains) stay in floating point. Any other parameter of two or more
dimensions raises: a new kind of weight must be placed here, not skipped silently.
"""

from __future__ import annotations

import enum
import fnmatch
from dataclasses import dataclass

from torch import nn
from torch.nn.utils import parametrize

from openafm.nn.moe import MoE


class Role(enum.StrEnum):
    WEIGHT = "weight"
    EMBEDDING = "embedding"


@dataclass(frozen=True)
class Target:
    module_name: str   # "layers.0.attn.qkv"
    attr: str          # "weight"
    module: nn.Module
    role: Role

    @property
    def name(self) -> str:
        return f"{self.module_name}.{self.attr}" if self.module_name else self.attr


def _role(module_name: str, module: nn.Module, attr: str) -> Role | None:
    if isinstance(module, nn.Embedding) and attr == "weight":
        return Role.EMBEDDING
    if isinstance(module, nn.Linear):
        if attr == "bias":
            return None
        return Role.EMBEDDING if module_name == "lm_head" else Role.WEIGHT
    if isinstance(module, MoE) and attr in ("gate_up", "down"):
        return Role.WEIGHT
    return None


def quant_targets(model: nn.Module, skip: list[str] = ()) -> list[Target]:
    """The tensors to quantize, minus those whose name matches a `skip` glob ("layers.0.*", "lm_head.weight");
    a skip pattern that matches no tensor raises."""
    if any(parametrize.is_parametrized(m) for m in model.modules()):
        raise ValueError("model already has parametrized weights (prepare_qat ran on it?); quantize a plain model")
    targets, unknown = [], []
    for module_name, module in model.named_modules():
        for attr, p in module.named_parameters(recurse=False):
            role = _role(module_name, module, attr)
            if role is not None:
                targets.append(Target(module_name, attr, module, role))
            elif p.ndim >= 2:
                unknown.append(f"{module_name}.{attr} {tuple(p.shape)} in {type(module).__name__}")
    if unknown:
        raise ValueError(f"no quantization role known for: {unknown}; add it to openafm.compress.targets")
    for pattern in skip:
        if not any(fnmatch.fnmatchcase(t.name, pattern) for t in targets):
            raise ValueError(f"skip pattern {pattern!r} matches no quantized tensor; names look like "
                             f"{[t.name for t in targets[:4]]}")
    return [t for t in targets if not any(fnmatch.fnmatchcase(t.name, p) for p in skip)]
