"""One weight format's resident memory, in a process of its own (benchmarks/decode.py starts one per format).

Reads VmRSS after the imports and a warm-up that leaves the model out (the CPU kernels built and loaded, a tiny model
built on the meta device and run once: torch's one-time set-up, ~65 MB here, is the runtime's, not the model's),
loads the model, generates a few tokens, and reads VmRSS and VmHWM again; prints one JSON object. The runtime's own
resident size (Python, torch, the kernels) is `rss_before_load_bytes`. `llama_cpp` loads the same GGUF with
llama-cpp-python instead.

    python benchmarks/_decode_rss.py float32 --tokens 8
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _decode_measures import MODEL, Weights, load, resident_bytes, weight_format
from openafm.checkpoint.packaged import default_gguf_path
from openafm.models.build import build_model
from openafm.runtime.generate import GenerationStats, generate_tokens

PROMPT = "The history of the Roman Empire spans more than a thousand years."
LLAMA_CPP = "llama_cpp"


def warm_up_runtime() -> None:
    """torch's and openafm's one-time set-up, without the measured model (see the module docstring)."""
    import openafm
    from openafm.nn.packed_kernel import load_kernel
    load_kernel()
    tiny = openafm.load("smollm2-tiny")
    build_model(tiny.model.kv_plan, device="meta")
    generate_tokens(tiny.model, [[1, 2, 3]], max_new_tokens=2)
    del tiny


def openafm_memory(weights: Weights, tokens: int, model: str = MODEL) -> dict:
    warm_up_runtime()
    before = resident_bytes()
    lm, how = load(weights, model)
    loaded = resident_bytes()
    stats = GenerationStats()
    generate_tokens(lm.model, [lm.encode(PROMPT)], max_new_tokens=tokens, stats=stats)
    return {"loaded_by": how, "weight_format": weight_format(lm.model), "kv_cache_bytes": stats.kv_cache_bytes,
            "context_tokens": stats.prompt_tokens + stats.new_tokens, **_rows(before, loaded, resident_bytes())}


def llama_cpp_memory(tokens: int, threads: int) -> dict:
    import llama_cpp  # heavy optional dependency (make bench-deps), only for this format

    before = resident_bytes()
    llm = llama_cpp.Llama(model_path=str(default_gguf_path()), n_threads=threads, n_ctx=1024, verbose=False)
    loaded = resident_bytes()
    ids = llm.tokenize(PROMPT.encode(), add_bos=False)
    for i, _ in enumerate(llm.generate(ids, temp=0.0, reset=True)):
        if i + 1 == tokens:
            break
    return {"loaded_by": "llama_cpp.Llama(n_ctx=1024)", "weight_format": "gguf", "n_ctx": 1024,
            **_rows(before, loaded, resident_bytes())}


def _rows(before: dict, loaded: dict, after: dict) -> dict:
    return {"rss_before_load_bytes": before["rss"], "rss_after_load_bytes": loaded["rss"],
            "rss_after_generate_bytes": after["rss"], "hwm_bytes": after["hwm"],
            "model_rss_bytes": after["rss"] - before["rss"], "model_peak_bytes": after["hwm"] - before["rss"],
            "model_rss_anon_bytes": after["anon"] - before["anon"],     # heap: tensors, caches
            "model_rss_file_bytes": after["file"] - before["file"]}     # mapped files: the GGUF if kept mapped


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("format", choices=[w.value for w in Weights if w is not Weights.DEFAULT] + [LLAMA_CPP])
    p.add_argument("--tokens", type=int, default=8)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--model", default=MODEL, help="a model name or GGUF path (openafm formats only)")
    args = p.parse_args()
    if args.format == LLAMA_CPP:
        row = llama_cpp_memory(args.tokens, args.threads or len(os.sched_getaffinity(0)))
    else:
        row = openafm_memory(Weights(args.format), args.tokens, args.model)
    print(json.dumps({"model": args.model, "format": args.format, "tokens": args.tokens, **row}))


if __name__ == "__main__":
    main()
