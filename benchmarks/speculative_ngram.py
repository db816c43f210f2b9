"""Speculation inside the engine step on the default model: n-gram prompt lookup vs plain decoding, one request at a
time (what `openafm serve --speculate ngram` does at concurrency 1), greedy, outputs compared token for token.

    python benchmarks/speculative_ngram.py --json        # ~2 min on 2 cores; merges into docs/results/speculative.json

Workloads: copy-heavy prompts (repeat, quote, correct, fill a JSON object from given text under its schema) where
the output copies from the prompt, and free chat (the draft benchmark's prompts) where it does not — there the
engine's cost model should keep guessing off, so the figure to watch is the ratio staying near 1. Both engines are
built once and warmed alike (every prompt once); then rounds interleave plain and ngram per prompt. tok/s =
output tokens after the first / seconds from the first to the last token, summed over a workload's prompts;
medians over rounds. The draft-model figures in speculative.json (benchmarks/speculative.py) are kept as they are.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _common import add_settle, emit, log, median, parser, settle  # noqa: E402
from engine import decode_rates, interleaved_rounds, through_engine  # noqa: E402
from speculative import PROMPTS  # noqa: E402

import torch  # noqa: E402

import openafm  # noqa: E402
from openafm.runtime.engine import Engine, EngineConfig  # noqa: E402
from openafm.runtime.constrained import GrammarConstraint  # noqa: E402
from openafm.runtime.proposers import ProposerKind  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results" / "speculative.json"
PASSAGE = ("The harbour master's report for the week of the storm: on Monday the wind rose from the south-west and "
           "the ferry to the island was cancelled; on Tuesday two fishing boats sheltered in the inner basin and "
           "the pier lights failed at nine in the evening; on Wednesday the sea wall was inspected and found sound, "
           "and the ferry ran again on Thursday morning with forty passengers and a cargo of timber.")
CODE = ("def total_price(items, tax_rate):\n    subtotal = 0\n    for item in items:\n"
        "        subtotal += item.price * item.quantity\n    tax = subtotal * tax_rate\n    return subtotal + tax\n")
COPY = [f"Repeat the following text exactly, word for word:\n\n{PASSAGE}",
        f"Quote the sentence about Wednesday from this report, exactly as written:\n\n{PASSAGE}",
        f"Rename the function total_price to order_total in this code and show the whole code:\n\n{CODE}",
        f"Correct the spelling in this text and give it back in full:\n\n{PASSAGE.replace('the ', 'teh ', 3)}"]
REPORT = {"type": "object", "properties": {
    "cancelled_day": {"type": "string", "maxLength": 12}, "boats_sheltered": {"type": "integer", "minimum": 0},
    "lights_failed_at": {"type": "string", "maxLength": 24}, "passengers": {"type": "integer", "minimum": 0},
    "cargo": {"type": "string", "maxLength": 24}},
    "required": ["cancelled_day", "boats_sheltered", "lights_failed_at", "passengers", "cargo"],
    "additionalProperties": False}
FILL = f"{PASSAGE}\n\nFill in this JSON object from the report: {json.dumps(REPORT)}"


def workload(engines: dict, prompts: list[list[int]], new: int, rounds: int, tokenizer, schema=None) -> dict:
    def request(engine):
        return lambda ids: through_engine(engine, ids, new, GrammarConstraint.from_json_schema(schema, tokenizer)
                                          if schema else None)
    runs = interleaved_rounds({name: request(engine) for name, engine in engines.items()}, prompts, rounds)
    out = {}
    for name in engines:
        rates = decode_rates(runs[name])
        proposed = sum(runs[name][i][0]["proposed"] for i in range(len(prompts)))
        accepted = sum(runs[name][i][0]["accepted"] for i in range(len(prompts)))
        out[name] = {"decode_tok_s": round(median(rates), 1), "tok_s_per_round": [round(x, 1) for x in rates],
                     "proposed": proposed, "accepted": accepted,
                     "acceptance": round(accepted / proposed, 3) if proposed else None}
    out["identical"] = all(runs["ngram"][i][r]["tokens"] == runs["plain"][i][r]["tokens"]
                           for i in range(len(prompts)) for r in range(rounds))
    out["ratio"] = round(out["ngram"]["decode_tok_s"] / out["plain"]["decode_tok_s"], 3)
    out["output_tokens"] = [runs["plain"][i][0]["n"] for i in range(len(prompts))]
    return out


def main() -> None:
    p = add_settle(parser(__doc__))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--new-tokens", type=int, default=96)
    args = p.parse_args()
    lm = openafm.load()
    tok = lm.tokenizer
    engines = {name: Engine(lm.model, tok, EngineConfig(max_batch=4, speculate=kind)).start()
               for name, kind in (("plain", ProposerKind.OFF), ("ngram", ProposerKind.NGRAM))}
    load, t0 = settle(args.settle), time.perf_counter()
    try:
        encode = lambda q: tok.encode(lm.chat_prompt(q))                 # noqa: E731
        log("copy-heavy prompts")
        copy = workload(engines, [encode(q) for q in COPY], args.new_tokens, args.rounds, tok)
        log("JSON filled from the text, under its schema")
        fill = workload(engines, [encode(FILL)], args.new_tokens, args.rounds, tok, REPORT)
        log("free chat")
        chat = workload(engines, [encode(q) for q in PROMPTS], args.new_tokens, args.rounds, tok)
        step_ms = {f"{n} rows x {t} slots": round(v * 1e3, 2)
                   for (n, t), v in sorted(engines["ngram"].step_seconds().items())}
    finally:
        for e in engines.values():
            e.stop()
    figures = {"ngram_copy_speedup": copy["ratio"], "ngram_json_fill_speedup": fill["ratio"],
               "ngram_identical": copy["identical"] and fill["identical"] and chat["identical"],
               "adaptive_chat_ratio": chat["ratio"],
               "ngram": {"copy": copy, "json_fill": fill, "chat": chat, "step_ms": step_ms,
                         "new_tokens": args.new_tokens,
                         "rounds": args.rounds, "load_at_start": round(load, 2),
                         "seconds": round(time.perf_counter() - t0), "threads": torch.get_num_threads(),
                         "command": "python benchmarks/speculative_ngram.py --json"}}
    emit(figures, args.json)
    if args.json:
        result = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
        RESULTS.write_text(json.dumps(result | figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
