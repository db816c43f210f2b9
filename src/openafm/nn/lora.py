"""LoRA: a frozen linear layer plus a trainable low-rank update, y = W x + (alpha / r) · B (A x).

Report §5 / §6: Apple's task adapters and quality-recovery adapters are rank-r LoRA on the linear layers
of a frozen base. `apply_lora` wraps the chosen `Linear`s of a model in place; `LoRALinear` keeps the
base layer (its parameters unchanged, so a base checkpoint still loads; an nn.Linear or a packed low-bit
`PackedLinear`, so recovery adapters run on a compressed base unmerged) and adds `lora_A` [r, in] and
`lora_B` [out, r]. B starts at zero, so a fresh adapter leaves the model's outputs exactly unchanged;
`LoRALinear.from_factors` starts from given factors instead (the SVD pull-out of compress/).
"""

from __future__ import annotations

import math
from typing import Iterable

import torch
from torch import nn
from torch.nn import functional as F

from openafm.nn.block_linear import BlockLinear, BlockRows
from openafm.nn.packed_linear import PackedLinear

# Linear layers adapted by default: every projection of attention and the dense FFN. Not the MoE router
# (its logits pick experts; adapting it changes routing, not the experts), not the output head.
DEFAULT_TARGETS = ("qkv", "q", "out", "gate_up", "down")


def _adaptable(module: nn.Module) -> bool:
    """nn.Linear, or a packed low-bit linear layer (nn.packed_linear): the adapter runs beside it."""
    return isinstance(module, (nn.Linear, PackedLinear, BlockLinear, BlockRows))


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Module, rank: int, alpha: float):
        super().__init__()
        if not _adaptable(base):
            raise TypeError(f"LoRA wraps nn.Linear, PackedLinear, BlockLinear or BlockRows layers, got {type(base).__name__}")
        if rank < 1 or rank > min(base.in_features, base.out_features):
            raise ValueError(f"LoRA rank must be in 1..{min(base.in_features, base.out_features)} for a "
                             f"{base.out_features}x{base.in_features} layer, got {rank}")
        self.base, self.rank, self.alpha = base, rank, float(alpha)
        for p in base.parameters():
            p.requires_grad_(False)
        # packed and block layers compute in float32
        ref = base.weight if isinstance(base, nn.Linear) else getattr(base, "scale", None)
        if ref is None:
            ref = torch.empty(0, device=next(base.buffers()).device)        # block layers: their uint8 blocks
        self.lora_A = nn.Parameter(torch.empty(rank, base.in_features, dtype=ref.dtype, device=ref.device))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank, dtype=ref.dtype, device=ref.device))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))

    @classmethod
    def from_factors(cls, base: nn.Linear, A: torch.Tensor, B: torch.Tensor, alpha: float | None = None
                     ) -> "LoRALinear":
        """Start from B [out, r] @ A [r, in] (scaled by alpha / r; alpha defaults to r, a scale of 1)."""
        rank = A.shape[0]
        if A.shape != (rank, base.in_features) or B.shape != (base.out_features, rank):
            raise ValueError(f"factors A {tuple(A.shape)} and B {tuple(B.shape)} do not fit a "
                             f"{base.out_features}x{base.in_features} layer (need A [r, in], B [out, r])")
        layer = cls(base, rank, rank if alpha is None else alpha)
        with torch.no_grad():
            layer.lora_A.copy_(A)
            layer.lora_B.copy_(B)
        return layer

    @property
    def scale(self) -> float:
        return self.alpha / self.rank

    @property
    def weight(self) -> torch.Tensor:
        return self.base.weight

    def delta(self) -> torch.Tensor:
        """The dense update scale · B A, [out, in]."""
        return self.scale * (self.lora_B @ self.lora_A)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [..., in] -> [..., out]
        return self.base(x) + self.scale * F.linear(F.linear(x, self.lora_A), self.lora_B)

    def extra_repr(self) -> str:
        return f"rank={self.rank}, alpha={self.alpha:g}"


def apply_lora(model: nn.Module, *, rank: int, alpha: float, targets: Iterable[str] = DEFAULT_TARGETS
               ) -> list[str]:
    """Wrap every nn.Linear whose attribute name is in `targets` in a LoRALinear; returns their names.

    Every parameter of the model is frozen first, so only the adapter trains."""
    targets = tuple(targets)
    for p in model.parameters():
        p.requires_grad_(False)
    wrapped = []
    for parent_name, parent in list(model.named_modules()):
        for child_name, child in list(parent.named_children()):
            if child_name in targets and _adaptable(child):
                setattr(parent, child_name, LoRALinear(child, rank, alpha))
                wrapped.append(f"{parent_name}.{child_name}" if parent_name else child_name)
    if not wrapped:
        raise ValueError(f"no nn.Linear named one of {list(targets)} in {type(model).__name__}")
    return wrapped


def lora_layers(model: nn.Module) -> dict[str, LoRALinear]:
    return {name: m for name, m in model.named_modules() if isinstance(m, LoRALinear)}


def lora_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """Only the adapter's tensors: {"<layer>.lora_A": [r, in], "<layer>.lora_B": [out, r]}."""
    state = {}
    for name, layer in lora_layers(model).items():
        state[f"{name}.lora_A"] = layer.lora_A.detach()
        state[f"{name}.lora_B"] = layer.lora_B.detach()
    return state


def load_lora_state_dict(model: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Copy adapter tensors into the model's LoRALinear layers; the names and shapes must match exactly."""
    own = lora_state_dict(model)
    missing, unexpected = sorted(set(own) - set(state)), sorted(set(state) - set(own))
    if missing or unexpected:
        raise ValueError(f"adapter tensors do not match the model's LoRA layers: missing {missing[:4]}"
                         f"{'...' if len(missing) > 4 else ''}, unexpected {unexpected[:4]}"
                         f"{'...' if len(unexpected) > 4 else ''}")
    for name, tensor in state.items():
        if own[name].shape != tensor.shape:
            raise ValueError(f"adapter tensor {name} has shape {tuple(tensor.shape)}, the model's LoRA layer "
                             f"needs {tuple(own[name].shape)} (a different rank or base model?)")
    with torch.no_grad():
        for name, layer in lora_layers(model).items():
            layer.lora_A.copy_(state[f"{name}.lora_A"])
            layer.lora_B.copy_(state[f"{name}.lora_B"])


def merge_lora(model: nn.Module) -> int:
    """Fold every adapter into its base weight (W += scale · B A) and unwrap it; returns how many."""
    merged = 0
    for parent_name, parent in list(model.named_modules()):
        for child_name, child in list(parent.named_children()):
            if isinstance(child, LoRALinear):
                if not isinstance(child.base, nn.Linear):
                    raise TypeError(f"{parent_name}.{child_name}: an adapter on a {type(child.base).__name__} "
                                    f"cannot be merged (its weight is held as packed codes or blocks); run it unmerged")
                with torch.no_grad():
                    child.base.weight += child.delta().to(child.base.weight.dtype)
                setattr(parent, child_name, child.base)
                merged += 1
    return merged
