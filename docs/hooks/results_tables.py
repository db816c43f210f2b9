"""The results page's headline tables for running models: speed, parity, compression, serving, speculation, schemas.

Each function reads its files in docs/results and returns Markdown; nothing here holds a measured number.
"""

from __future__ import annotations

from results_data import at, load, num, table

DECODE_VARIANTS = {
    "openafm_native": "openafm, GGUF blocks kept as stored (default)",
    "openafm_native_int8": "openafm, blocks + int8 activations (`weights=\"native-int8\"`)",
    "openafm_fp32": "openafm, float32",
    "openafm_bf16": "openafm, bfloat16",
    "llama_cpp_q4_1": "llama.cpp (llama-cpp-python), same Q4_1 file",
    "transformers_fp32": "transformers, float32",
}


def llama_bench() -> str:
    rows = []
    for quant, label in (("q4_1", "Q4_1 (the packaged file)"), ("q4_k_m", "Q4_K_M (requantized by llama-quantize)")):
        run = f"llama_bench/{quant}"
        rows.append([label,
                     num(at("decode_llama_bench.json", f"{run}/openafm/decode_tok_s"), ".1f"),
                     num(at("decode_llama_bench.json", f"{run}/openafm_int8/decode_tok_s"), ".1f"),
                     num(at("decode_llama_bench.json", f"{run}/llama_bench/decode_tok_s"), ".1f"),
                     num(at("decode_llama_bench.json", f"{run}/openafm_decode_ratio"), ".2f", "×"),
                     num(at("decode_llama_bench.json", f"{run}/openafm/prefill_tok_s"), ".0f"),
                     num(at("decode_llama_bench.json", f"{run}/llama_bench/prefill_tok_s"), ".0f"),
                     num(at("decode_llama_bench.json", f"{run}/openafm_prefill_ratio"), ".2f", "×")])
    targets = at("decode.json", "llama_bench_targets")
    note = (f"Targets: decode ≥ {targets['decode_ratio']}× and 512-token prefill ≥ {targets['prefill_ratio']}× "
            f"of llama.cpp's own engine; {at('decode_llama_bench.json', 'threads')} threads.")
    return table(["file", "openafm decode tok/s", "openafm int8 decode tok/s", "llama-bench decode tok/s",
                  "decode ratio", "openafm prefill tok/s", "llama-bench prefill tok/s", "prefill ratio"],
                 rows, "lrrrrrrr") + "\n\n" + note


def decode_variants() -> str:
    data = load("decode.json")
    rows = [[label, num(data[key]["decode_tok_s"], ".1f"), num(data[key]["ttft_ms"], ".0f"),
             num(data["ttft_long_ms"][key], ",.0f"), num(data["load_seconds"].get(key), ".2f")]
            for key, label in DECODE_VARIANTS.items()]
    return table(["weights", "decode tok/s", f"time to first token, {data['prompt_tokens']}-token prompt (ms)",
                  f"time to first token, {data['long_prompt_tokens']}-token prompt (ms)", "load (s)"], rows, "lrrrr")


def architectures() -> str:
    rows = []
    for family, r in load("architectures.json")["families"].items():
        rows.append([f"`{family}`", num(r["max_abs_logit_diff_hf"], ".1e"), num(r["max_abs_logit_diff_gguf"], ".1e"),
                     num(r["greedy_equal_hf"] and r["greedy_equal_gguf"]),
                     num(r["native_max_abs_logit_diff_vs_dequantized"], ".1e"),
                     llama_cpp_cell(r.get("llama_cpp_max_abs_logit_diff"))])
    return table(["family", "max \\|Δ logit\\| vs transformers, HF directory", "same, GGUF file",
                  "greedy tokens equal", "GGUF blocks kept vs dequantized", "llama.cpp on the same GGUF"],
                 rows, "lrrcrr")


def llama_cpp_cell(value) -> str:
    """A number, or the benchmark's reason without its temporary paths ("not measured: llama.cpp cannot load it")."""
    return value.split(" (", 1)[0] if isinstance(value, str) else num(value, ".1e")


def compression() -> str:
    data = load("compression_table.json")
    rows = []
    for name, r in data["rows"].items():
        measured = "" if r.get("file_measured") else " *"
        rows.append([name, num(r["bits_per_weight"], ".2f"), num(r["file_mb"], ".1f") + measured,
                     num(r["rss_mb"], ".0f"), num(r["tok_s"], ".1f"), num(r["ppl"], ".4g"), num(r["task"], ".3f")])
    note = (f"Perplexity over {data['heldout_tokens']:,} held-out tokens (context {data['context']}); task: "
            f"{data['task']['name']}, {data['task']['items']} items, chance {data['task']['chance']}. "
            "`*` file size computed from the stored bits, not measured on disk.")
    return table(["compression", "bits/weight (linear)", "file MB", "RSS MB", "decode tok/s", "held-out perplexity",
                  "task accuracy"], rows, "lrrrrrr") + "\n\n" + note


def serving() -> str:
    data = load("serve_load.json")
    rows = []
    for mode, label in (("batched", "continuous batching"), ("one_at_a_time", "one at a time (`--max-batch 1`)"),
                        ("fm_session", "fm session per request")):
        runs = sorted(data[mode].values(), key=lambda r: r["concurrency"])
        rows += [[label, str(r["concurrency"]), num(r["tokens_per_s"], ".1f"), num(r["ttft_p50_ms"], ",.0f"),
                  num(r["ttft_p99_ms"], ",.0f"), num(r["itl_p50_ms"], ",.0f"), num(r["itl_p99_ms"], ",.0f"),
                  str(r["errors"])] for r in runs]
    soak = (f"Batched over one-at-a-time at concurrency 16: **{num(data['throughput_ratio_c16'], '.2f')}×** "
            f"(target ≥ {num(data['throughput_ratio_c16_target'], '.0f')}×). "
            f"Soak of {data['soak_requests']:,} mixed "
            f"requests: {data['soak_5xx']} server errors, {data['soak_lost']} lost responses; RSS "
            f"{num(data['soak_rss_start_mb'], ',.0f')} MB at the start, {num(data['soak_rss_end_mb'], ',.0f')} MB at "
            f"the end. Structured outputs on {data['structured_schemas']} held-out schemas: "
            f"{data['structured_valid']} valid, {data['structured_invalid']} invalid, "
            f"{data['structured_cut_off']} cut off.")
    return table(["server", "concurrency", "output tok/s", "TTFT p50 ms", "TTFT p99 ms", "inter-token p50 ms",
                  "inter-token p99 ms", "errors"], rows, "lrrrrrrr") + "\n\n" + soak


def speculative() -> str:
    data = load("speculative.json")
    rows = []
    for weights, label in (("float32", "float32 target"), ("native", "Q4_1 target (GGUF blocks)")):
        greedy = data[weights]["greedy"]
        plain = greedy["plain"]["decode_tok_s"]
        for gamma in data["gammas"]:
            run = greedy[f"gamma_{gamma}"]
            rows.append([label, str(gamma), num(plain, ".2f"), num(run["decode_tok_s"], ".2f"),
                         num(run["speedup"], ".2f", "×"), percent(run["acceptance_rate"]),
                         num(run["identical"])])
    json_run = data["constrained_json"]
    note = (f"Constrained JSON ({json_run['objects']} objects, γ={json_run['gamma']}): "
            f"{num(json_run['speedup'], '.2f')}× of fast-forward alone, invalid "
            f"{json_run['invalid']['fast_forward_speculative']}, objects identical: "
            f"{num(json_run['identical_objects'])}. A loaded machine: compare ratios within this table, not "
            "absolute speeds with other tables.")
    return table(["target", "γ", "plain tok/s", "speculative tok/s", "speedup", "draft acceptance",
                  "output identical"], rows, "lrrrrrc") + "\n\n" + note


def percent(value: float | None) -> str:
    return num(None if value is None else value * 100, ".1f", "%")


def schemas() -> str:
    rows = [[source, str(r["schemas"]), percent(r["compile_rate"]), percent(r.get("compile_rate_narrowed")),
             percent(r.get("valid_instance_rate")), num(r.get("invalid", r.get("invalid_instances_admitted")), "d")]
            for source, r in load("schema_coverage.json")["sources"].items()]
    return table(["schemas", "count", "compiled", "compiled, narrowed", "greedy instance valid (of those generated)",
                  "invalid outputs (or invalid instances admitted)"], rows, "lrrrrr")


def structured_finish() -> str:
    data = load("structured_finish.json")
    rows = []
    for name, r in data["configs"].items():
        kinds = ", ".join(f"{k} {v:.2f}" for k, v in r["finish_rate_by_kind"].items()) if r["subset"] == "all" else ""
        rows.append([f"`{name}`", r["subset"], f"{r['finished']}/{r['requests']}", str(r["invalid"]), kinds or "—"])
    return (table(["remedies", "types", "finished", "invalid", "finish rate by kind"], rows, "llrrl")
            + f"\n\n{data['types']} `@generable` types, greedy, a budget of {data['budget_tokens']} tokens.")
