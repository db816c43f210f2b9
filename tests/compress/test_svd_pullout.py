"""SVD pull-out: the adapter captures a known spectrum; pulled-out + ASTC beats ASTC alone."""

import pytest
import torch

from openafm.compress.astc import compress_weight, relative_error
from openafm.compress.svd_pullout import pull_out


def low_rank_plus_noise(out=120, inp=96, spectrum=(8.0, 5.0, 3.0, 2.0), noise=0.01, seed=0):
    g = torch.Generator().manual_seed(seed)
    u, _ = torch.linalg.qr(torch.randn(out, len(spectrum), generator=g, dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(inp, len(spectrum), generator=g, dtype=torch.float64))
    low = (u * torch.tensor(spectrum, dtype=torch.float64)) @ v.T
    return low.float(), (low + noise * torch.randn(out, inp, generator=g, dtype=torch.float64)).float()


def test_pull_out_captures_the_known_spectrum():
    low, w = low_rank_plus_noise()
    p = pull_out(w, 4)
    assert p.adapter.b.shape == (120, 4) and p.adapter.a.shape == (4, 96)
    captured = torch.linalg.svdvals(p.adapter.product().double())[:4]
    torch.testing.assert_close(captured, torch.tensor([8.0, 5.0, 3.0, 2.0], dtype=torch.float64), atol=0.03, rtol=0)
    # B A is the planted low-rank part up to the noise's projection on the top subspace (~0.01 * sqrt(4 *
    # (120 + 96)) / ||low|| = 0.029); the residual is (mostly) the noise
    assert relative_error(low, p.adapter.product()) < 0.04
    clean = pull_out(low, 4)
    assert relative_error(low, clean.adapter.product()) < 2e-3          # noise-free: only fp16 rounding
    noise_norm = float((w - low).norm())
    assert float(p.residual.norm()) == pytest.approx(noise_norm, rel=0.05)
    torch.testing.assert_close(p.adapter.product() + p.residual, w, atol=1e-6, rtol=0)
    # B and A split sqrt(S) evenly: column norms of B equal row norms of A
    torch.testing.assert_close(p.adapter.b.norm(dim=0), p.adapter.a.norm(dim=1), rtol=2e-3, atol=0)
    assert p.adapter.bits() == 16 * 4 * (120 + 96)


def test_pulled_out_residual_compresses_better_than_the_weight():
    _, w = low_rank_plus_noise(out=96, inp=96)
    direct = relative_error(w, compress_weight(w, "ldr", "6x6", scale="block", quality="fastest").decode())
    p = pull_out(w, 4)
    residual = compress_weight(p.residual, "ldr", "6x6", scale="block", quality="fastest")
    pulled = relative_error(w, p.adapter.product() + residual.decode())
    assert pulled < 0.1 * direct


def test_rank_out_of_range_raises():
    with pytest.raises(ValueError, match=r"rank must be in \[1, 4\].*got 5"):
        pull_out(torch.zeros(4, 9), 5)
