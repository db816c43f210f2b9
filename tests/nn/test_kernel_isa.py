"""The float32-activation Q8_0 kernel on each instruction set this CPU runs (AVX2 always, AVX-512 where it has it):
each against a float64 product of gguf-py's dequantized weights, batches bit-identical to single rows, and the
switch's errors."""

import gguf
import numpy as np
import pytest
import torch

from openafm.nn.packed_kernel import (Activations, KernelIsa, WeightFormat, kernel_isa, load_kernel, matvec,
                                      set_kernel_isa, weight_spec)

AVAILABLE = [KernelIsa.AVX2] + ([KernelIsa.AVX512] if load_kernel().best_isa() == "avx512" else [])


@pytest.fixture(params=AVAILABLE, ids=lambda i: i.value)
def isa(request):
    before = set_kernel_isa(request.param)
    yield request.param
    set_kernel_isa(before)


def q8_0_blocks(out: int, n: int, seed: int) -> np.ndarray:
    """uint8 [out, n / 32 * 34]: random int8 codes with sane float16 scales."""
    g = np.random.default_rng(seed)
    raw = g.integers(0, 256, (out * n // 32, 34), dtype=np.uint8)
    raw[:, 0:2] = g.uniform(0.001, 0.05, raw.shape[0]).astype(np.float16).view(np.uint8).reshape(-1, 2)
    return raw.reshape(out, -1)


def spec_and_weight(out: int, n: int, seed: int) -> tuple[tuple, torch.Tensor]:
    raw = q8_0_blocks(out, n, seed)
    w = np.asarray(gguf.quants.dequantize(raw, gguf.GGMLQuantizationType.Q8_0), np.float32).reshape(out, n)
    spec = weight_spec(WeightFormat.Q8_0, out, n, torch.from_numpy(raw.copy()), activations=Activations.FLOAT32)
    return spec, torch.from_numpy(w).double()


@pytest.mark.parametrize("rows", [1, 3, 8, 9, 17])
def test_each_isa_matches_a_float64_product(isa, rows):
    spec, w = spec_and_weight(40, 576, seed=rows)
    x = torch.randn(rows, 576, generator=torch.Generator().manual_seed(rows))
    y = matvec(x, spec)
    assert kernel_isa() is isa
    exact = x.double() @ w.T                                                # [rows, 40]
    bound = 1e-6 * 576 ** 0.5 * (x.double().abs() @ w.abs().T)             # a few ulps of the sum of |products|
    assert ((y.double() - exact).abs() <= bound).all(), ((y.double() - exact).abs() / bound).max()


# Tiles of 8 rows: these counts leave every remainder 1..7 after whole tiles.
@pytest.mark.parametrize("rows", [2, 9, 11, 6, 15, 20, 13, 8])
def test_each_isa_gives_a_row_the_same_bits_in_a_batch_and_alone(isa, rows):
    spec, _ = spec_and_weight(70, 160, seed=1)                 # 70 outputs: whole and partial runs of 32
    x = torch.randn(rows, 160, generator=torch.Generator().manual_seed(5))
    together = matvec(x, spec)
    alone = torch.cat([matvec(x[i:i + 1], spec) for i in range(rows)])
    assert torch.equal(together, alone)


def test_the_isas_agree_to_rounding():
    if len(AVAILABLE) < 2:
        pytest.skip("this CPU has no AVX-512: one instruction set to compare")
    spec, _ = spec_and_weight(64, 576, seed=7)
    x = torch.randn(4, 576, generator=torch.Generator().manual_seed(7))
    out = {}
    for isa in AVAILABLE:
        before = set_kernel_isa(isa)
        out[isa] = matvec(x, spec)
        set_kernel_isa(before)
    torch.testing.assert_close(out[KernelIsa.AVX2], out[KernelIsa.AVX512], rtol=1e-5, atol=1e-5)
    # another summation order: some of the 256 sums differ in their last bits (the switch reached the kernel)
    assert not torch.equal(out[KernelIsa.AVX2], out[KernelIsa.AVX512])


def test_an_isa_that_is_not_one_raises_naming_it():
    with pytest.raises(ValueError, match="'avx3'.*avx2.*avx512"):
        set_kernel_isa("avx3")
    with pytest.raises(ValueError, match="avx3 is not one of avx2, avx512"):
        load_kernel().set_kernel_isa("avx3")
