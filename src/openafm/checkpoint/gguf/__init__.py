"""GGUF import: read a GGUF file, dequantize its tensors, map a Llama-family model to Hugging Face names and config.

    reader.py   header, metadata and tensor directory, with the tensor data left memory-mapped
    types.py    the numeric codes GGUF uses: metadata value types, ggml tensor types and their block sizes
    dequant.py  ggml tensor data -> float32 with whole-tensor torch ops, bit-identical to gguf-py
    quantize.py float32 rows -> ggml block bytes: the K-quants (Q2_K..Q6_K) written from their layouts, the
                other types through gguf-py (how tests make K-quant files)
    llama.py    a Llama-family GGUF -> a Hugging Face Llama state dict and config (names, RoPE rows un-permuted),
                with block-format matrices optionally kept as stored
"""

from openafm.checkpoint.gguf.dequant import dequantize
from openafm.checkpoint.gguf.llama import (SUPPORTED_ARCHITECTURES, llama_config, load_llama_gguf,
                                            load_llama_gguf_blocks, unpermute_rope_rows)
from openafm.checkpoint.gguf.reader import GGUFFile, TensorInfo, read_gguf
from openafm.checkpoint.gguf.types import BLOCK_SIZES, GGMLType, ValueType

__all__ = [
    "BLOCK_SIZES", "GGMLType", "GGUFFile", "SUPPORTED_ARCHITECTURES", "TensorInfo", "ValueType", "dequantize",
    "llama_config", "load_llama_gguf", "load_llama_gguf_blocks", "read_gguf", "unpermute_rope_rows",
]
