"""The reference K-quant quantizer: valid blocks (gguf-py reads them) close to the input, exact zeros, the
types it hands to gguf-py, and errors naming what it cannot do."""

import gguf as gguf_py
import numpy as np
import pytest

from openafm.checkpoint.gguf import BLOCK_SIZES, GGMLType
from openafm.checkpoint.gguf.quantize import SUPPORTED, quantize

QT = gguf_py.GGMLQuantizationType
# Relative RMS error of gguf-py's dequantization of our blocks, per Gaussian row (measured: 0.27, 0.145,
# 0.071, 0.036, 0.017 -- about a uniform grid of 4 / 8 / 16 / 32 / 64 levels over each sub-block).
BOUNDS = {"Q2_K": 0.3, "Q3_K": 0.17, "Q4_K": 0.08, "Q5_K": 0.045, "Q6_K": 0.02}


def gaussian_rows(rows: int = 24, cols: int = 1024, seed: int = 0) -> np.ndarray:
    g = np.random.default_rng(seed)
    return (g.standard_normal((rows, cols)) * np.logspace(-3, 2, rows)[:, None]).astype(np.float32)


@pytest.mark.parametrize("name", list(BOUNDS))
def test_k_quants_dequantize_close_to_the_input(name):
    x = gaussian_rows()
    raw = quantize(x, GGMLType[name])
    block, nbytes = BLOCK_SIZES[GGMLType[name]]
    assert raw.dtype == np.uint8 and raw.shape == (24, 1024 // block * nbytes)
    y = gguf_py.quants.dequantize(raw, QT[name]).reshape(x.shape)
    rel = np.linalg.norm(y - x, axis=1) / np.linalg.norm(x, axis=1)          # [rows]
    assert rel.max() < BOUNDS[name], rel.max()


@pytest.mark.parametrize("name", list(BOUNDS))
def test_zero_and_constant_rows(name):
    x = np.zeros((2, 256), np.float32)
    x[1] = -0.5
    y = gguf_py.quants.dequantize(quantize(x, GGMLType[name]), QT[name]).reshape(x.shape)
    assert np.array_equal(y[0], x[0])
    assert np.abs(y[1] - x[1]).max() < 0.5 * BOUNDS[name]


@pytest.mark.parametrize("name", ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"])
def test_other_types_are_gguf_py_bytes(name):
    x = gaussian_rows(4, 256)
    expected = np.ascontiguousarray(gguf_py.quants.quantize(x, QT[name])).view(np.uint8).reshape(4, -1)
    assert np.array_equal(quantize(x, GGMLType[name]), expected)


def test_unsupported_types_and_widths_raise_naming_them():
    with pytest.raises(ValueError, match="cannot quantize to IQ4_XS; supported: Q2_K"):
        quantize(np.zeros((1, 256), np.float32), GGMLType.IQ4_XS)
    with pytest.raises(ValueError, match="Q4_K rows are whole blocks of 256 values; 576 columns is not"):
        quantize(np.zeros((1, 576), np.float32), GGMLType.Q4_K)
    with pytest.raises(ValueError, match=r"float32 \[rows, cols\], got shape \(256,\)"):
        quantize(np.zeros(256, np.float32), GGMLType.Q6_K)
    assert GGMLType.Q4_K in SUPPORTED
