"""Asymmetric min/max group quantization: the baseline beside ASTC at the same total bits per weight.

Each row of W [out, in] is cut into groups of ``group`` consecutive input weights (a last partial group
keeps its own scale and minimum). Per group, fp16 ``lo`` (the minimum rounded down to fp16) and fp16
``step`` ((max - lo) / (2^bits - 1), rounded up to fp16 so every code stays in range):

    q = clamp(round((w - lo) / step), 0, 2^bits - 1),      w~ = q * step + lo

Storage per weight: bits + 32 / group (one fp16 step and one fp16 lo per group).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from torch import nn

from openafm.compress.astc import FP16_BITS, fp16_ceil, fp16_floor, linear_modules, relative_error

SUPPORTED_BITS = (2, 3, 4, 8)


def matched_group(bits: int, target_bits_per_weight: float) -> int:
    """The group size whose total bits per weight (bits + 32/g) is closest to the target."""
    if target_bits_per_weight <= bits:
        raise ValueError(f"int{bits} with fp16 scale and min always costs more than {bits} bits per weight; "
                         f"target {target_bits_per_weight} cannot be matched")
    exact = 2 * FP16_BITS / (target_bits_per_weight - bits)
    candidates = {max(1, int(np.floor(exact))), max(1, int(np.ceil(exact)))}
    return min(candidates, key=lambda g: abs(bits + 2 * FP16_BITS / g - target_bits_per_weight))


@dataclass
class GroupQuantWeight:
    shape: tuple[int, int]   # [out, in]
    bits: int
    group: int
    codes: np.ndarray        # [out, n_groups, group] uint8 (padded tail codes are never read back)
    step: np.ndarray         # [out, n_groups] float16
    lo: np.ndarray           # [out, n_groups] float16

    def decode(self) -> torch.Tensor:
        w = self.codes.astype(np.float32) * self.step.astype(np.float32)[..., None] + self.lo.astype(np.float32)[..., None]
        return torch.from_numpy(np.ascontiguousarray(w.reshape(self.shape[0], -1)[:, : self.shape[1]]))

    def stored_bits(self) -> int:
        """Codes for the real weights plus fp16 step and lo per group."""
        return self.bits * self.shape[0] * self.shape[1] + 2 * FP16_BITS * self.step.size

    def bits_per_weight(self) -> float:
        return self.stored_bits() / (self.shape[0] * self.shape[1])


def group_quantize(weight: torch.Tensor, bits: int, group: int) -> GroupQuantWeight:
    if bits not in SUPPORTED_BITS:
        raise ValueError(f"bits must be one of {SUPPORTED_BITS}, got {bits}")
    if weight.ndim != 2:
        raise ValueError(f"group_quantize takes a 2-D weight [out, in], got shape {tuple(weight.shape)}")
    out, inp = weight.shape
    if not 1 <= group:
        raise ValueError(f"group must be >= 1, got {group}")
    w = weight.detach().to("cpu", torch.float32).numpy()
    n_groups = -(-inp // group)
    padded = np.pad(w, ((0, 0), (0, n_groups * group - inp)), mode="edge").reshape(out, n_groups, group)
    levels = 2 ** bits - 1
    lo = fp16_floor(padded.min(axis=2))                                             # [out, G]
    step = fp16_ceil((padded.max(axis=2) - lo.astype(np.float32)) / levels)          # [out, G]
    step[step == 0] = np.float16(1.0)
    q = np.round((padded - lo.astype(np.float32)[..., None]) / step.astype(np.float32)[..., None])
    codes = np.clip(q, 0, levels).astype(np.uint8)
    return GroupQuantWeight(shape=(out, inp), bits=bits, group=group, codes=codes, step=step, lo=lo)


@torch.no_grad()
def group_quantize_model(model: nn.Module, bits: int, group: int, *,
                         include: Callable[[str], bool] | None = None) -> list[tuple[str, GroupQuantWeight, float]]:
    """Replace every linear weight by its group-quantized reconstruction, in place.
    Returns (name, quantized, relative error) per matrix."""
    out = []
    for name, module in linear_modules(model, include):
        w = module.weight.detach().float().cpu()
        qw = group_quantize(w, bits, group)
        approx = qw.decode()
        out.append((name, qw, relative_error(w, approx)))
        module.weight.copy_(approx.to(module.weight.dtype))
    if not out:
        raise ValueError("no nn.Linear modules matched; nothing to quantize")
    return out
