"""Loading the packaged SmolLM2-135M-Instruct GGUF: openafm's reader vs gguf-py, in the same run.

Measures (best of --repeats, seconds): reading the metadata, the whole float32 state dict in Hugging
Face names (dequantized, Q/K un-permuted), and building the tokenizer from the metadata. The baseline
is gguf-py: `GGUFReader` for the metadata, then `gguf.quants.dequantize` of every tensor.

    python benchmarks/gguf_load.py            # a table
    python benchmarks/gguf_load.py --json     # one JSON object
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from collections.abc import Callable

import gguf
import torch

from openafm.checkpoint.gguf import load_gguf_hf, read_gguf
from openafm.checkpoint.packaged import default_gguf_path
from openafm.tokenizer import Tokenizer


def best_of(repeats: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
        del result
    return min(times)


def gguf_py_state_dict(path) -> dict:
    """Every tensor as a float32 numpy array (no renaming or un-permuting: slightly less work than ours)."""
    reader = gguf.GGUFReader(path)
    return {t.name: gguf.quants.dequantize(t.data, t.tensor_type) for t in reader.tensors}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    path = default_gguf_path()
    metadata = read_gguf(path).metadata

    result = {
        "file": path.name,
        "torch_threads": torch.get_num_threads(),
        "metadata_s": best_of(args.repeats, lambda: read_gguf(path).metadata),
        "state_dict_fp32_s": best_of(args.repeats, lambda: load_gguf_hf(path)),
        "tokenizer_from_metadata_s": best_of(args.repeats, lambda: Tokenizer.from_gguf_metadata(metadata)),
        "baseline_metadata_s": best_of(args.repeats, lambda: gguf.GGUFReader(path).fields),
        "baseline_state_dict_fp32_s": best_of(args.repeats, lambda: gguf_py_state_dict(path)),
    }
    result["metadata_speedup"] = result["baseline_metadata_s"] / result["metadata_s"]
    result["state_dict_speedup"] = result["baseline_state_dict_fp32_s"] / result["state_dict_fp32_s"]
    if args.json:
        print(json.dumps(result))
        return
    for key, value in result.items():
        print(f"{key:28s} {value:.3f}" if isinstance(value, float) else f"{key:28s} {value}")


if __name__ == "__main__":
    main()
