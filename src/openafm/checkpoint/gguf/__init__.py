"""GGUF import: a fast reader (metadata, tensor directory, memory-mapped data), vectorized
dequantization, and the Llama-family mapping to Hugging Face names and config."""

from openafm.checkpoint.gguf.dequant import dequantize
from openafm.checkpoint.gguf.llama import SUPPORTED_ARCHITECTURES, llama_config, load_llama_gguf, unpermute_rope_rows
from openafm.checkpoint.gguf.reader import GGUFFile, TensorInfo, read_gguf
from openafm.checkpoint.gguf.types import BLOCK_SIZES, GGMLType, ValueType

__all__ = [
    "BLOCK_SIZES", "GGMLType", "GGUFFile", "SUPPORTED_ARCHITECTURES", "TensorInfo", "ValueType", "dequantize",
    "llama_config", "load_llama_gguf", "read_gguf", "unpermute_rope_rows",
]
