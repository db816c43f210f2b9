"""`openafm models --inspect FILE`: what a model file is, and what openafm will run of it natively.

Reads only metadata and the tensor directory (no weights are dequantized): the family and its plan, sizes,
the storage type of every tensor, the tokenizer and chat template, which matrices `weights="native"` keeps as
stored and which it dequantizes, and whether decoding runs the fused C++ step or the eager module graph.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

from openafm.checkpoint.block_model import NATIVE_TYPES
from openafm.checkpoint.families import config_from_hf
from openafm.checkpoint.gguf import GGMLType, hf_config, read_gguf
from openafm.checkpoint.hf import is_hf_checkpoint
from openafm.errors import CheckpointError
from openafm.models.plan import DecoderConfig, Features
from openafm.runtime.fused_step import config_reason


def inspect_file(path: str | Path) -> dict[str, Any]:
    """A GGUF file or a Hugging Face directory -> a JSON-ready description (see the module docstring)."""
    path = Path(path).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return _inspect_gguf(path)
    if path.is_dir() and is_hf_checkpoint(path):
        hf = json.loads((path / "config.json").read_text())
        return {"path": str(path), "format": "Hugging Face directory", **_plan(config_from_hf(hf, str(path)), hf)}
    raise CheckpointError(f"{path}: not a .gguf file or a Hugging Face directory (config.json + safetensors)")


def _inspect_gguf(path: Path) -> dict[str, Any]:
    gguf = read_gguf(path)
    hf = hf_config(gguf)
    config = config_from_hf(hf, str(path))
    types = collections.Counter(info.type.name for info in gguf.tensors.values())
    matrices = [info for info in gguf.tensors.values() if len(info.shape) in (2, 3)]    # 3: stacked experts
    native = collections.Counter(i.type.name for i in matrices if i.type in NATIVE_TYPES)
    dequantized = collections.Counter(i.type.name for i in matrices
                                      if i.type not in NATIVE_TYPES and i.type not in (GGMLType.F32,))
    meta = gguf.metadata
    template = meta.get("tokenizer.chat_template")
    return {
        "path": str(path), "format": f"GGUF v{gguf.version}", "file_bytes": path.stat().st_size,
        "name": meta.get("general.name"), "architecture": meta.get("general.architecture"),
        **_plan(config, hf),
        "tensor_types": dict(types.most_common()),
        "native": {"kept_as_stored": dict(native.most_common()),
                   "dequantized_to_float32": dict(dequantized.most_common())},
        "tokenizer": {"model": meta.get("tokenizer.ggml.model"), "pre": meta.get("tokenizer.ggml.pre"),
                      "tokens": len(meta.get("tokenizer.ggml.tokens") or [])},
        "chat_template": None if template is None else (template[:80].replace("\n", "\\n")
                                                         + ("..." if len(template) > 80 else "")),
    }


def _plan(config: DecoderConfig, hf: dict[str, Any]) -> dict[str, Any]:
    plain = Features()
    features = {k: v.value if hasattr(v, "value") else v for k, v in vars(config.features).items()
                if getattr(plain, k) != v}
    windows = sorted({s.window for s in config.layers if s.window is not None})
    return {
        "model_type": hf["model_type"], "parameters": config.param_count(),
        "active_parameters": config.param_count(active=True),
        "layers": config.n_layers, "dim": config.dim, "heads": config.n_heads, "kv_heads": config.n_kv_heads,
        "head_dim": config.attn_head_dim, "ffn_hidden": config.ffn_hidden, "vocab": config.vocab_size,
        "context": config.max_seq_len, "sliding_windows": windows,
        "experts": None if config.moe is None else {"n": config.moe.n_experts, "top_k": config.moe.top_k,
                                                    "shared": config.moe.shared_hidden is not None},
        "rope_scaling": None if config.rope_scaling is None else config.rope_scaling.kind,
        "features": features or "none (the Llama block)",
        "decode_step": "fused (C++)" if (why := config_reason(config)) is None else f"eager: {why}",
    }


def print_inspection(info: dict[str, Any]) -> None:
    """The description as aligned 'key: value' lines (nested dicts flattened one level)."""
    for key, value in info.items():
        if isinstance(value, dict) and value and all(not isinstance(v, dict) for v in value.values()):
            value = ", ".join(f"{k} {v}" for k, v in value.items())
        elif isinstance(value, dict):
            value = "; ".join(f"{k}: {v}" for k, v in value.items())
        print(f"{key:>18s}: {value}")
