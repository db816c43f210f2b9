"""GGUF block layers: the kernels against dequantize-then-float32, and dequantization against gguf's own."""

import numpy as np
import pytest
import torch

from openafm.checkpoint.gguf import GGMLType, dequantize
from openafm.nn.block_linear import BlockEmbedding, BlockLinear
from openafm.nn.packed_kernel import BLOCK_BYTES, WeightFormat, dequantize_blocks

GGML = {WeightFormat.Q8_0: GGMLType.Q8_0, WeightFormat.Q4_0: GGMLType.Q4_0, WeightFormat.Q4_1: GGMLType.Q4_1}


def random_blocks(fmt: WeightFormat, out: int, n: int, seed: int = 0) -> torch.Tensor:
    """uint8 [out, n / 32 * block bytes]: random codes with sane float16 scales (and minima)."""
    g = np.random.default_rng(seed)
    nb, bb = n // 32, BLOCK_BYTES[fmt]
    raw = g.integers(0, 256, size=(out * nb, bb), dtype=np.uint8)
    raw[:, 0:2] = np.frombuffer(g.uniform(0.001, 0.05, out * nb).astype(np.float16).tobytes(),
                                dtype=np.uint8).reshape(-1, 2)
    if fmt is WeightFormat.Q4_1:
        raw[:, 2:4] = np.frombuffer(g.uniform(-0.2, 0.0, out * nb).astype(np.float16).tobytes(),
                                    dtype=np.uint8).reshape(-1, 2)
    return torch.from_numpy(raw.reshape(out, nb * bb).copy())


@pytest.mark.parametrize("fmt", list(GGML))
def test_dequantize_is_bit_identical_to_the_gguf_reference(fmt):
    blocks = random_blocks(fmt, 24, 96)
    ours = dequantize_blocks(blocks, fmt, 96)
    ref = dequantize(blocks.reshape(-1), GGML[fmt], where="test").view(24, 96)
    assert torch.equal(ours, ref)


@pytest.mark.parametrize("fmt", list(GGML))
@pytest.mark.parametrize("rows", [1, 3, 8])
def test_matvec_matches_dequantized_float32(fmt, rows):
    layer = BlockLinear(random_blocks(fmt, 40, 160, seed=rows), fmt, 160)
    x = torch.randn(rows, 160, generator=torch.Generator().manual_seed(rows))
    ref = x @ layer.weight_dequantized().T
    y = layer(x)
    # The kernel quantizes x to int8 per block of 32: ~0.5% relative error for Gaussian inputs.
    rel = (y - ref).norm() / ref.norm()
    assert rel < 0.012, rel
    assert torch.corrcoef(torch.stack([y.flatten(), ref.flatten()]))[0, 1] > 0.9995


@pytest.mark.parametrize("fmt", list(GGML))
def test_many_rows_dequantize_then_multiply_exactly(fmt):
    layer = BlockLinear(random_blocks(fmt, 16, 64), fmt, 64)
    x = torch.randn(2, 9, 64)                                   # 18 rows > KERNEL_MAX_ROWS
    assert torch.allclose(layer(x), x @ layer.weight_dequantized().T, atol=1e-6)


def test_real_q4_1_and_q8_0_tensors_of_the_packaged_model(gguf_file):
    for name, fmt in (("blk.3.ffn_down.weight", WeightFormat.Q4_1), ("token_embd.weight", WeightFormat.Q8_0)):
        ref = gguf_file.dequantize(name)                                   # [out, in] float32
        blocks = gguf_file.raw(name).view(ref.shape[0], -1)
        layer = BlockLinear(blocks, fmt, ref.shape[1])
        assert torch.equal(layer.weight_dequantized(), ref)
        x = torch.randn(2, ref.shape[1], generator=torch.Generator().manual_seed(1))
        expected = x @ ref.T
        assert ((layer(x) - expected).norm() / expected.norm()) < 0.012


def test_embedding_lookup_and_tied_head():
    emb = BlockEmbedding(random_blocks(WeightFormat.Q8_0, 50, 64), WeightFormat.Q8_0, 64)
    table = emb.table.weight_dequantized()
    ids = torch.tensor([[3, 0, 49], [7, 7, 1]])
    assert torch.equal(emb(ids), table[ids])
    with pytest.raises(IndexError, match="token id out of range"):
        emb(torch.tensor([50]))
    x = torch.randn(1, 64)
    assert ((emb.attend(x) - x @ table.T).norm() / (x @ table.T).norm()) < 0.012


def test_bad_shapes_and_formats_raise_naming_them():
    with pytest.raises(ValueError, match=r"Q4_1 rows of 64 values are uint8 \[out, 40\]"):
        BlockLinear(torch.zeros(4, 36, dtype=torch.uint8), WeightFormat.Q4_1, 64)
    with pytest.raises(ValueError, match="not a whole number of 32-value blocks"):
        BlockLinear(torch.zeros(4, 40, dtype=torch.uint8), WeightFormat.Q4_1, 60)
    with pytest.raises(ValueError, match="F32 is not a block format"):
        BlockLinear(torch.zeros(4, 40, dtype=torch.uint8), WeightFormat.F32, 64)
    layer = BlockLinear(random_blocks(WeightFormat.Q4_0, 4, 64), WeightFormat.Q4_0, 64)
    with pytest.raises(ValueError, match="input has 32 features, this layer takes 64"):
        layer(torch.zeros(1, 32))


def test_gradients_flow_through_a_block_layer_for_few_rows():
    layer = BlockLinear(random_blocks(WeightFormat.Q4_1, 8, 64), WeightFormat.Q4_1, 64)
    x = torch.randn(2, 64, requires_grad=True)
    layer(x).sum().backward()
    assert torch.allclose(x.grad, layer.weight_dequantized().sum(0).expand(2, 64), atol=1e-5)
