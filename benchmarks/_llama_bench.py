"""openafm against llama.cpp's own engine (`llama-bench`, not the Python binding) on the same GGUF files.

`make bench-deps` compiles llama-bench and llama-quantize from the llama.cpp sources vendored in the
llama-cpp-python sdist. The default model's Q4_1 file is compared as shipped, and requantized to Q4_K_M by
llama-quantize (`--allow-requantize`: the wheel ships no float file) — the quantization most downloaded GGUF
files use. Per file and round: llama-bench once (`-p 512 -n 64 -r 1`, the same threads), then openafm's prefill of
the same 512 tokens and its decode of 64 tokens after a short prompt; rounds interleave, medians are reported.

openafm's prefill is timed as llama-bench times its pp512: the 512-token forward pass into an empty cache (the
first new token's logits included). Its decode is generate's decode rate (tokens after the first / their time).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from _common import log, median
from openafm.runtime.generate import GenerationStats, generate_tokens

LLAMA_CPP_PYTHON = "0.3.36"           # the Makefile's LLAMA_CPP_PYTHON
TOOLS = Path.home() / ".cache" / "openafm" / f"llama.cpp-{LLAMA_CPP_PYTHON}" / "bin"
WORK = Path.home() / ".cache" / "openafm" / "bench"


def tools_missing() -> str | None:
    """None when llama-bench and llama-quantize are built; else what to run."""
    missing = [t for t in ("llama-bench", "llama-quantize") if not (TOOLS / t).is_file()]
    return f"{', '.join(missing)} not in {TOOLS}; run `make bench-deps`" if missing else None


def requantized(source: Path, qtype: str) -> Path:
    """`source` requantized to `qtype` by llama-quantize (cached beside the other benchmark files)."""
    WORK.mkdir(parents=True, exist_ok=True)
    out = WORK / f"{source.stem}.requant-{qtype}.gguf"
    if not out.is_file():
        log(f"llama-quantize {source.name} -> {out.name} ...")
        done = subprocess.run([str(TOOLS / "llama-quantize"), "--allow-requantize", str(source), str(out), qtype, "2"],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"llama-quantize failed ({done.returncode}): {done.stderr[-800:]}")
    return out


def llama_bench(path: Path, threads: int, prompt: int, tokens: int) -> dict:
    """One llama-bench run (-r 1) -> {"prefill_tok_s", "decode_tok_s"}. Its own environment: without the
    OMP_WAIT_POLICY=PASSIVE decode.py sets for the in-process binding, which makes llama-bench's decode 3x slower
    here (40 vs 134 tok/s); llama.cpp is measured at its best."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    done = subprocess.run([str(TOOLS / "llama-bench"), "-m", str(path), "-t", str(threads), "-p", str(prompt),
                           "-n", str(tokens), "-r", "1", "-o", "json"], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"llama-bench failed ({done.returncode}): {done.stderr[-800:]}")
    rows = json.loads(done.stdout)
    pp = next(r for r in rows if r["n_prompt"] == prompt and r["n_gen"] == 0)
    tg = next(r for r in rows if r["n_gen"] == tokens and r["n_prompt"] == 0)
    return {"prefill_tok_s": pp["avg_ts"], "decode_tok_s": tg["avg_ts"]}


def openafm_bench(model, short: list[int], long: list[int], tokens: int) -> dict:
    """openafm's prefill of `long` (one forward into an empty cache) and decode rate after `short`."""
    prefill = GenerationStats()
    generate_tokens(model, [long], max_new_tokens=1, stats=prefill)
    decode = GenerationStats()
    generate_tokens(model, [short], max_new_tokens=tokens, stats=decode)
    return {"prefill_tok_s": len(long) / prefill.prefill_seconds, "decode_tok_s": decode.decode_tokens_per_second,
            "step": decode.step}


def compare(files: dict[str, Path], loaders: dict, short: list[int], long: list[int], tokens: int, threads: int,
            repeats: int) -> dict:
    """Interleaved rounds over every file: {name: {engine: {metric: median, metric_runs: [...]}}} and ratios.
    `loaders`: openafm variant name -> (path -> loaded model); "openafm" (the default weights) must be one."""
    models = {(name, v): load(path) for name, path in files.items() for v, load in loaders.items()}
    engines = [*loaders, "llama_bench"]
    runs = {name: {e: [] for e in engines} for name in files}
    for (name, _), lm in models.items():                    # warm-up: kernels built, pages resident
        openafm_bench(lm.model, short, long, 4)
    for path in files.values():
        llama_bench(path, threads, 32, 4)
    for r in range(repeats):
        log(f"  round {r + 1}/{repeats}")
        for name, path in files.items():
            runs[name]["llama_bench"].append(llama_bench(path, threads, len(long), tokens))
            for v in loaders:
                runs[name][v].append(openafm_bench(models[name, v].model, short, long, tokens))
    return {name: _row(by_engine, {v: models[name, v] for v in loaders}, files[name]) for name, by_engine in runs.items()}


def _row(by_engine: dict, models: dict, path: Path) -> dict:
    metrics = ("prefill_tok_s", "decode_tok_s")
    row = {engine: {**{m: median([x[m] for x in xs]) for m in metrics},
                    **{f"{m}_runs": [round(x[m], 1) for x in xs] for m in metrics}}
           for engine, xs in by_engine.items()}
    for v, lm in models.items():
        row[v]["step"], row[v]["source"] = by_engine[v][0]["step"], lm.source
        row[f"{v}_decode_ratio"] = row[v]["decode_tok_s"] / row["llama_bench"]["decode_tok_s"]
        row[f"{v}_prefill_ratio"] = row[v]["prefill_tok_s"] / row["llama_bench"]["prefill_tok_s"]
    row["decode_ratio"], row["prefill_ratio"] = row["openafm_decode_ratio"], row["openafm_prefill_ratio"]
    row["file_bytes"] = os.path.getsize(path)
    return row
