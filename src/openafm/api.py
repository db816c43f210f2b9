"""The front door: `openafm.load(name)` -> a `LanguageModel` (a model, its tokenizer and generation).

Loading itself is a checkpoint concern (`openafm.checkpoint.load`: one registry of model sources); text
generation over a loaded model is the runtime's (`openafm.runtime.language_model`). This module joins them
and is imported by nothing below it: the CLI, the server and users call it.
"""

from __future__ import annotations

from pathlib import Path

import torch

from openafm.checkpoint.load import available_models, load_model
from openafm.checkpoint.packaged import DEFAULT_MODEL, PACKAGED
from openafm.runtime.language_model import LanguageModel

__all__ = ["DEFAULT_MODEL", "PACKAGED", "LanguageModel", "available_models", "load"]


def load(name_or_path: str | Path = DEFAULT_MODEL, *, dtype: torch.dtype | str = torch.float32,
         device: str | torch.device = "cpu", seed: int = 0, packed_kernel: str | None = None,
         weights: str = "auto") -> LanguageModel:
    """A packaged model name, a preset name (randomly initialised from `seed`), a .gguf file, a native
    openafm checkpoint directory, a Hugging Face model directory (any of the ten families openafm.checkpoint.families
    maps), or a compressed checkpoint directory
    (checkpoint.compressed; it runs from its packed weights with `packed_kernel` "cpu" — the AVX2 kernel, the
    default — or "torch", and only in float32 on the CPU).

    weights: how a GGUF file's quantized matrices are held: "auto" (the default: "native" — kept as
    stored, Q8_0/Q4_0/Q4_1, run by the integer kernels — in float32 on the CPU, else dequantized),
    "native", "native-int8" (int8 activations like llama.cpp: faster, less exact), "float32" or "bfloat16"
    (dequantized at load). Train from "float32" weights."""
    return LanguageModel.of(load_model(name_or_path, dtype=dtype, device=device, seed=seed,
                                       packed_kernel=packed_kernel, weights=weights))
