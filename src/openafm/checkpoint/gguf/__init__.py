"""GGUF import: read a GGUF file, dequantize its tensors, map a supported family's model to Hugging Face names and config.

    reader.py   header, metadata and tensor directory, with the tensor data left memory-mapped
    types.py    the numeric codes GGUF uses: metadata value types, ggml tensor types and their block sizes
    dequant.py  ggml tensor data -> float32 with whole-tensor torch ops, bit-identical to gguf-py
    families.py a GGUF of a supported family -> a Hugging Face state dict and config (names, RoPE rows un-permuted,
                stored rotary factors), with block-format matrices optionally kept as stored
    quantize.py float32 rows -> ggml block bytes: the K-quants (Q2_K..Q6_K) written from their layouts, the
                other types through gguf-py (how tests make K-quant files)
"""

from openafm.checkpoint.gguf.dequant import dequantize
from openafm.checkpoint.gguf.families import SUPPORTED_ARCHITECTURES, hf_config, load_gguf_hf, unpermute_rope_rows
from openafm.checkpoint.gguf.reader import GGUFFile, TensorInfo, read_gguf
from openafm.checkpoint.gguf.types import BLOCK_SIZES, GGMLType, ValueType

__all__ = [
    "BLOCK_SIZES", "GGMLType", "GGUFFile", "SUPPORTED_ARCHITECTURES", "TensorInfo", "ValueType", "dequantize",
    "hf_config", "load_gguf_hf", "read_gguf", "unpermute_rope_rows",
]
