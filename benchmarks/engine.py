"""One request through the continuous-batching engine vs the single-stream `generate_tokens` on the same prompts:
what routing every caller through one engine would cost a lone request (target >= 0.95x).

    python benchmarks/engine.py --json          # ~2 min on 2 cores; writes docs/results/engine.json

Both run greedy on the default model with the fused decode step, on the same chat prompts and token budget, warmed
alike (every prompt once), then interleaved prompt by prompt for `--rounds` rounds. Decode tok/s = tokens after
the first (an end-of-sequence token counted, as both decode it) / seconds from the first token to the last (the
engine's from its events' timestamps, generate's from its stats), summed over the prompts; time to first token is reported beside it. Outputs are compared token for token.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, log, median, parser  # noqa: E402
from speculative import PROMPTS  # noqa: E402

import torch  # noqa: E402

import openafm  # noqa: E402
from openafm.runtime.engine import Engine, EngineConfig, RowRequest  # noqa: E402
from openafm.runtime.generate import GenerationStats, generate_tokens  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results" / "engine.json"


def through_engine(engine: Engine, prompt: list[int], new: int, constraint=None) -> dict:
    """One request, alone in the engine -> its tokens (the end-of-sequence token left out), the tokens decoded (it
    counted), time to first token, seconds from the first token to the last, and its speculation counts."""
    stamps, tokens, done, last = [], [], threading.Event(), []

    def on_event(e):
        if e.token_id >= 0:
            stamps.append(time.perf_counter())
            if e.finish != "eos":
                tokens.append(e.token_id)
        if e.finish is not None:
            last.append(e)
            done.set()
    start = time.perf_counter()
    engine.submit(RowRequest(prompt, new, on_event, constraint=constraint))
    done.wait()
    return {"tokens": tokens, "n": len(stamps), "ttft": stamps[0] - start, "decode_s": stamps[-1] - stamps[0],
            "proposed": last[0].proposed, "accepted": last[0].accepted}


def interleaved_rounds(variants: dict, prompts: list[list[int]], rounds: int) -> dict[str, list[list[dict]]]:
    """Every variant on every prompt once (warm-up, alike), then `rounds` rounds interleaved prompt by prompt.
    -> per variant, per prompt, one result per round."""
    for run in variants.values():
        for ids in prompts:
            run(ids)
    runs = {name: [[] for _ in prompts] for name in variants}
    for r in range(rounds):
        log(f"round {r + 1} of {rounds}")
        for i, ids in enumerate(prompts):
            for name, run in variants.items():
                runs[name][i].append(run(ids))
    return runs


def decode_rates(per_prompt: list[list[dict]]) -> list[float]:
    """Per round: decode tok/s over all prompts = tokens after the first / seconds from first to last token."""
    rounds = len(per_prompt[0])
    return [sum(p[r]["n"] - 1 for p in per_prompt) / sum(p[r]["decode_s"] for p in per_prompt) for r in range(rounds)]


def through_generate(lm, prompt: list[int], new: int) -> dict:
    stats = GenerationStats()
    out = generate_tokens(lm.model, [prompt], max_new_tokens=new, eos_token_ids=set(lm.tokenizer.eos_token_ids),
                          stats=stats)[0]
    return {"tokens": out.token_ids, "n": stats.new_tokens, "ttft": stats.time_to_first_token,
            "decode_s": stats.decode_seconds}


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--new-tokens", type=int, default=64)
    args = p.parse_args()
    lm = openafm.load()
    prompts = [lm.encode(lm.chat_prompt(q)) for q in PROMPTS]
    engine = Engine(lm.model, lm.tokenizer, EngineConfig(max_batch=4, prefix_cache=0)).start()   # prefills alike
    t0, load = time.perf_counter(), os.getloadavg()[0]
    variants = {"engine": lambda ids: through_engine(engine, ids, args.new_tokens),
                "generate": lambda ids: through_generate(lm, ids, args.new_tokens)}
    try:
        runs = interleaved_rounds(variants, prompts, args.rounds)
    finally:
        engine.stop()
    figures = {}
    for name in variants:
        rates = decode_rates(runs[name])
        figures[name] = {"decode_tok_s": round(median(rates), 1), "tok_s_per_round": [round(x, 1) for x in rates],
                         "ttft_ms_median": round(1e3 * median([x["ttft"] for per in runs[name] for x in per]), 1)}
    result = {"engine_over_generate": round(figures["engine"]["decode_tok_s"] / figures["generate"]["decode_tok_s"], 3),
              "engine_ttft_over_generate": round(figures["engine"]["ttft_ms_median"]
                                                 / figures["generate"]["ttft_ms_median"], 3),
              "identical": all(runs["engine"][i][r]["tokens"] == runs["generate"][i][r]["tokens"]
                               for i in range(len(prompts)) for r in range(args.rounds)),
              **figures, "prompts": len(prompts), "new_tokens": args.new_tokens, "rounds": args.rounds,
              "step": engine.step_kind, "threads": torch.get_num_threads(), "load_at_start": round(load, 2),
              "seconds": round(time.perf_counter() - t0), "command": "python benchmarks/engine.py --json"}
    emit(result, args.json)
    if args.json:
        RESULTS.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
