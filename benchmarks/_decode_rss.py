"""One weight format's resident memory, in a process of its own (benchmarks/decode.py starts one per format).

Reads VmRSS after the imports, loads the model, generates a few tokens, and reads VmRSS and VmHWM again; prints one
JSON object. `llama_cpp` loads the same GGUF with llama-cpp-python instead.

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
from openafm.runtime.generate import GenerationStats, generate_tokens

PROMPT = "The history of the Roman Empire spans more than a thousand years."
LLAMA_CPP = "llama_cpp"


def openafm_memory(weights: Weights, tokens: int) -> dict:
    before = resident_bytes()
    lm, how = load(weights)
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
    args = p.parse_args()
    if args.format == LLAMA_CPP:
        row = llama_cpp_memory(args.tokens, args.threads or len(os.sched_getaffinity(0)))
    else:
        row = openafm_memory(Weights(args.format), args.tokens)
    print(json.dumps({"model": MODEL, "format": args.format, "tokens": args.tokens, **row}))


if __name__ == "__main__":
    main()
