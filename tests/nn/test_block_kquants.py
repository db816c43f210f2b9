"""The block formats beyond Q8_0/Q4_0/Q4_1 (Q5_0, Q5_1, the K-quants Q4_K/Q5_K/Q6_K, F16, BF16): kernels
against a float64 product of gguf-py's dequantized weights, batches against single rows, C++ dequantize
against gguf-py bit for bit, the layers, and the errors for bad shapes."""

import numpy as np
import pytest
import torch
from block_codes import gguf_reference, random_blocks

from openafm.checkpoint.gguf import GGMLType
from openafm.checkpoint.gguf.quantize import quantize
from openafm.nn.block_linear import BlockEmbedding, BlockLinear, BlockRows
from openafm.nn.packed_kernel import BLOCK_SHAPES, Activations, WeightFormat, dequantize_blocks, matvec, weight_spec

NEW = [WeightFormat.Q4_K, WeightFormat.Q5_K, WeightFormat.Q6_K, WeightFormat.Q5_0, WeightFormat.Q5_1,
       WeightFormat.F16, WeightFormat.BF16]
INTEGER = [f for f in NEW if f not in (WeightFormat.F16, WeightFormat.BF16)]
# Every block format (the first three are test_block_linear's).
ALL = [WeightFormat.Q8_0, WeightFormat.Q4_0, WeightFormat.Q4_1, *NEW]


def width(fmt: WeightFormat) -> int:
    return 512 if BLOCK_SHAPES[fmt][0] == 256 else 160


@pytest.mark.parametrize("fmt", NEW, ids=lambda f: f.name)
def test_dequantize_is_bit_identical_to_gguf_py(fmt):
    n = width(fmt) if BLOCK_SHAPES[fmt][0] > 1 else 100                  # F16/BF16: any width
    blocks = random_blocks(fmt, 7, n)
    ours = dequantize_blocks(blocks, fmt, n).numpy()
    assert np.array_equal(ours.view(np.uint32), gguf_reference(blocks.numpy(), fmt, (7, n)).view(np.uint32))


@pytest.mark.parametrize("fmt", NEW, ids=lambda f: f.name)
@pytest.mark.parametrize("rows", [1, 3, 9])
def test_float32_activations_match_a_float64_product_of_gguf_weights(fmt, rows):
    n = width(fmt) if BLOCK_SHAPES[fmt][0] > 1 else 100
    blocks = random_blocks(fmt, 40, n, seed=rows)
    w = torch.from_numpy(gguf_reference(blocks.numpy(), fmt, (40, n))).double()
    x = torch.randn(rows, n, generator=torch.Generator().manual_seed(rows))
    y = matvec(x, weight_spec(fmt, 40, n, blocks, activations=Activations.FLOAT32))
    exact = x.double() @ w.T                                                # [rows, 40]
    # float32 sums of n products: error a few ulps of the sum of |products|.
    bound = 1e-6 * n ** 0.5 * (x.double().abs() @ w.abs().T) + 1e-30
    assert ((y.double() - exact).abs() <= bound).all(), ((y.double() - exact).abs() / bound).max()


@pytest.mark.parametrize("fmt", ALL, ids=lambda f: f.name)
@pytest.mark.parametrize("activations", list(Activations), ids=lambda a: a.value)
# Kernels work in register tiles of rows: 4, or 8 for the float32-activation Q8_0 / Q4_0 / Q4_1 ones. These row
# counts leave every leftover size after whole tiles of either: 1 to 3 after fours, 1 to 7 after eights.
@pytest.mark.parametrize("rows", [2, 9, 11, 6, 15, 20, 13])
def test_batched_rows_are_bit_identical_to_single_rows(fmt, activations, rows):
    n = width(fmt) if BLOCK_SHAPES[fmt][0] > 1 else 100
    spec = weight_spec(fmt, 24, n, random_blocks(fmt, 24, n), activations=activations)
    x = torch.randn(rows, n, generator=torch.Generator().manual_seed(5))
    together = matvec(x, spec)
    alone = torch.cat([matvec(x[i:i + 1], spec) for i in range(rows)])
    assert torch.equal(together, alone)


@pytest.mark.parametrize("fmt", INTEGER, ids=lambda f: f.name)
def test_int8_activations_are_within_llama_cpp_rounding(fmt):
    n = width(fmt)
    blocks = random_blocks(fmt, 64, n, seed=3)
    w = torch.from_numpy(gguf_reference(blocks.numpy(), fmt, (64, n)))
    x = torch.randn(4, n, generator=torch.Generator().manual_seed(3))
    y = matvec(x, weight_spec(fmt, 64, n, blocks, activations=Activations.INT8))
    ref = x @ w.T
    # Activations rounded to int8 per block of 32 (scale max|x| / 127): ~0.5-0.7% for Gaussian inputs.
    assert ((y - ref).norm() / ref.norm()) < 0.012


@pytest.mark.parametrize("fmt", [WeightFormat.Q4_K, WeightFormat.Q6_K, WeightFormat.Q5_0], ids=lambda f: f.name)
def test_block_linear_from_quantized_weights_decodes_and_prefills(fmt):
    g = np.random.default_rng(1)
    w = (g.standard_normal((48, 512)) * 0.05).astype(np.float32)
    layer = BlockLinear(torch.from_numpy(quantize(w, GGMLType[fmt.name])), fmt, 512)
    dq = layer.weight_dequantized()
    assert ((dq - torch.from_numpy(w)).norm() / np.linalg.norm(w)) < 0.08   # the quantizer's own error
    g = torch.Generator().manual_seed(2)
    few, many = torch.randn(2, 512, generator=g), torch.randn(3, 7, 512, generator=g)
    bound = 1e-6 * 512 ** 0.5 * (few.abs() @ dq.abs().T)                    # float32 sums in another order
    assert ((layer(few) - few @ dq.T).abs() <= bound).all()                 # kernel, float32 activations
    assert torch.allclose(layer(many), many @ dq.T, atol=1e-5)              # > 8 rows: dequantize + matmul


@pytest.mark.parametrize("fmt", [WeightFormat.Q6_K, WeightFormat.Q5_1, WeightFormat.BF16], ids=lambda f: f.name)
def test_embedding_lookup_and_tied_head(fmt):
    emb = BlockEmbedding(random_blocks(fmt, 50, 256), fmt, 256)
    table = emb.table.weight_dequantized()
    ids = torch.tensor([[3, 0, 49], [7, 7, 1]])
    assert torch.equal(emb(ids), table[ids])
    x = torch.randn(1, 256, generator=torch.Generator().manual_seed(0))
    # float32 sums in another order: within 1e-6 sqrt(n) of the sum of |products| (not relative to a sum near 0)
    bound = 1e-6 * 256 ** 0.5 * (x.abs() @ table.abs().T)
    assert ((emb.attend(x) - x @ table.T).abs() <= bound).all()


def test_bad_widths_and_row_bytes_raise_naming_them():
    with pytest.raises(ValueError, match=r"576 input features is not a whole number of 256-value blocks \(Q4_K"):
        BlockLinear(torch.zeros(4, 324, dtype=torch.uint8), WeightFormat.Q4_K, 576)
    with pytest.raises(ValueError, match=r"Q6_K rows of 512 values are uint8 \[out, 420\], got torch.uint8 \(4, 400\)"):
        BlockLinear(torch.zeros(4, 400, dtype=torch.uint8), WeightFormat.Q6_K, 512)
    with pytest.raises(ValueError, match=r"F16 rows of 10 values are uint8 \[out, 20\]"):
        BlockLinear(torch.zeros(4, 10, dtype=torch.uint8), WeightFormat.F16, 10)
    with pytest.raises(ValueError, match="block rows of 512 values take 288 bytes"):   # the C++ check, bypassing Python's
        matvec(torch.zeros(1, 512), weight_spec(WeightFormat.Q4_K, 4, 512, torch.zeros(4, 280, dtype=torch.uint8)))
    with pytest.raises(ValueError, match="not a whole number of 256-value blocks"):
        dequantize_blocks(torch.zeros(4, 144, dtype=torch.uint8), WeightFormat.Q4_K, 200)


def test_block_rows_concatenate_parts_in_different_formats():
    q = BlockLinear(random_blocks(WeightFormat.Q5_0, 12, 256), WeightFormat.Q5_0, 256)
    v = BlockLinear(random_blocks(WeightFormat.Q6_K, 4, 256), WeightFormat.Q6_K, 256)
    rows = BlockRows([q, v])
    assert (rows.in_features, rows.out_features) == (256, 16)
    x = torch.randn(2, 256)
    assert torch.equal(rows(x), torch.cat([q(x), v(x)], -1))
    assert torch.equal(rows.weight_dequantized(), torch.cat([q.weight_dequantized(), v.weight_dequantized()]))
    with pytest.raises(ValueError, match=r"same input width, got \[160, 256\]"):
        BlockRows([q, BlockLinear(random_blocks(WeightFormat.Q5_0, 4, 160), WeightFormat.Q5_0, 160)])
    with pytest.raises(ValueError, match="two or more BlockLinear layers"):
        BlockRows([q])
    with pytest.raises(ValueError, match="run a PARTS weight's parts one by one"):
        matvec(x, rows.spec())
