"""The float32-activation kernels that have an AVX-512 form (Q8_0, Q5_0, Q5_1) on each instruction set this CPU runs
(AVX2 always, AVX-512 where it has it): each against a float64 product of gguf-py's dequantized weights, batches
bit-identical to single rows, the two sets agreeing to rounding, and the switch's errors."""

import pytest
import torch
from block_codes import gguf_reference, random_blocks

from openafm.nn.packed_kernel import (Activations, KernelIsa, WeightFormat, kernel_isa, load_kernel, matvec,
                                      set_kernel_isa, weight_spec)

FORMATS = [WeightFormat.Q8_0, WeightFormat.Q5_0, WeightFormat.Q5_1]
AVAILABLE = [KernelIsa.AVX2] + ([KernelIsa.AVX512] if load_kernel().best_isa() == "avx512" else [])


@pytest.fixture(params=AVAILABLE, ids=lambda i: i.value)
def isa(request):
    before = set_kernel_isa(request.param)
    yield request.param
    set_kernel_isa(before)


def spec_and_weight(fmt: WeightFormat, out: int, n: int, seed: int) -> tuple[tuple, torch.Tensor]:
    raw = random_blocks(fmt, out, n, seed=seed)
    w = torch.from_numpy(gguf_reference(raw.numpy(), fmt, (out, n))).double()
    return weight_spec(fmt, out, n, raw, activations=Activations.FLOAT32), w


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
@pytest.mark.parametrize("rows", [1, 3, 8, 9, 17])
def test_each_isa_matches_a_float64_product(isa, fmt, rows):
    spec, w = spec_and_weight(fmt, 40, 576, seed=rows)
    x = torch.randn(rows, 576, generator=torch.Generator().manual_seed(rows))
    y = matvec(x, spec)
    assert kernel_isa() is isa
    exact = x.double() @ w.T                                                # [rows, 40]
    bound = 1e-6 * 576 ** 0.5 * (x.double().abs() @ w.abs().T)             # a few ulps of the sum of |products|
    assert ((y.double() - exact).abs() <= bound).all(), ((y.double() - exact).abs() / bound).max()


# Tiles of 8 rows: these counts leave every remainder 1..7 after whole tiles.
@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
@pytest.mark.parametrize("rows", [2, 9, 11, 6, 15, 20, 13, 8])
def test_each_isa_gives_a_row_the_same_bits_in_a_batch_and_alone(isa, fmt, rows):
    spec, _ = spec_and_weight(fmt, 70, 160, seed=1)                 # 70 outputs: whole and partial runs of 32
    x = torch.randn(rows, 160, generator=torch.Generator().manual_seed(5))
    together = matvec(x, spec)
    alone = torch.cat([matvec(x[i:i + 1], spec) for i in range(rows)])
    assert torch.equal(together, alone)


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_the_isas_agree_to_rounding(fmt):
    if len(AVAILABLE) < 2:
        pytest.skip("this CPU has no AVX-512: one instruction set to compare")
    spec, _ = spec_and_weight(fmt, 64, 576, seed=7)
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
