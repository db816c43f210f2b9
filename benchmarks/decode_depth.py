"""Decode speed as the context grows: openafm against llama.cpp's engine (`llama-bench -d`), same GGUF, same threads.

    python benchmarks/decode_depth.py --json                        # ~3 min on 2 cores; docs/results/decode_depth.json
    python benchmarks/decode_depth.py --json --against 22c1ef9      # also another git revision, the same rounds

A long chat or a long prompt leaves hundreds of tokens in the cache, and every new token attends to all of them: at
depth d a decode step reads d keys and values per layer and head on top of the weights. Per round, in this order:
llama-bench once over every depth (`-p 0 -n TOKENS -d D1,D2,... -r 1`: TOKENS tokens generated after D tokens already
in the context), then openafm in a fresh process over every depth (a D-token prompt prefilled, not timed; then
exactly TOKENS greedy tokens, end of sequence ignored: generate's decode rate), and with --against REV the same
worker run from REV's sources (unpacked by `git archive`, as benchmarks/matvec.py does: its kernels are built from
its own csrc; reported as `baseline`). Rounds interleave, each process warms up first (one short decode), and
medians are reported with each round's figure. Figures: decode tok/s per depth and engine, openafm / llama-bench
per depth, and the slowdown from depth 0 to the deepest (`depth_slowdown`: tok/s at 0 over tok/s at the deepest)
for each.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _common import ROOT, add_settle, emit, log, median, parser, revision_tree, settle  # noqa: E402
from _llama_bench import TOOLS, tools_missing  # noqa: E402

import torch  # noqa: E402

import openafm  # noqa: E402     (a worker imports it from its tree: PYTHONPATH comes before the installed package)
from openafm.checkpoint.packaged import default_gguf_path  # noqa: E402
from openafm.runtime.generate import GenerationStats, generate_tokens  # noqa: E402

RESULTS = ROOT / "docs" / "results" / "decode_depth.json"
DEPTHS = (0, 512, 1024, 1536)


def worker(gguf: str, depths: list[int], tokens: int) -> dict:
    """In this process: the GGUF loaded natively, then per depth a prompt of that many tokens prefilled and exactly
    `tokens` greedy tokens decoded -> {depth: decode tok/s}, the step kind and the kernels' source."""
    lm = openafm.load(gguf)
    text = lm.encode("The quick brown fox jumps over the lazy dog while the cat sleeps in the sun. " * 200)
    generate_tokens(lm.model, [text[:16]], max_new_tokens=8)                        # warm-up: kernels built, paged in
    rates, step = {}, None
    with torch.inference_mode():
        for d in depths:
            stats = GenerationStats()
            generate_tokens(lm.model, [text[:max(d, 1)]], max_new_tokens=tokens, stats=stats)
            rates[str(d)], step = stats.decode_tokens_per_second, stats.step
    return {"decode_tok_s": rates, "step": step, "openafm": str(Path(openafm.__file__).parent)}


def run_worker(src: Path, gguf: Path, depths: list[int], tokens: int) -> dict:
    """The worker in a fresh process importing openafm from `src` (a tree's src directory)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    cmd = [sys.executable, __file__, "--worker", str(gguf), "--depths", ",".join(map(str, depths)),
           "--tokens", str(tokens)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"worker from {src} failed ({done.returncode}): {done.stderr[-1500:]}")
    out = json.loads(done.stdout)
    if Path(out["openafm"]).resolve() != (src / "openafm").resolve():
        raise RuntimeError(f"the worker imported openafm from {out['openafm']}, not from {src}")
    return out


def llama_bench_depths(gguf: Path, threads: int, depths: list[int], tokens: int) -> dict[str, float]:
    """One llama-bench run over every depth -> {depth: decode tok/s} (its own environment, as _llama_bench's)."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    cmd = [str(TOOLS / "llama-bench"), "-m", str(gguf), "-t", str(threads), "-p", "0", "-n", str(tokens),
           "-d", ",".join(map(str, depths)), "-r", "1", "-o", "json"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"llama-bench failed ({done.returncode}): {done.stderr[-800:]}")
    return {str(r["n_depth"]): r["avg_ts"] for r in json.loads(done.stdout) if r["n_gen"] == tokens}


def summarise(runs: dict[str, list[dict[str, float]]], depths: list[int]) -> dict:
    deepest = str(depths[-1])
    out: dict = {}
    for engine, per_round in runs.items():
        med = {str(d): round(median([r[str(d)] for r in per_round]), 1) for d in depths}
        out[engine] = {"decode_tok_s": med, "decode_tok_s_runs": {str(d): [round(r[str(d)], 1) for r in per_round]
                                                                   for d in depths},
                       "depth_slowdown": round(med["0"] / med[deepest], 2) if "0" in med else None}
    for engine in runs:
        if engine != "llama_bench":
            out[f"{engine}_over_llama_bench"] = {str(d): round(out[engine]["decode_tok_s"][str(d)]
                                                               / out["llama_bench"]["decode_tok_s"][str(d)], 3)
                                                 for d in depths}
    return out


def git_commit(rev: str = "HEAD") -> str | None:
    """The commit REV names in this checkout (None where git cannot say); for HEAD with "+changes" when its tracked
    files (results files aside) differ from it."""
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", rev], capture_output=True, text=True)
    if head.returncode != 0:
        return None
    dirty = rev == "HEAD" and subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", "HEAD", "--", ".",
                                              ":!docs/results"], capture_output=True).returncode != 0
    return head.stdout.strip() + ("+changes" if dirty else "")


def measure(trees: dict[str, Path], gguf: Path, threads: int, depths: list[int], args) -> tuple[dict, dict]:
    """--repeats interleaved rounds: llama-bench, then a worker per tree -> (per engine one {depth: tok/s} per
    round, the step kind each tree's worker ran)."""
    runs: dict[str, list] = {"llama_bench": [], **{name: [] for name in trees}}
    steps = {}
    llama_bench_depths(gguf, threads, [0], 4)                                       # warm-up: file paged in
    for r in range(args.repeats):
        log(f"round {r + 1} of {args.repeats}")
        runs["llama_bench"].append(llama_bench_depths(gguf, threads, depths, args.tokens))
        for name, src in trees.items():
            out = run_worker(src, gguf, depths, args.tokens)
            runs[name].append(out["decode_tok_s"])
            steps[name] = out["step"]
    return runs, steps


def main() -> None:
    p = add_settle(parser(__doc__))
    p.add_argument("--depths", default=",".join(map(str, DEPTHS)), help="tokens in the context before decoding")
    p.add_argument("--tokens", type=int, default=64, help="tokens decoded at each depth (exactly)")
    p.add_argument("--against", metavar="REV", help="also time this git revision's runtime in the same rounds")
    p.add_argument("--worker", metavar="GGUF", default=None, help=argparse.SUPPRESS)    # one process's measurement
    args = p.parse_args()
    depths = [int(d) for d in args.depths.split(",")]
    if sorted(depths) != depths or depths[0] < 0 or len(set(depths)) != len(depths):
        raise SystemExit(f"--depths {args.depths!r}: give ascending distinct token counts >= 0, e.g. 0,512,1024")
    if args.worker:
        print(json.dumps(worker(args.worker, depths, args.tokens)))
        return
    missing = tools_missing()
    if missing:
        raise SystemExit(f"decode_depth compares with llama-bench: {missing}")
    threads, gguf = torch.get_num_threads(), default_gguf_path()
    with tempfile.TemporaryDirectory(prefix="openafm-decode-depth-") as tmp:
        trees = {"openafm": ROOT / "src"}
        if args.against:
            trees["baseline"] = revision_tree(args.against, Path(tmp))
        load, start = settle(args.settle), time.perf_counter()
        runs, steps = measure(trees, gguf, threads, depths, args)
    result = {**summarise(runs, depths), "depths": depths, "tokens": args.tokens, "rounds": args.repeats,
              "threads": threads, "gguf": gguf.name, "step": steps, "load_at_start": round(load, 2),
              "commit": git_commit(), "against": args.against,
              "against_commit": git_commit(args.against) if args.against else None,
              "seconds": round(time.perf_counter() - start),
              "command": "python benchmarks/decode_depth.py --json" + (f" --against {args.against}" if args.against
                                                                      else "")}
    emit(result, args.json)
    if args.json:
        RESULTS.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
