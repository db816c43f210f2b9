"""`openafm serve` side by side with llama.cpp's own server (`llama-server`) on the same GGUF, and against openafm's
in-process decode of the same prompts.

    make bench-deps                               # builds llama-server from the sources the llama-cpp-python sdist vendors
    python benchmarks/serve_llama.py --json       # ~6 min on 2 cores; writes docs/results/serve_llama.json

Both servers run at once on loopback with the same threads (`--threads`), the raw SmolLM2-135M-Instruct GGUF
(the file openafm's default model is folded onto, as llama-server reads it), 16 parallel slots (`llama-server -np 16
-cb`; `openafm serve --max-batch 16`) and are driven by the same load script (benchmarks/serve_load.py's streaming
client: chat completions, greedy, `--max-tokens` tokens, usage from the stream). Per concurrency c in 1, 4, 16:
`max(8, 2c)` requests, the two servers alternating for `--rounds` rounds; the aggregate tokens/s is output tokens
over the wall time of the burst, TTFT and ITL are measured at the client; medians over rounds.

In process: the same prompts (chat-templated) through `generate` in this process, one at a time: output tokens /
seconds from the call to the last token, the c = 1 server figure's counterpart (`serve_c1_over_inprocess`), with
its time to first token (`serve_ttft_over_inprocess`).

    python benchmarks/serve_llama.py --json --weights native-int8    # writes docs/results/serve_llama_int8.json

`--weights native-int8` runs openafm (server and in-process alike) with its activations rounded to int8 per block of
32, as llama.cpp's kernels compute; the default `native` keeps them float32.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _common import add_settle, emit, log, median, parser, settle  # noqa: E402
from _llama_bench import TOOLS  # noqa: E402
from serve_load import MODEL, QUESTIONS, Server, load, wait_healthy  # noqa: E402

import torch  # noqa: E402

import openafm  # noqa: E402
from openafm.checkpoint.packaged import default_gguf_path  # noqa: E402
from openafm.runtime.generate import GenerationStats  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results" / "serve_llama.json"
WEIGHTS = ("native", "native-int8")
LEVELS = (1, 4, 16)


class LlamaServer:
    """llama-server on the GGUF, `slots` parallel sequences of `per_slot` context each, continuous batching."""

    def __init__(self, port: int, gguf: Path, threads: int, slots: int = 16, per_slot: int = 1024):
        self.url = f"http://127.0.0.1:{port}"
        binary = TOOLS / "llama-server"
        if not binary.is_file():
            raise SystemExit(f"{binary} is missing: run `make bench-deps`")
        env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}     # llama.cpp at its best
        self.proc = subprocess.Popen([str(binary), "-m", str(gguf), "--port", str(port), "-t", str(threads),
                                      "-np", str(slots), "-cb", "-c", str(slots * per_slot), "--log-disable"],
                                     env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_healthy(self.url, self.proc, 60, "llama-server")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def in_process(lm, max_tokens: int, rounds: int) -> dict:
    """Each question through `generate` in this process -> median output tok/s (tokens / call-to-last-token s)
    and time to first token."""
    rates, ttfts = [], []
    prompts = [lm.chat_prompt(q) for q in QUESTIONS]
    for r in range(rounds + 1):                                         # the first round warms up
        for prompt in prompts:
            stats, stamps = GenerationStats(), []
            start = time.perf_counter()
            lm.generate(prompt, max_tokens=max_tokens, stats=stats, on_token=lambda e: stamps.append(time.perf_counter()))
            if r and stamps:
                rates.append(stats.new_tokens / (stamps[-1] - start))
                ttfts.append(stamps[0] - start)
    return {"tok_s": round(median(rates), 1), "ttft_ms": round(1e3 * median(ttfts), 1), "requests": len(rates)}


def level_figures(runs: list[dict]) -> dict:
    """Medians over rounds of one server at one concurrency."""
    keys = ("tokens_per_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms")
    out = {k: round(median([r[k] for r in runs if r[k] is not None]), 2) for k in keys}
    out["errors"] = sum(r["errors"] for r in runs)
    out["requests"] = sum(r["requests"] for r in runs)
    return out


def main() -> None:
    p = add_settle(parser(__doc__))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--weights", choices=WEIGHTS, default="native",
                   help="how openafm holds the GGUF's blocks: native (float32 activations) or native-int8 (activations "
                        "rounded to int8, as llama.cpp does); the latter writes serve_llama_int8.json")
    args = p.parse_args()
    load_avg = settle(args.settle)
    gguf, t0 = default_gguf_path(), time.perf_counter()
    ours = Server(8741, "--model", MODEL, "--max-batch", "16", "--threads", str(args.threads), "--weights", args.weights)
    theirs = LlamaServer(8742, gguf, args.threads)
    servers = {"openafm": ours.url, "llama_server": theirs.url}
    runs: dict[str, dict[int, list[dict]]] = {name: {c: [] for c in LEVELS} for name in servers}
    try:
        for url in servers.values():                                    # warm-up, alike
            asyncio.run(load(url, 4, 8, args.max_tokens))
        for r in range(args.rounds):
            log(f"round {r + 1} of {args.rounds}")
            for c in LEVELS:
                for name, url in servers.items():
                    runs[name][c].append(asyncio.run(load(url, c, max(8, 2 * c), args.max_tokens)))
    finally:
        ours.stop()
        theirs.stop()
    lm = openafm.load(MODEL, weights=args.weights)
    inproc = in_process(lm, args.max_tokens, args.rounds)
    figures = {name: {f"c{c}": level_figures(runs[name][c]) for c in LEVELS} for name in servers}
    ratio = {f"c{c}_over_llama_server": round(figures["openafm"][f"c{c}"]["tokens_per_s"]
                                              / figures["llama_server"][f"c{c}"]["tokens_per_s"], 3) for c in LEVELS}
    c1 = runs["openafm"][1]
    served_rate = median([x["output_tokens"] / x["wall_s"] for x in c1])       # one request at a time
    mean_tokens = sum(x["output_tokens"] for x in c1) / sum(x["requests"] for x in c1)
    result = {**ratio,
              "c16_over_c1": round(figures["openafm"]["c16"]["tokens_per_s"] / figures["openafm"]["c1"]["tokens_per_s"], 3),
              "serve_c1_over_inprocess": round(served_rate / inproc["tok_s"], 3),
              "serve_ttft_over_inprocess": round(figures["openafm"]["c1"]["ttft_p50_ms"] / inproc["ttft_ms"], 3),
              "openafm": figures["openafm"], "llama_server": figures["llama_server"], "in_process": inproc,
              "mean_output_tokens_c1": round(mean_tokens, 1), "model": MODEL, "gguf": gguf.name,
              "max_tokens": args.max_tokens, "rounds": args.rounds, "threads": args.threads,
              "weights": args.weights, "load_at_start": round(load_avg, 2), "seconds": round(time.perf_counter() - t0),
              "command": "python benchmarks/serve_llama.py --json" + ("" if args.weights == "native"
                                                                       else f" --weights {args.weights}")}
    emit(result, args.json)
    if args.json:
        (RESULTS if args.weights == "native" else RESULTS.with_name("serve_llama_int8.json")).write_text(
            json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
