"""`QuantizedWeight`: the exported form of a quantized matrix, shared with the packing and runtime code.

    W ≈ scale · (codes - zero)

codes  uint8 [out, in], values 0 .. 2^bits - 1
scale  float32, [] (one per tensor) or [out] (one per output channel)
zero   the zero point z (a float: 1.5 for the balanced 2-bit grid)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from openafm.compress.levels import Levels


@dataclass(frozen=True)
class QuantizedWeight:
    codes: torch.Tensor   # uint8 [out, in]
    scale: torch.Tensor   # float32 [] or [out]
    zero: float
    bits: int
    levels: Levels

    def __post_init__(self):
        if self.codes.dtype != torch.uint8 or self.codes.ndim != 2:
            raise ValueError(f"codes must be uint8 [out, in], got {self.codes.dtype} {tuple(self.codes.shape)}")
        if self.scale.dtype != torch.float32 or self.scale.shape not in (torch.Size([]), self.codes.shape[:1]):
            raise ValueError(f"scale must be float32 [] or [{self.codes.shape[0]}], "
                             f"got {self.scale.dtype} {tuple(self.scale.shape)}")
        if int(self.codes.max()) > 2 ** self.bits - 1:
            raise ValueError(f"codes exceed {2 ** self.bits - 1}, the largest {self.bits}-bit code")

    @property
    def shape(self) -> torch.Size:
        return self.codes.shape

    def dequantize(self) -> torch.Tensor:
        """scale · (codes - zero) as float32 [out, in]."""
        scale = self.scale if self.scale.ndim == 0 else self.scale[:, None]   # [] or [out, 1]
        return scale * (self.codes.float() - self.zero)
