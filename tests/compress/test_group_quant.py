"""Asymmetric min/max group quantization against a naive per-group loop."""

import numpy as np
import pytest
import torch

from openafm.compress.group_quant import group_quantize, group_quantize_model, matched_group
from tiny import make_tiny


def naive(w: np.ndarray, bits: int, group: int) -> np.ndarray:
    out = np.empty_like(w)
    levels = 2 ** bits - 1
    for r in range(w.shape[0]):
        for start in range(0, w.shape[1], group):
            g = w[r, start:start + group]
            lo = np.float16(g.min())
            if np.float32(lo) > g.min():
                lo = np.nextafter(lo, np.float16(-np.inf))
            step = np.float16((g.max() - np.float32(lo)) / levels)
            if np.float32(step) < (g.max() - np.float32(lo)) / levels:
                step = np.nextafter(step, np.float16(np.inf))
            step = np.float32(step) if step != 0 else np.float32(1.0)
            q = np.clip(np.round((g - np.float32(lo)) / step), 0, levels)
            out[r, start:start + group] = q * step + np.float32(lo)
    return out


@pytest.mark.parametrize("bits,group", [(4, 16), (3, 57), (3, 32), (2, 7)])
def test_matches_naive_loop_including_a_partial_last_group(bits, group):
    w = (torch.randn(5, 100, generator=torch.Generator().manual_seed(bits)) * 0.05)
    qw = group_quantize(w, bits, group)
    np.testing.assert_allclose(qw.decode().numpy(), naive(w.numpy(), bits, group), rtol=0, atol=1e-7)
    # every weight within half a step of its reconstruction
    step = np.repeat(qw.step.astype(np.float32), group, axis=1)[:, :100]
    assert (np.abs(qw.decode().numpy() - w.numpy()) <= step / 2 + 1e-7).all()
    assert qw.bits_per_weight() == pytest.approx((bits * 500 + 32 * 5 * -(-100 // group)) / 500)


def test_matched_group_sizes():
    assert matched_group(3, 128 / 36) == 58      # 3 + 32/58 = 3.552 (57: 3.561) ~ ASTC 6x6's 3.556
    assert matched_group(3, 4.0) == 32
    assert matched_group(4, 4.25) == 128
    with pytest.raises(ValueError, match="int4"):
        matched_group(4, 3.56)


def test_more_bits_less_error_and_bad_bits_raise():
    w = torch.randn(64, 256, generator=torch.Generator().manual_seed(0))
    e = {b: float((group_quantize(w, b, 64).decode() - w).norm() / w.norm()) for b in (2, 3, 4, 8)}
    assert e[8] < e[4] < e[3] < e[2]
    assert 0.05 < e[4] < 0.15          # uniform 16-level grid over a Gaussian group's range
    with pytest.raises(ValueError, match="bits must be one of"):
        group_quantize(w, 5, 64)


def test_model_pass_replaces_every_linear():
    model = make_tiny("smollm2-tiny")
    before = {n: m.weight.detach().clone() for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    out = group_quantize_model(model, 4, 32)
    assert [n for n, _, _ in out] == list(before)
    for name, qw, err in out:
        assert torch.equal(model.get_submodule(name).weight.detach(), qw.decode())
        assert 0 < err < 0.2
