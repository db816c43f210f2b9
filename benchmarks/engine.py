"""What routing every caller through one engine costs a lone request, and what it gains sessions that respond at once.

    python benchmarks/engine.py --json          # ~4 min on 2 cores; writes docs/results/engine.json

1. One request: through a started engine (its loop thread, as the server and fm sessions use it), through
   `generate_tokens` (a private engine run in the calling thread, as eval, RL and `generate` use it), and through
   the bare loop the engine replaces (prefill, then the fused one-token step and an argmax, nothing else: no
   grammar, stop strings, events or scheduling) — target >= 0.95x the bare loop. Greedy on the default model, the
   same chat prompts and token budget, warmed alike (every prompt once), then interleaved prompt by prompt for
   `--rounds` rounds. Decode tok/s = tokens after the first (an end-of-sequence token counted, as all decode it) /
   seconds from the first token to the last, summed over the prompts; time to first token beside it. Outputs are
   compared token for token.
2. Sessions: `--sessions` fm sessions each answer one question, all at once (their requests share the model's
   engine batch) vs one after another, greedy, `--rounds` interleaved rounds; throughput = answer tokens / wall
   seconds (target >= 2.5x), and every concurrent answer must equal its sequential one. The engine's prefix
   cache is emptied before each round, so a round's sessions share only what their prompts share (the chat
   template's system prompt), never a whole prompt remembered from an earlier round. Beside it, where the time
   goes: decode steps and prompt-prefill seconds per way of running, and the engine's step cost by batch rows.
3. A speculative step of 8 rows where one row feeds 4 guesses: the padded pass (8 x 5 tokens) against the ragged
   one the engine runs (5 + 7 tokens), `ragged_over_padded`, with the same logits on the fed slots.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _common import add_settle, emit, log, median, parser, settle  # noqa: E402
from speculative import PROMPTS  # noqa: E402

import torch  # noqa: E402

import asyncio  # noqa: E402

import openafm  # noqa: E402
import openafm.fm as fm  # noqa: E402
from openafm.models.decoder import Logits  # noqa: E402
from openafm.runtime.engine import Engine, EngineConfig, RowRequest  # noqa: E402
from openafm.runtime.fused_step import StepKind, choose_step, fused_decoder  # noqa: E402
from openafm.runtime.generate import GenerationStats, generate_tokens  # noqa: E402
from openafm.runtime.kv_cache import KVCache  # noqa: E402
from openafm.runtime.row_cache import RowCache  # noqa: E402

QUESTIONS = ["What is the capital of France?", "Name three colours.", "Write a haiku about the sea.",
             "Who wrote Hamlet?", "Give me a tip for sleeping well.", "What is a prime number?",
             "Describe a cat in one sentence.", "Why is the sky blue?", "Name a famous painter.",
             "What do bees make?", "How many legs does a spider have?", "Suggest a name for a dog."]

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


def through_bare_loop(lm, prompt: list[int], new: int) -> dict:
    """The floor: prefill, then the fused one-token step and an argmax until EOS or `new` tokens."""
    model, eos = lm.model, set(lm.tokenizer.eos_token_ids)
    w = model.norm.weight
    start = time.perf_counter()
    with torch.inference_mode():
        cache = KVCache(model.kv_plan, batch_size=1, capacity=len(prompt) + new, dtype=w.dtype, device=w.device)
        fused, _ = choose_step(StepKind.FUSED, model, cache)
        tok = int(model(torch.tensor([prompt]), cache=cache, logits=Logits.LAST)[0, -1].argmax())
        stamps, tokens = [time.perf_counter()], []
        while tok not in eos and len(stamps) < new:
            tokens.append(tok)
            tok = int(fused(torch.tensor([[tok]]), cache, torch.tensor([[cache.steps]]))[0].argmax())
            stamps.append(time.perf_counter())
    if tok not in eos:
        tokens.append(tok)
    return {"tokens": tokens, "n": len(stamps), "ttft": stamps[0] - start, "decode_s": stamps[-1] - stamps[0]}


def sessions_round(model: fm.SystemLanguageModel, questions: list[str], new: int, together: bool) -> dict:
    """Each question in a fresh session; all at once or one after another -> answers, tokens, wall seconds."""
    options = fm.GenerationOptions(temperature=0.0, maximum_response_tokens=new)
    tok = model.language_model().tokenizer

    async def one(q: str) -> str:
        return await fm.LanguageModelSession(model=model).respond(q, options=options)

    async def run() -> list[str]:
        if together:
            return list(await asyncio.gather(*(one(q) for q in questions)))
        return [await one(q) for q in questions]
    engine = model.engine()
    engine.prefixes.clear()
    steps, prefill, start = engine.steps_run, engine.prefill_seconds, time.perf_counter()
    answers = asyncio.run(run())
    wall = time.perf_counter() - start
    lengths = [len(tok.encode(a)) for a in answers]
    return {"answers": answers, "tokens": sum(lengths), "lengths": lengths, "wall_s": wall,
            "steps": engine.steps_run - steps, "prefill_s": engine.prefill_seconds - prefill}


def sessions_figures(n: int, new: int, rounds: int) -> dict:
    model = fm.SystemLanguageModel(max_concurrent_requests=n)
    questions = QUESTIONS[:n]
    for together in (False, True):                                          # warm-up, alike
        sessions_round(model, questions, new, together)
    runs = {"sequential": [], "concurrent": []}
    for r in range(rounds):
        log(f"sessions round {r + 1} of {rounds}")
        for name, together in (("sequential", False), ("concurrent", True)):
            runs[name].append(sessions_round(model, questions, new, together))
    rate = {name: median([x["tokens"] / x["wall_s"] for x in xs]) for name, xs in runs.items()}
    return {"sessions_concurrent_speedup": round(rate["concurrent"] / rate["sequential"], 2),
            "sessions_identical": all(c["answers"] == s["answers"]
                                      for c, s in zip(runs["concurrent"], runs["sequential"], strict=True)),
            "sessions": {"n": n, "max_tokens": new, "tok_s": {k: round(v, 1) for k, v in rate.items()},
                         "wall_s": {k: [round(x["wall_s"], 2) for x in xs] for k, xs in runs.items()},
                         "answer_tokens": runs["sequential"][0]["lengths"],
                         "where_the_time_goes": time_spent(runs, model.engine())}}


def time_spent(runs: dict[str, list[dict]], engine: Engine) -> dict:
    """Per way of running (medians over rounds): decode steps, seconds in prompt prefill (the engine prefills one
    prompt chunk between steps, so a prompt's prefill holds the running rows up) and the rest of the wall time (decode
    steps, sampling, events); and the engine's measured seconds of a one-slot step by rows, the batch's cost curve."""
    out: dict = {name: {"steps": median([x["steps"] for x in xs]),
                        "prefill_s": round(median([x["prefill_s"] for x in xs]), 3),
                        "rest_s": round(median([x["wall_s"] - x["prefill_s"] for x in xs]), 3)}
                 for name, xs in runs.items()}
    costs = sorted(engine.step_seconds().items())
    out["step_ms_by_rows"] = {str(n): round(1e3 * seconds, 1) for (n, t), seconds in costs if t == 1}
    return out


def ragged_step_figures(lm, rounds: int, rows: int = 8, guesses: int = 4) -> dict:
    """A speculative step of `rows` rows at context 30 where one row feeds `guesses` guesses and the others none:
    the padded pass (every row `1 + guesses` slots) against the ragged one (the tokens fed only), interleaved;
    same logits on the fed slots."""
    fused = fused_decoder(lm.model)
    t = 1 + guesses
    seconds: dict[str, list[float]] = {"padded": [], "ragged": []}
    same = True
    for r in range(rounds + 1):                                             # round 0: warm-up, alike
        out = {}
        for name in seconds:
            cache = RowCache(lm.model.kv_plan, rows=rows, capacity=64, max_capacity=64, dtype=torch.float32,
                             device=torch.device("cpu"))
            with torch.inference_mode():
                for s in range(30):                                         # 30 steps of context per row
                    cache.reserve(rows, 1)
                    fused(torch.full((rows, 1), 100 + s), cache.view(rows), torch.full((rows, 1), s))
                cache.reserve(rows, t)
                ids = torch.arange(rows * t).reshape(rows, t) + 200                                   # [rows, t]
                pos = torch.full((rows, t), -1)
                pos[:, 0], pos[0] = 30, torch.arange(30, 30 + t)
                start = time.perf_counter()
                if name == "padded":
                    out[name] = fused.rows(ids, cache.view(rows), pos)[pos >= 0]
                else:
                    out[name] = fused.ragged(ids, cache.view(rows), pos, pos >= 0)
                if r:
                    seconds[name].append(time.perf_counter() - start)
        same = same and torch.equal(out["padded"], out["ragged"])
    ms = {name: round(1e3 * median(xs), 1) for name, xs in seconds.items()}
    return {"ragged_step": {"rows": rows, "guesses_of_one_row": guesses, "ms": ms, "same_logits": same},
            "ragged_over_padded": round(ms["padded"] / ms["ragged"], 2)}


def main() -> None:
    p = add_settle(parser(__doc__))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--sessions", type=int, default=8, help="fm sessions responding at once (0: skip)")
    args = p.parse_args()
    lm = openafm.load()
    prompts = [lm.encode(lm.chat_prompt(q)) for q in PROMPTS]
    engine = Engine(lm.model, lm.tokenizer, EngineConfig(max_batch=4, prefix_cache=0)).start()   # prefills alike
    load, t0 = settle(args.settle), time.perf_counter()
    variants = {"engine": lambda ids: through_engine(engine, ids, args.new_tokens),
                "generate": lambda ids: through_generate(lm, ids, args.new_tokens),
                "bare_loop": lambda ids: through_bare_loop(lm, ids, args.new_tokens)}
    try:
        runs = interleaved_rounds(variants, prompts, args.rounds)
    finally:
        engine.stop()
    figures = {}
    for name in variants:
        rates = decode_rates(runs[name])
        figures[name] = {"decode_tok_s": round(median(rates), 1), "tok_s_per_round": [round(x, 1) for x in rates],
                         "ttft_ms_median": round(1e3 * median([x["ttft"] for per in runs[name] for x in per]), 1)}
    over = {name: round(figures[name]["decode_tok_s"] / figures["bare_loop"]["decode_tok_s"], 3)
            for name in ("engine", "generate")}
    result = {"engine_over_generate": over["engine"], "generate_over_bare_loop": over["generate"],
              "engine_ttft_over_generate": round(figures["engine"]["ttft_ms_median"]
                                                  / figures["bare_loop"]["ttft_ms_median"], 3),
              "identical": all(runs[name][i][r]["tokens"] == runs["bare_loop"][i][r]["tokens"]
                               for name in ("engine", "generate") for i in range(len(prompts))
                               for r in range(args.rounds)),
              **figures, "prompts": len(prompts), "new_tokens": args.new_tokens, "rounds": args.rounds,
              "step": engine.step_kind, "threads": torch.get_num_threads(), "load_at_start": round(load, 2),
              "baseline": "engine_over_generate is the started engine over the bare fused loop (runtime/generate.py "
                          "is itself the engine now)"}
    if args.sessions:
        result.update(sessions_figures(args.sessions, args.new_tokens, args.rounds))
    result.update(ragged_step_figures(lm, args.rounds))
    result.update(seconds=round(time.perf_counter() - t0), command="python benchmarks/engine.py --json")
    emit(result, args.json)
    if args.json:
        RESULTS.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
