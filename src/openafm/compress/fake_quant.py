"""Fake quantization with a learnable clipping factor (report §6):

    W̃ = s · (clamp(⌊W/s + z⌉, q_min, q_max) - z),      s = f · max|W| / level_max

q_min, q_max and z come from the level set (compress.levels; level_max = q_max - z is the largest level,
the report's "q_max" when levels are counted from zero). f in (0, 1] is the clipping factor: the top
level sits at f · max|W|. max|W| is taken per tensor or per output row (`Granularity`) and is a
statistic of the weight, not differentiated (detached), so the gradient to W is exactly the STE's.

Backward (custom autograd function, forward bit-identical to `QuantizedWeight.dequantize` of `quantize`):

* W: straight-through estimator. dW̃/dW = 1 where q_min <= W/s + z <= q_max (inside the clamp range,
  before rounding), 0 outside (clipped weights get no gradient).
* f: dW̃/ds per element, then ds/df = max|W| / level_max, summed over the weights sharing that f.
  `ScaleGradient.LSQ` (LSQ, Esser et al. 2020; ParetoQ): rounding passed straight through inside the
  range, dW̃/ds = ⌊u⌉ - u with u = W/s + z (i.e. ⌊u⌉ - z - W/s), and q - z outside.
  `ScaleGradient.FROZEN_CODES`: the codes held constant, dW̃/ds = q - z everywhere — the exact
  derivative wherever no weight crosses a rounding boundary (a finite difference in f agrees).
* Gradient scaling of f (`GradScale`), a multiplier g on df:
  `LSQ`:     g = 1 / sqrt(N · level_max), N = number of weights sharing one f (out·in per tensor, in
             per row) — LSQ's rule.
  `NEURONS`: g = 1 / sqrt(number of output neurons sharing one f) (out per tensor, 1 per row) — our
             literal reading of the report's "neuron count".
  `NONE`:    g = 1.

Kernels (`FQKernel`): both save only the latent weight and recompute u and q in backward. EAGER runs the
formula as separate torch ops; COMPILED runs the same functions through torch.compile (inductor's fused C++
on CPU, Triton on CUDA): about 6x faster forward+backward over SmolLM2's tensors here
(benchmarks/fake_quant.py). The forward is bit-identical to EAGER (tested); the f gradient's sum may
differ in the last bits (a different summation order).
COMPILED needs a working torch.compile (a C++ compiler on CPU); if it cannot build, the error surfaces:
nothing falls back to EAGER silently.
"""

from __future__ import annotations

import enum
import math

import torch
from torch import nn

from openafm.compress.levels import LevelSet
from openafm.compress.quantized import QuantizedWeight

ABSMAX_FLOOR = 1e-12   # an all-zero tensor or row gets this max|W| (its codes dequantize to ~0) instead of 0/0


class Granularity(enum.StrEnum):
    TENSOR = "tensor"     # one max|W| and one f per [out, in] matrix
    CHANNEL = "channel"   # one per output row


class FQKernel(enum.StrEnum):
    EAGER = "eager"
    COMPILED = "compiled"


class ScaleGradient(enum.StrEnum):
    LSQ = "lsq"
    FROZEN_CODES = "frozen_codes"


class GradScale(enum.StrEnum):
    LSQ = "lsq"
    NEURONS = "neurons"
    NONE = "none"


def absmax(weight: torch.Tensor, granularity: Granularity) -> torch.Tensor:
    """max|W| over each quantization group, detached: [..., 1, 1] (TENSOR) or [..., out, 1] (CHANNEL)."""
    a = weight.detach()            # max|W| = max(max W, -min W): two reductions, no weight-sized |W| temporary
    if granularity is Granularity.TENSOR:
        dims: tuple[int, ...] = (-2, -1)
    elif granularity is Granularity.CHANNEL:
        dims = (-1,)
    else:
        raise ValueError(f"granularity={granularity!r}; accepted: {[g.value for g in Granularity]}")
    m = torch.maximum(a.amax(dim=dims, keepdim=True), a.amin(dim=dims, keepdim=True).neg())
    return m.clamp_min(ABSMAX_FLOOR)


def scale_of(f: torch.Tensor, weight_absmax: torch.Tensor, levels: LevelSet) -> torch.Tensor:
    """s = f · max|W| / level_max (float32, the shape of f)."""
    return (f * weight_absmax) / levels.level_max


def codes_of(weight: torch.Tensor, s: torch.Tensor, levels: LevelSet) -> tuple[torch.Tensor, torch.Tensor]:
    """-> (u = W/s + z, q = clamp(⌊u⌉, q_min, q_max)) as float tensors shaped like weight."""
    u = weight / s + levels.zero
    return u, u.round().clamp(levels.q_min, levels.q_max)


def grad_scale_of(kind: GradScale, weight_shape: torch.Size, granularity: Granularity, levels: LevelSet) -> float:
    out, inp = weight_shape[-2], weight_shape[-1]
    if kind is GradScale.NONE:
        return 1.0
    if kind is GradScale.LSQ:
        n = out * inp if granularity is Granularity.TENSOR else inp
        return 1.0 / math.sqrt(n * levels.level_max)
    if kind is GradScale.NEURONS:
        return 1.0 / math.sqrt(out if granularity is Granularity.TENSOR else 1)
    raise ValueError(f"grad_scale={kind!r}; accepted: {[g.value for g in GradScale]}")


def _fq_forward(weight, s, q_min: float, q_max: float, zero: float):
    """W̃ = s · (clamp(⌊W/s + z⌉) - z); bit-identical to `codes_of` + QuantizedWeight.dequantize."""
    q = (weight / s + zero).round().clamp(q_min, q_max)
    return s * (q - zero)


def _fq_backward(weight, s, grad_out, q_min: float, q_max: float, zero: float, lsq: bool, dims: tuple[int, ...]):
    """-> (dL/dW by the STE, dL/ds summed over `dims`, the dims where s is broadcast); u and q recomputed."""
    u = weight / s + zero
    q = u.round().clamp(q_min, q_max)
    inside = (u >= q_min) & (u <= q_max)
    grad_w = torch.where(inside, grad_out, 0.0)
    ds = torch.where(inside, q - u, q - zero) if lsq else q - zero     # LSQ, or the codes held constant
    per_elem = grad_out * ds
    grad_s = per_elem.sum(dim=dims, keepdim=True) if dims else per_elem
    return grad_w, grad_s


_compiled: dict[str, object] = {}


def _kernel_fns(kernel: FQKernel):
    """(forward, backward): the plain functions (EAGER), or torch.compile'd once on first use (COMPILED)."""
    if kernel is FQKernel.EAGER:
        return _fq_forward, _fq_backward
    if not _compiled:
        _compiled["forward"] = torch.compile(_fq_forward, dynamic=None)
        _compiled["backward"] = torch.compile(_fq_backward, dynamic=None)
    return _compiled["forward"], _compiled["backward"]


class _FakeQuant(torch.autograd.Function):
    """Saves only the weight (and s): backward recomputes u and q, fused when the kernel is COMPILED.
    The weight goes in detached: dynamo specialises on a Parameter's shape (a recompile per shape, then
    eager past its recompile limit)."""

    @staticmethod
    def forward(ctx, weight, f, weight_absmax, levels: LevelSet, scale_gradient: ScaleGradient, g: float,
                kernel: FQKernel):
        s = scale_of(f, weight_absmax, levels)                      # [..., 1 or out, 1]
        ctx.save_for_backward(weight, s, weight_absmax)
        ctx.levels, ctx.scale_gradient, ctx.g, ctx.f_shape, ctx.kernel = levels, scale_gradient, g, f.shape, kernel
        fwd, _ = _kernel_fns(kernel)
        return fwd(weight.detach(), s, float(levels.q_min), float(levels.q_max), float(levels.zero))

    @staticmethod
    def backward(ctx, grad_out):
        weight, s, weight_absmax = ctx.saved_tensors
        levels = ctx.levels
        _, bwd = _kernel_fns(ctx.kernel)
        # sum over the elements sharing each f (dims where f is broadcast)
        dims = tuple(i for i, (a, b) in enumerate(zip(ctx.f_shape, weight.shape)) if a == 1 and b != 1)
        grad_w, grad_s = bwd(weight.detach(), s, grad_out.contiguous(), float(levels.q_min), float(levels.q_max),
                             float(levels.zero), ctx.scale_gradient is ScaleGradient.LSQ, dims)
        grad_f = grad_s * weight_absmax / levels.level_max * ctx.g if ctx.needs_input_grad[1] else None
        return (grad_w if ctx.needs_input_grad[0] else None), grad_f, None, None, None, None, None


def fake_quantize(weight: torch.Tensor, f: torch.Tensor, levels: LevelSet, granularity: Granularity, *,
                  scale_gradient: ScaleGradient = ScaleGradient.LSQ,
                  grad_scale: GradScale = GradScale.LSQ, kernel: FQKernel = FQKernel.EAGER) -> torch.Tensor:
    """W̃ for weight [..., out, in] with f shaped like max|W| ([..., 1, 1] or [..., out, 1])."""
    m = absmax(weight, granularity)
    if f.shape != m.shape:
        raise ValueError(f"f has shape {tuple(f.shape)}; {granularity.value} granularity on a weight of shape "
                         f"{tuple(weight.shape)} needs {tuple(m.shape)}")
    g = grad_scale_of(grad_scale, weight.shape, granularity, levels)
    return _FakeQuant.apply(weight, f, m, levels, scale_gradient, g, FQKernel(kernel))


def quantize(weight: torch.Tensor, f: torch.Tensor, levels: LevelSet, granularity: Granularity) -> QuantizedWeight:
    """The exported form of fake_quantize(weight [out, in], f): dequantize() equals its forward bit for bit."""
    if weight.ndim != 2:
        raise ValueError(f"quantize takes one [out, in] matrix, got shape {tuple(weight.shape)}")
    with torch.no_grad():
        m = absmax(weight, granularity)
        s = scale_of(f.detach().to(weight.dtype), m, levels)                 # [1, 1] or [out, 1]
        _, q = codes_of(weight.detach(), s, levels)
    scale = s.reshape(()) if granularity is Granularity.TENSOR else s.reshape(-1)
    return QuantizedWeight(codes=q.to(torch.uint8), scale=scale.float().contiguous(), zero=levels.zero,
                           bits=levels.bits, levels=levels.kind)


class FakeQuantize(nn.Module):
    """A parametrization (torch.nn.utils.parametrize) of one weight: holds the learnable f, returns W̃."""

    def __init__(self, levels: LevelSet, granularity: Granularity, f_init: torch.Tensor, *,
                 scale_gradient: ScaleGradient = ScaleGradient.LSQ, grad_scale: GradScale = GradScale.LSQ,
                 kernel: FQKernel = FQKernel.EAGER):
        super().__init__()
        self.kernel = FQKernel(kernel)
        self.levels, self.granularity = levels, Granularity(granularity)
        self.scale_gradient, self.grad_scale = ScaleGradient(scale_gradient), GradScale(grad_scale)
        self.f = nn.Parameter(f_init.detach().clone().float())             # [..., 1, 1] or [..., out, 1]

    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        return fake_quantize(weight, self.f, self.levels, self.granularity,
                             scale_gradient=self.scale_gradient, grad_scale=self.grad_scale, kernel=self.kernel)

    def export(self, weight: torch.Tensor) -> list[QuantizedWeight]:
        """One QuantizedWeight per [out, in] matrix of weight (one for a Linear, E for a MoE expert stack)."""
        mats = weight.reshape(-1, *weight.shape[-2:])
        fs = self.f.reshape(-1, *self.f.shape[-2:])
        return [quantize(w, f, self.levels, self.granularity) for w, f in zip(mats, fs)]

    def extra_repr(self) -> str:
        return (f"bits={self.levels.bits}, levels={self.levels.kind.value}, granularity={self.granularity.value}, "
                f"f={tuple(self.f.shape)}, kernel={self.kernel.value}")
