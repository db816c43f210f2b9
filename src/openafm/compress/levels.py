"""Level sets of a b-bit uniform quantizer (report §6): where the 2^b codes sit on the weight axis.

A weight is stored as a code q in [q_min, q_max] = [0, 2^b - 1] and read back as s · (q - z). The level
set is {q - z : q in [q_min, q_max]}, i.e. the zero point z picks the grid:

    BALANCED    z = (2^b - 1) / 2   levels {-1.5, -0.5, 0.5, 1.5} at 2 bits: the symmetric half-integer
                                    grid (no zero level; the report's choice, smoother QAT training)
    UNBALANCED  z = 2^(b-1)         levels {-2, -1, 0, 1} at 2 bits: the two's-complement-like grid

`level_max = q_max - z` is the largest level (1.5 and 1 at 2 bits): the report's ``s = f · max|W| / q_max``
divides by that largest level, so with f = 1 the top level lands exactly on max|W|.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import torch

SUPPORTED_BITS = (2, 3, 4, 8)


class Levels(enum.StrEnum):
    BALANCED = "balanced"
    UNBALANCED = "unbalanced"


def check_bits(bits: int, what: str = "bits") -> int:
    if isinstance(bits, bool) or not isinstance(bits, int) or bits not in SUPPORTED_BITS:
        raise ValueError(f"{what}={bits!r} is not supported; accepted: {list(SUPPORTED_BITS)}")
    return bits


@dataclass(frozen=True)
class LevelSet:
    kind: Levels
    bits: int
    q_min: int      # smallest code (0)
    q_max: int      # largest code (2^b - 1)
    zero: float     # zero point z: level = code - z

    @property
    def level_max(self) -> float:
        """Largest level, q_max - z (the divisor in s = f · max|W| / level_max)."""
        return self.q_max - self.zero

    @property
    def level_min(self) -> float:
        return self.q_min - self.zero

    def values(self) -> torch.Tensor:
        """All levels in ascending order, [2^b] float32."""
        return torch.arange(self.q_min, self.q_max + 1, dtype=torch.float32) - self.zero

    def rounding_noise(self) -> float:
        """Variance of the rounding error inside the range, in units of the clip c = level_max · s:
        a uniform grid of step s has error variance s²/12, and s = c / level_max."""
        return 1.0 / (12.0 * self.level_max ** 2)


def level_set(kind: Levels | str, bits: int) -> LevelSet:
    """The level set of `kind` at `bits` (2, 3, 4 or 8)."""
    check_bits(bits)
    try:
        kind = Levels(kind)
    except ValueError:
        raise ValueError(f"levels={kind!r} is not a level-set kind; accepted: {[k.value for k in Levels]}") from None
    q_max = 2 ** bits - 1
    zero = q_max / 2 if kind is Levels.BALANCED else float(2 ** (bits - 1))
    return LevelSet(kind=kind, bits=bits, q_min=0, q_max=q_max, zero=zero)
