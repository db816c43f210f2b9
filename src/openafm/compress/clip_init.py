"""Clipping initialisation of f by a Newton-Raphson iteration on the quantization MSE (report §6; the
recursion is OCTAV's, Sakr et al. 2022, with the rounding-noise term of our level set).

Model the error of quantizing |W| with clip c on a grid of step c / level_max as

    J(c) = κ · c² · P(|W| <= c)  +  E[(|W| - c)² · 1{|W| > c}],      κ = 1 / (12 · level_max²)

(rounding noise of the weights within c, plus clipping error of the weights beyond c). Dropping the
density terms, J'(c) = 2κ c P(|W| <= c) - 2 E[(|W| - c) 1{|W| > c}] and J''(c) = 2κ P(|W| <= c) + 2 P(|W| > c);
one Newton step c - J'/J'' simplifies to the iteration implemented here, over the n weights of a group:

    c_{k+1} = Σ_{|w| > c_k} |w|  /  ( κ · #{|w| <= c_k}  +  #{|w| > c_k} )

Its fixed point c* balances the two sides of c:

    κ · c* · #{|w| <= c*}  =  Σ_{|w| > c*} (|w| - c*)

i.e. the mean excess of the weights beyond c* times their share equals κ c* times the share within.
Iteration starts at c_0 = mean |w| and stops when |c_{k+1} - c_k| <= tol · c_k for every group (once the
split {|w| > c} stops changing the next step returns the same c exactly).

On a finite sample the balance h(c) = κ c #{|w| <= c} - Σ_{|w| > c} (|w| - c) is increasing but jumps at
each sample, so it can step over zero: then no fixed point exists and the iteration cycles between two
values on either side of the jump (seen on rows of a few hundred weights). A group still moving after
`cycle_check` steps is solved exactly instead: sort |w|, and for each split "k smallest within" the
equation is linear, c_k = Σ_{top n-k} |w| / (κ k + n - k); return the c_k that lies inside its own
split (the fixed point), or, when none does, the sample where h crosses zero (the balance point).

f_init = c* / max|W|, clamped to at most 1.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import torch

from openafm.compress.fake_quant import Granularity, absmax
from openafm.compress.levels import LevelSet


class ClipInit(enum.StrEnum):
    NONE = "none"                        # f = 1: no clipping, the top level at max|W|
    NEWTON_RAPHSON = "newton_raphson"    # f = c* / max|W| from the iteration above


@dataclass(frozen=True)
class ClipResult:
    clip: torch.Tensor     # c* per group [G]
    iterations: int


def newton_raphson_clip(abs_w: torch.Tensor, noise: float, *, tol: float = 1e-6, cycle_check: int = 50) -> ClipResult:
    """abs_w [G, n] (|W| of G groups of n weights each) -> the fixed point c* [G] of the iteration above;
    noise is κ (LevelSet.rounding_noise()). Groups not converged after `cycle_check` steps are solved exactly."""
    if abs_w.ndim != 2 or abs_w.shape[1] == 0:
        raise ValueError(f"abs_w must be [groups, n] with n >= 1, got shape {tuple(abs_w.shape)}")
    if (abs_w < 0).any():
        raise ValueError("abs_w must hold magnitudes |W| (found negative values)")
    a = abs_w.double()
    n = a.shape[1]
    c = a.mean(dim=1)                                                  # [G]
    for k in range(1, cycle_check + 1):
        beyond = a > c[:, None]                                        # [G, n]
        n_beyond = beyond.sum(dim=1).double()
        c_next = (a * beyond).sum(dim=1) / (noise * (n - n_beyond) + n_beyond)
        moving = (c_next - c).abs() > tol * c.clamp_min(1e-300)        # [G]
        c = c_next
        if not moving.any():
            return ClipResult(clip=c.to(abs_w.dtype), iterations=k)
    for g in moving.nonzero().flatten().tolist():
        c[g] = balance_point(a[g], noise)
    return ClipResult(clip=c.to(abs_w.dtype), iterations=cycle_check)


def balance_point(abs_w: torch.Tensor, noise: float) -> float:
    """Exact solution for one group abs_w [n]: the fixed point if one exists, else the sample where
    h(c) = κ c #{|w| <= c} - Σ_{|w| > c} (|w| - c) crosses zero."""
    s = abs_w.double().sort().values                                   # [n] ascending
    n = s.numel()
    k = torch.arange(n + 1, dtype=torch.float64)                       # k smallest are within
    top = s.sum() - torch.cat([s.new_zeros(1), s.cumsum(0)])           # [n+1] Σ of the n-k largest
    c = top / (noise * k + (n - k))                                    # [n+1]
    lo = torch.cat([s.new_zeros(1), s])                                # s[k-1] (0 for k = 0)
    hi = torch.cat([s, s.new_full((1,), float("inf"))])                # s[k]
    fixed = (lo <= c) & (c < hi)
    if fixed.any():
        return float(c[fixed.nonzero()[0, 0]])
    j = torch.arange(1, n + 1, dtype=torch.float64)                    # counting s[j-1] within
    h = noise * s * j - (top[1:] - s * (n - j))                        # h at each sample, [n]
    return float(s[(h >= 0).nonzero()[0, 0]])


def init_factor(weight: torch.Tensor, levels: LevelSet, granularity: Granularity, kind: ClipInit) -> torch.Tensor:
    """f_init shaped like max|W| of weight [..., out, in]: ones (NONE) or c*/max|W| (NEWTON_RAPHSON)."""
    m = absmax(weight, granularity)                                    # [..., 1, 1] or [..., out, 1]
    kind = ClipInit(kind)
    if kind is ClipInit.NONE:
        return torch.ones_like(m)
    a = weight.detach().abs().float()
    groups = a.reshape(m.numel(), -1)                                  # one row per f
    c = newton_raphson_clip(groups, levels.rounding_noise()).clip.reshape(m.shape)
    return (c / m.float()).clamp(max=1.0)
