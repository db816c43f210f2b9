import math

import pytest
import torch

from openafm.compress.fake_quant import (FQKernel, Granularity, GradScale, ScaleGradient, absmax, fake_quantize,
                                         grad_scale_of, quantize)
from openafm.compress.levels import Levels, level_set


def _weight(shape=(6, 10), seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(dtype)


def _f(w, granularity, value):
    return torch.full_like(absmax(w, granularity), value)


@pytest.mark.parametrize("kind", list(Levels))
@pytest.mark.parametrize("granularity", list(Granularity))
@pytest.mark.parametrize("bits", [2, 3])
def test_values_on_level_set_times_s_and_nearest(kind, granularity, bits):
    ls = level_set(kind, bits)
    w = _weight()
    f = _f(w, granularity, 0.6)
    wq = fake_quantize(w, f, ls, granularity)
    s = f * absmax(w, granularity) / ls.level_max                          # [1, 1] or [out, 1]
    levels = ls.values().tolist()
    for i in range(w.shape[0]):                                           # naive reference, element by element
        si = float(s.reshape(-1)[i if granularity is Granularity.CHANNEL else 0])
        for j in range(w.shape[1]):
            x = float(w[i, j]) / si
            nearest = min(levels, key=lambda v: abs(v - x))
            assert float(wq[i, j]) == pytest.approx(nearest * si, rel=1e-6, abs=1e-7)
            assert float(wq[i, j]) / si == pytest.approx(nearest, abs=1e-5)
    # exactly s · level: the tensor divided by s has only level values
    ratio = wq.double() / s.double()
    assert torch.isin(ratio.round(decimals=5), torch.tensor(levels, dtype=torch.float64)).all()


def test_f_one_top_level_at_absmax():
    ls = level_set(Levels.BALANCED, 2)
    w = _weight()
    wq = fake_quantize(w, _f(w, Granularity.TENSOR, 1.0), ls, Granularity.TENSOR)
    i = w.abs().argmax()
    assert float(wq.flatten()[i]) == pytest.approx(float(w.flatten()[i]), rel=1e-6)


@pytest.mark.parametrize("kind", list(Levels))
def test_ste_gradient_identity_inside_zero_outside(kind):
    ls = level_set(kind, 2)
    w = _weight().requires_grad_(True)
    f = _f(w, Granularity.TENSOR, 0.5)
    upstream = _weight(seed=1)
    (fake_quantize(w, f, ls, Granularity.TENSOR) * upstream).sum().backward()
    s = 0.5 * w.detach().abs().max() / ls.level_max
    u = w.detach() / s + ls.zero
    inside = (u >= ls.q_min) & (u <= ls.q_max)
    assert 0 < inside.sum() < inside.numel()                              # f = 0.5 clips some weights
    assert torch.equal(w.grad, upstream * inside)


def _loss(w, f, ls, granularity, upstream, **kw):
    return (fake_quantize(w, f, ls, granularity, **kw) * upstream).sum()


@pytest.mark.parametrize("granularity", list(Granularity))
def test_frozen_codes_f_gradient_matches_finite_difference(granularity):
    ls = level_set(Levels.BALANCED, 2)
    w = _weight(dtype=torch.float64)
    upstream = _weight(seed=2, dtype=torch.float64)
    f = _f(w, granularity, 0.7).requires_grad_(True)
    _loss(w, f, ls, granularity, upstream, scale_gradient=ScaleGradient.FROZEN_CODES,
          grad_scale=GradScale.NONE).backward()
    eps = 1e-7
    for k in range(f.numel()):
        fp, fm = f.detach().clone(), f.detach().clone()
        fp.view(-1)[k] += eps
        fm.view(-1)[k] -= eps
        # the rounding is locally constant: no code changes between f - eps and f + eps
        qp, qm = quantize(w, fp, ls, granularity), quantize(w, fm, ls, granularity)
        assert torch.equal(qp.codes, qm.codes)
        fd = (_loss(w, fp, ls, granularity, upstream) - _loss(w, fm, ls, granularity, upstream)) / (2 * eps)
        assert float(f.grad.view(-1)[k]) != 0.0
        assert float(f.grad.view(-1)[k]) == pytest.approx(float(fd), rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("grad_scale", list(GradScale))
def test_lsq_f_gradient_matches_formula(grad_scale):
    ls = level_set(Levels.BALANCED, 2)
    w = _weight(dtype=torch.float64)
    upstream = _weight(seed=3, dtype=torch.float64)
    f = _f(w, Granularity.TENSOR, 0.6).requires_grad_(True)
    _loss(w, f, ls, Granularity.TENSOR, upstream, grad_scale=grad_scale).backward()
    m = float(w.abs().max())
    s = 0.6 * m / ls.level_max
    total = 0.0
    # LSQ: ⌊u⌉ - u inside, q - z outside
    for x, g in zip(w.flatten().tolist(), upstream.flatten().tolist(), strict=True):
        u = x / s + ls.zero
        if u < ls.q_min:
            d = ls.q_min - ls.zero
        elif u > ls.q_max:
            d = ls.q_max - ls.zero
        else:
            d = round(u) - u
        total += g * d
    scale = {GradScale.NONE: 1.0, GradScale.LSQ: 1 / math.sqrt(w.numel() * ls.level_max),
             GradScale.NEURONS: 1 / math.sqrt(w.shape[0])}[grad_scale]
    assert float(f.grad) == pytest.approx(total * m / ls.level_max * scale, rel=1e-9)


def test_grad_scale_counts():
    ls = level_set(Levels.BALANCED, 2)
    shape = torch.Size([8, 32])
    assert grad_scale_of(GradScale.LSQ, shape, Granularity.TENSOR, ls) == pytest.approx(1 / math.sqrt(256 * 1.5))
    assert grad_scale_of(GradScale.LSQ, shape, Granularity.CHANNEL, ls) == pytest.approx(1 / math.sqrt(32 * 1.5))
    assert grad_scale_of(GradScale.NEURONS, shape, Granularity.TENSOR, ls) == pytest.approx(1 / math.sqrt(8))


@pytest.mark.parametrize("granularity", list(Granularity))
@pytest.mark.parametrize("kind", list(Levels))
def test_export_dequant_is_bit_exact(granularity, kind):
    ls = level_set(kind, 2)
    w = _weight((16, 24))
    f = torch.rand(absmax(w, granularity).shape, generator=torch.Generator().manual_seed(4)) * 0.5 + 0.5
    q = quantize(w, f, ls, granularity)
    assert q.codes.dtype == torch.uint8 and int(q.codes.max()) <= 3
    assert q.scale.shape == (() if granularity is Granularity.TENSOR else (16,))
    assert torch.equal(q.dequantize(), fake_quantize(w, f, ls, granularity))


def test_wrong_f_shape_raises():
    ls = level_set(Levels.BALANCED, 2)
    w = _weight()
    with pytest.raises(ValueError, match=r"needs \(6, 1\)"):
        fake_quantize(w, torch.ones(1, 1), ls, Granularity.CHANNEL)


@pytest.mark.parametrize("scale_gradient", list(ScaleGradient))
@pytest.mark.parametrize("granularity", list(Granularity))
@pytest.mark.parametrize("shape", [(48, 40), (3, 16, 24)])        # a Linear, and a MoE expert stack
def test_compiled_kernel_equals_eager(scale_gradient, granularity, shape):
    """FQKernel.COMPILED: the forward bit for bit, the weight gradient exactly, the f gradient to rounding."""
    ls = level_set(Levels.BALANCED, 2)
    results = {}
    for kernel in FQKernel:
        w = _weight(shape).requires_grad_(True)
        f = _f(w, granularity, 0.55).requires_grad_(True)
        wq = fake_quantize(w, f, ls, granularity, scale_gradient=scale_gradient, kernel=kernel)
        (wq * _weight(shape, seed=3)).sum().backward()
        results[kernel] = (wq.detach(), w.grad, f.grad)
    (a, ga, fa), (b, gb, fb) = results[FQKernel.EAGER], results[FQKernel.COMPILED]
    assert torch.equal(a, b)
    assert torch.equal(ga, gb)
    assert 0 < (ga == 0).sum() < ga.numel()                               # f = 0.55 clips some weights
    torch.testing.assert_close(fa, fb, rtol=1e-5, atol=1e-6)
    assert fa.abs().min() > 0
