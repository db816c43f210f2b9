"""Exported QAT weights on disk: {tensor name: QuantizedWeight} as one safetensors file.

    "<name>.codes"  uint8 [out, in]     codes 0 .. 2^bits - 1 (one byte each; bit packing is a later stage)
    "<name>.scale"  float32 [] or [out]
    metadata "quantized": JSON {name: {"zero": z, "bits": b, "levels": "balanced" | "unbalanced"}}
    metadata "info":      JSON about the run (source model, spec, steps) — free-form, written by the caller
"""

from __future__ import annotations

import json
from pathlib import Path

from safetensors import safe_open

from openafm.checkpoint.atomic import save_safetensors_atomic
from openafm.checkpoint.tagged import read_tagged_metadata
from openafm.compress.levels import Levels
from openafm.compress.quantized import QuantizedWeight

FORMAT = "openafm-quantized-weights"


def save_quantized(path: str | Path, weights: dict[str, QuantizedWeight], info: dict | None = None) -> Path:
    if not weights:
        raise ValueError("no quantized weights to save")
    tensors, layout = {}, {}
    for name, q in weights.items():
        tensors[f"{name}.codes"] = q.codes.contiguous().cpu()
        tensors[f"{name}.scale"] = q.scale.contiguous().cpu()
        layout[name] = {"zero": q.zero, "bits": q.bits, "levels": Levels(q.levels).value}
    return save_safetensors_atomic(tensors, path, {"format": FORMAT, "quantized": json.dumps(layout),
                                                   "info": json.dumps(info or {})})


def load_quantized(path: str | Path) -> tuple[dict[str, QuantizedWeight], dict]:
    """-> ({name: QuantizedWeight}, info)."""
    meta = read_tagged_metadata(path, fmt=FORMAT, version=None, what="quantized-weights")
    with safe_open(str(path), framework="pt") as f:
        layout = json.loads(meta["quantized"])
        weights = {name: QuantizedWeight(codes=f.get_tensor(f"{name}.codes"), scale=f.get_tensor(f"{name}.scale"),
                                          zero=float(d["zero"]), bits=int(d["bits"]), levels=Levels(d["levels"]))
                   for name, d in layout.items()}
    return weights, json.loads(meta.get("info", "{}"))
