"""The timed parts of benchmarks/decode.py: one run function per engine (openafm, transformers, llama.cpp) over the
same prompt token ids, interleaved rounds, greedy agreement, memory bandwidth, and resident memory measured in a
fresh process per format (benchmarks/_decode_rss.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from _common import median
from _decode_measures import agreement
from openafm.runtime.generate import GenerationStats, generate_tokens

PROMPT = ("The history of the Roman Empire spans more than a thousand years. Historians usually divide it "
          "into several periods, and the first of these begins with")
LONG_TEXT = [
    ("The lighthouse stood on a spit of rock at the mouth of the harbour, and for forty years the same family kept "
     "its lamp burning through storms, fog and the long grey winters of the north."),
    ("Bread is made from flour, water, salt and yeast; the dough is kneaded, left to rise, shaped, proved a second "
     "time and baked in a hot oven until the crust is brown and sounds hollow when tapped."),
    ("A river carries sediment from the mountains to the sea. Where it slows, on the inside of a bend or at its "
     "mouth, the sediment settles, building sandbars, deltas and the fertile plains that farmers prize."),
    ("In the early days of computing, programs were entered with switches and punched cards, and a single error "
     "could cost a day of waiting for the machine to become free again."),
]
AGREEMENT_PROMPTS = ["The capital of France is", "Write a short poem about the sea.\n",
                     "def fibonacci(n):\n", "Three facts about the Moon:\n1.", "Once upon a time, in a small village,"]

# A run: (prompt token ids, new tokens) -> (seconds to the first token, decode tokens/s after it, the tokens).
Variant = Callable[[list[int], int], tuple[float, float, list[int]]]


def long_prompt_ids(lm, tokens: int) -> list[int]:
    """Exactly `tokens` ids of English prose (the paragraphs repeated as often as needed)."""
    ids: list[int] = []
    while len(ids) < tokens:
        ids += lm.encode(" ".join(LONG_TEXT) + "\n\n")
    return ids[:tokens]


def openafm_variant(model) -> Variant:
    def run(ids, tokens):
        stats = GenerationStats()
        out = generate_tokens(model, [ids], max_new_tokens=tokens, stats=stats)[0]
        return stats.time_to_first_token, stats.decode_tokens_per_second, out.token_ids
    return run


def transformers_variant(model) -> Variant:
    def run(ids, tokens):
        x = torch.tensor([ids])
        with torch.inference_mode():
            t = time.perf_counter()
            model.generate(x, max_new_tokens=1, do_sample=False)
            ttft = time.perf_counter() - t
            t = time.perf_counter()
            out = model.generate(x, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False)
            total = time.perf_counter() - t
        return ttft, (tokens - 1) / (total - ttft), out[0, len(ids):].tolist()
    return run


def llama_cpp_variant(gguf: Path, threads: int, n_ctx: int) -> tuple[Variant | None, str | None]:
    """llama.cpp on the same GGUF with `threads` threads (prefill too) -> (run, None), or (None, why not)."""
    try:
        import llama_cpp  # heavy optional dependency, benchmark-only: built by `make bench-deps`
    except ImportError as e:
        return None, f"llama_cpp is not importable ({e}); run `make bench-deps` to build llama-cpp-python"
    llm = llama_cpp.Llama(model_path=str(gguf), n_threads=threads, n_threads_batch=threads, n_ctx=n_ctx,
                          verbose=False)

    def run(ids, tokens):
        llm.reset()                                    # no prefix reuse from the previous call's KV cache
        out, first = [], None
        t = time.perf_counter()
        for token in llm.generate(ids, temp=0.0, reset=True):      # greedy; EOS does not stop generate()
            out.append(token)
            if first is None:
                first = time.perf_counter() - t
            if len(out) == tokens:
                break
        total = time.perf_counter() - t
        return first, (tokens - 1) / (total - first), out
    return run, None


def timed_rounds(variants: dict[str, Variant], prompts: dict[str, list[int]], tokens: int, repeats: int,
                 warmup: int = 1) -> dict[str, dict[str, dict]]:
    """Every variant on every prompt once per round, round after round (drift hits all alike).
    -> {variant: {prompt kind: {ttft_ms, decode_tok_s (medians), their runs, tokens (of the first run)}}}"""
    for _ in range(warmup):
        for fn in variants.values():
            for ids in prompts.values():
                fn(ids, tokens)
    runs = {name: {kind: [] for kind in prompts} for name in variants}
    for _ in range(repeats):
        for kind, ids in prompts.items():
            for name, fn in variants.items():
                runs[name][kind].append(fn(ids, tokens))
    return {name: {kind: {"ttft_ms": 1e3 * median([r[0] for r in rs]),
                          "decode_tok_s": median([r[1] for r in rs]),
                          "ttft_ms_runs": [round(1e3 * r[0], 1) for r in rs],
                          "decode_tok_s_runs": [round(r[1], 2) for r in rs],
                          "tokens": rs[0][2]}
                   for kind, rs in by_kind.items()}
            for name, by_kind in runs.items()}


def agreement_rows(variants: dict[str, Variant], prompts: list[list[int]], reference: str,
                   tokens: int) -> dict[str, dict]:
    """Greedy tokens of each variant vs the reference's on each prompt: the share of identical positions (all
    prompts together) and the first divergence per prompt (None: identical)."""
    ref = [variants[reference](ids, tokens)[2] for ids in prompts]
    rows = {}
    for name, fn in variants.items():
        if name == reference:
            continue
        found = [agreement(r, fn(ids, tokens)[2]) for ids, r in zip(prompts, ref)]
        rows[name] = {"identical_fraction": sum(a.identical_fraction for a in found) / len(found),
                      "first_divergence": [a.first_divergence for a in found],
                      "prompts_identical": sum(a.first_divergence is None for a in found)}
    return {"reference": reference, "prompts": len(prompts), "tokens": tokens, **rows}


def measure_bandwidth(megabytes: int = 512, repeats: int = 7) -> float:
    """Best read bandwidth (bytes/s) over a large fp32 matrix-vector product and a plain sum."""
    n = megabytes * 2**20 // 4
    big = torch.randn(n)
    mat, vec = big.view(-1, 1024), torch.randn(1024)
    best = 0.0
    for fn in (lambda: torch.mv(mat, vec), lambda: big.sum()):
        fn()
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        best = max(best, big.numel() * 4 / median(times))
    return best


def gguf_tensor_bytes(path: Path) -> int:
    """Bytes of all tensors in a GGUF file: what llama.cpp reads per decode step (SmolLM2 ties its head to the
    Q8_0 token embedding, read whole)."""
    import gguf  # heavy optional dependency (transformers' GGUF reader), only for this figure

    return sum(int(t.n_bytes) for t in gguf.GGUFReader(str(path)).tensors)


def measure_rss(fmt: str, threads: int, tokens: int = 8, model: str | None = None) -> dict:
    """benchmarks/_decode_rss.py FORMAT in a fresh process -> its JSON row (`model`: a name or GGUF path)."""
    script = Path(__file__).with_name("_decode_rss.py")
    done = subprocess.run([sys.executable, str(script), fmt, "--tokens", str(tokens), "--threads", str(threads),
                           *(["--model", model] if model else [])], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{script.name} {fmt} exited with {done.returncode}: {done.stderr[-600:]}")
    return json.loads(done.stdout)
