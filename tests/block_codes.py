"""Random GGUF blocks for the kernel tests (every code, scale and bit pattern, with finite float16 fields) and gguf-py's
dequantization of them, the reference the kernels are held to."""

import gguf
import numpy as np
import torch

from openafm.checkpoint.gguf import GGMLType
from openafm.checkpoint.gguf.quantize import quantize
from openafm.nn.packed_kernel import BLOCK_SHAPES, WeightFormat

# Offsets of each format's float16 fields in a block (scales / minima), set to sane values in random blocks.
HALF_FIELDS = {WeightFormat.Q4_K: (0, 2), WeightFormat.Q5_K: (0, 2), WeightFormat.Q6_K: (208,),
               WeightFormat.Q5_0: (0,), WeightFormat.Q5_1: (0, 2),
               WeightFormat.Q8_0: (0,), WeightFormat.Q4_0: (0,), WeightFormat.Q4_1: (0, 2)}


def gguf_reference(raw: np.ndarray, fmt: WeightFormat, shape: tuple[int, int]) -> np.ndarray:
    return np.asarray(gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[fmt.name]), np.float32).reshape(shape)


def random_blocks(fmt: WeightFormat, out: int, n: int, seed: int = 0) -> torch.Tensor:
    """uint8 [out, row bytes]: random bytes (every code, scale and bit pattern) with finite float16 fields."""
    g = np.random.default_rng(seed)
    values, nbytes = BLOCK_SHAPES[fmt]
    if fmt in (WeightFormat.F16, WeightFormat.BF16):   # real numbers of either width
        w = g.standard_normal((out, n)).astype(np.float32)
        raw = quantize(w, GGMLType[fmt.name])
        return torch.from_numpy(raw.copy())
    raw = g.integers(0, 256, (out * n // values, nbytes), dtype=np.uint8)
    for at in HALF_FIELDS[fmt]:
        raw[:, at:at + 2] = g.uniform(0.001, 0.05, raw.shape[0]).astype(np.float16).view(np.uint8).reshape(-1, 2)
    return torch.from_numpy(raw.reshape(out, -1).copy())
