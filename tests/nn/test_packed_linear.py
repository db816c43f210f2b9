import pytest
import torch

from packed_codes import rtn_codes

from openafm.nn.pack import GROUP
from openafm.nn.packed_linear import KERNEL_MAX_ROWS, PackedEmbedding, PackedKernel, PackedLinear


def int8_blocks(x: torch.Tensor) -> torch.Tensor:
    """The kernel's activation quantization, written as a plain loop over blocks of 32: x -> dequantized x."""
    out = torch.empty_like(x)
    for start in range(0, x.shape[-1], GROUP):
        blk = x[..., start:start + GROUP]
        d = blk.abs().amax(-1, keepdim=True) / 127
        out[..., start:start + GROUP] = torch.where(d > 0, torch.round(blk / torch.where(d > 0, d, 1)) * d, 0)
    return out


def naive_weight(codes, scale, zero):
    w = torch.empty(codes.shape)
    for o in range(codes.shape[0]):
        w[o] = scale[o] * (codes[o].float() - zero[o])
    return w


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("shape", [(40, 64), (33, 100), (7, 5)])
def test_torch_kind_matches_the_dequantized_weight(bits, shape):
    torch.manual_seed(0)
    codes, scale, zero = rtn_codes(torch.randn(shape), bits)
    layer = PackedLinear.from_codes(codes, scale, zero, bits, kernel=PackedKernel.TORCH)
    x = torch.randn(2, 3, shape[1])
    ref = x @ naive_weight(codes, scale, zero).T
    torch.testing.assert_close(layer(x), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("shape", [(40, 64), (37, 100), (300, 576)])
def test_cpu_kernel_equals_int8_activation_reference(bits, shape):
    torch.manual_seed(1)
    codes, scale, zero = rtn_codes(torch.randn(shape), bits)
    zero = zero + 0.25                                                   # a non-integer zero point too
    layer = PackedLinear.from_codes(codes, scale, zero, bits, kernel=PackedKernel.CPU)
    w = naive_weight(codes, scale, zero)
    for rows in (1, 3):
        x = torch.randn(rows, shape[1]) * torch.linspace(0.1, 3, shape[1])
        y = layer(x)
        exact_in_q = int8_blocks(x) @ w.T                    # what the kernel computes, up to float rounding
        torch.testing.assert_close(y, exact_in_q, rtol=1e-4, atol=1e-4 * float(exact_in_q.abs().max()))
        # and the int8 activations cost little against the float product
        err = (y - x @ w.T).norm() / (x @ w.T).norm()
        assert err < 0.01, err


def test_cpu_kind_uses_dequantized_matmul_for_long_inputs():
    torch.manual_seed(2)
    codes, scale, zero = rtn_codes(torch.randn(24, 64), 2)
    layer = PackedLinear.from_codes(codes, scale, zero, 2, kernel=PackedKernel.CPU)
    x = torch.randn(KERNEL_MAX_ROWS + 1, 64)
    torch.testing.assert_close(layer(x), x @ naive_weight(codes, scale, zero).T, rtol=1e-5, atol=1e-5)


def test_resident_bytes_are_the_packed_bytes():
    codes, scale, zero = rtn_codes(torch.randn(256, 512), 2)
    layer = PackedLinear.from_codes(codes, scale, zero, 2)
    held = sum(b.numel() * b.element_size() for b in layer.buffers())
    assert held == 256 * 512 // 4 + 2 * 256 * 4                          # codes at 2 bits + fp32 scale, zero
    assert not list(layer.parameters())


def test_packed_embedding_lookup_and_tied_head():
    torch.manual_seed(3)
    table = torch.randn(50, 40)
    codes, scale, zero = rtn_codes(table, 4)
    emb = PackedEmbedding.from_codes(codes, scale, zero, 4, kernel=PackedKernel.TORCH)
    w = naive_weight(codes, scale, zero)
    ids = torch.tensor([[3, 0, 49], [7, 7, 1]])
    torch.testing.assert_close(emb(ids), w[ids])
    x = torch.randn(2, 1, 40)
    torch.testing.assert_close(emb.attend(x), x @ w.T, rtol=1e-5, atol=1e-5)
    with pytest.raises(IndexError, match="max 50"):
        emb(torch.tensor([50]))


def test_bad_arguments_raise():
    codes, scale, zero = rtn_codes(torch.randn(4, 32), 2)
    layer = PackedLinear.from_codes(codes, scale, zero, 2)
    with pytest.raises(ValueError, match="takes 32"):
        layer(torch.randn(1, 31))
    with pytest.raises(ValueError, match=r"shape \[4\]"):
        PackedLinear.from_codes(codes, torch.ones(3), zero, 2)
    with pytest.raises(ValueError, match="bits=3"):
        PackedLinear(layer.packed, scale, zero, 3, 32)
    with pytest.raises(ValueError, match="'gpu' is not a valid PackedKernel"):
        PackedLinear.from_codes(codes, scale, zero, 2, kernel="gpu")


def test_an_input_that_needs_a_gradient_gets_one_from_the_cpu_kind():
    codes, scale, zero = rtn_codes(torch.randn(16, 64), 4)
    layer = PackedLinear.from_codes(codes, scale, zero, 4, kernel=PackedKernel.CPU)
    x = torch.randn(1, 64, requires_grad=True)                 # one row: the kernel's size, but no backward there
    layer(x).sum().backward()
    assert torch.allclose(x.grad, layer.weight_dequantized().sum(0, keepdim=True), atol=1e-5)
