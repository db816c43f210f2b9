import math

import pytest
import torch

from openafm.compress.clip_init import ClipInit, init_factor, newton_raphson_clip
from openafm.compress.fake_quant import Granularity, absmax, fake_quantize
from openafm.compress.levels import Levels, level_set


def _bisect(fn, lo, hi, iters=200):
    for _ in range(iters):
        mid = (lo + hi) / 2
        if fn(lo) * fn(mid) <= 0:
            hi = mid
        else:
            lo = mid
    return (lo + hi) / 2


def _gaussian_residual(kappa):
    # |X|, X ~ N(0, 1): P(|X| <= c) = erf(c/√2); E[(|X| - c)+] = 2(φ(c) - c(1 - Φ(c)))
    def r(c):
        phi = math.exp(-c * c / 2) / math.sqrt(2 * math.pi)
        tail = 0.5 * math.erfc(c / math.sqrt(2))
        return kappa * c * math.erf(c / math.sqrt(2)) - 2 * (phi - c * tail)
    return r


def _laplace_residual(kappa):
    # |X|, X ~ Laplace(0, 1), so |X| ~ Exp(1): P(|X| <= c) = 1 - e^-c; E[(|X| - c)+] = e^-c
    return lambda c: kappa * c * (1 - math.exp(-c)) - math.exp(-c)


@pytest.mark.parametrize("bits", [2, 3, 4])
@pytest.mark.parametrize("dist", ["gaussian", "laplace"])
def test_converges_to_the_fixed_point_of_the_distribution(dist, bits):
    kappa = level_set(Levels.BALANCED, bits).rounding_noise()
    gen = torch.Generator().manual_seed(bits)
    n = 400_000
    if dist == "gaussian":
        x = torch.randn(n, generator=gen, dtype=torch.float64)
        residual = _gaussian_residual(kappa)
    else:
        x = -torch.log(torch.rand(n, generator=gen, dtype=torch.float64))   # |Laplace(0, 1)| = Exp(1)
        residual = _laplace_residual(kappa)
    a = x.abs()[None]                                                       # [1, n]
    res = newton_raphson_clip(a, kappa, tol=1e-12)
    c = float(res.clip)
    # fixed point of the sample: κ c #{|w| <= c} = Σ_{|w| > c} (|w| - c), to 1e-6 relative
    beyond = a > c
    lhs = kappa * c * float((~beyond).sum())
    rhs = float(((a - c) * beyond).sum())
    assert lhs == pytest.approx(rhs, rel=1e-6)
    # one more step stays put
    assert float(newton_raphson_clip(a, kappa, tol=1e-12).clip) == pytest.approx(c, rel=1e-12)
    # and matches the distribution's fixed point (sampling error ~ 1/√n)
    exact = _bisect(residual, 1e-3, 20.0)
    assert abs(residual(exact)) < 1e-12
    assert c == pytest.approx(exact, rel=0.01)


def test_gaussian_two_bit_value():
    # balanced 2-bit: κ = 1/27; at c = 1.5608 σ both sides are 0.0510 (κ c erf(c/√2) = 0.0578 · 0.8813;
    # 2(φ(c) - c(1 - Φ(c))) = 2(0.1181 - 1.5608 · 0.0593)), evaluated by hand from tables
    exact = _bisect(_gaussian_residual(1 / 27), 1e-3, 20.0)
    assert exact == pytest.approx(1.5608, abs=1e-3)


def test_clip_lowers_two_bit_mse_on_gaussian():
    ls = level_set(Levels.BALANCED, 2)
    w = torch.randn(256, 256, generator=torch.Generator().manual_seed(0))
    f_nr = init_factor(w, ls, Granularity.TENSOR, ClipInit.NEWTON_RAPHSON)
    f_one = init_factor(w, ls, Granularity.TENSOR, ClipInit.NONE)
    assert float(f_one) == 1.0 and 0.2 < float(f_nr) < 0.6               # max of 65k normals ≈ 4.5σ, c* ≈ 1.7σ
    mse = lambda f: float(((fake_quantize(w, f, ls, Granularity.TENSOR) - w) ** 2).mean())
    assert mse(f_nr) < 0.5 * mse(f_one)


def test_per_channel_factor_shape_and_rows():
    ls = level_set(Levels.BALANCED, 2)
    w = torch.randn(5, 300, generator=torch.Generator().manual_seed(1)) * torch.arange(1, 6)[:, None]
    f = init_factor(w, ls, Granularity.CHANNEL, ClipInit.NEWTON_RAPHSON)
    assert f.shape == (5, 1)
    for r in range(5):
        c = float(newton_raphson_clip(w[r:r + 1].abs(), ls.rounding_noise()).clip)
        assert float(f[r]) == pytest.approx(c / float(w[r].abs().max()), rel=1e-6)


def test_bad_input_raises():
    with pytest.raises(ValueError, match="groups, n"):
        newton_raphson_clip(torch.ones(3), 0.1)
    with pytest.raises(ValueError, match="negative"):
        newton_raphson_clip(-torch.ones(1, 3), 0.1)


def _h(a, c, kappa, within_at_c=True):
    inside = a <= c if within_at_c else a < c
    return kappa * c * float(inside.sum()) - float(((a - c) * ~inside).sum())


@pytest.mark.parametrize("seed", range(12))
def test_small_groups_reach_fixed_point_or_balance_point(seed):
    kappa = level_set(Levels.BALANCED, 2).rounding_noise()
    a = torch.randn(40, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).abs()
    c = float(newton_raphson_clip(a[None], kappa, tol=1e-12).clip)
    is_sample = bool((a == c).any())
    if not is_sample or abs(_h(a, c, kappa)) < 1e-9:
        assert _h(a, c, kappa) == pytest.approx(0.0, abs=1e-9)           # an exact fixed point
    else:                                                                # h steps over zero at the sample c
        assert _h(a, c, kappa, within_at_c=False) < 0 <= _h(a, c, kappa)


def test_balance_point_agrees_with_iteration_when_it_converges():
    from openafm.compress.clip_init import balance_point
    kappa = level_set(Levels.BALANCED, 3).rounding_noise()
    a = torch.randn(5000, generator=torch.Generator().manual_seed(7), dtype=torch.float64).abs()
    res = newton_raphson_clip(a[None], kappa, tol=0.0, cycle_check=10_000)
    assert res.iterations < 10_000
    assert float(res.clip) == pytest.approx(balance_point(a, kappa), rel=1e-12)
