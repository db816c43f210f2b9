"""Constrained tool calling on BFCL (Berkeley Function Calling Leaderboard) categories simple_python,
multiple and parallel: SmolLM2-135M-Instruct through the Foundation Models session
(`LanguageModelSession(tools=..., tool_choice="required")`, whose grammar allows only registered names
with schema-valid arguments) vs the same model, same system prompt, generating freely.

    python benchmarks/bfcl.py --json [--per-category 20 --seed 0]

Data: the question and possible-answer JSON files shipped in the `bfcl-eval` wheel
(`.venv/bin/pip install --no-deps bfcl-eval`; only its data files are read). A seeded random sample of
each category is run, both methods on each question back to back, greedy decoding.

Per category and method: `valid_share` — questions whose reply holds at least one call and only
structurally valid calls (registered name, arguments valid for that function's JSON Schema, checked
with `jsonschema`); `valid_call_share` — the same per call; `ast_accuracy` — questions whose calls
match the ground truth (openafm/eval/bfcl_data.py states the rules).

The session is stopped after the model's first turn: each tool records its arguments and raises
`FirstTurnDone`, which the session reports as ToolCallError after running every call of that turn
(they run together, in one asyncio.gather); the first turn's calls are exactly the recorded ones.
The baseline stops at the end of its turn, at the first "</tool_call>" (the prompt asks for one block
holding every call), at --max-tokens, or once --prose-cutoff tokens hold no "{", "[" or "<tool_call>";
its calls are read leniently from the text.
A question whose function the engine rejects (InvalidGenerationSchemaError) is skipped by both methods
and listed under `rejected_schemas`.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import os
import random
import sys
import time
from collections import Counter

import jsonschema
from tqdm import tqdm

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, log  # noqa: E402

import torch  # noqa: E402

import openafm.fm as fm  # noqa: E402
from openafm.eval.bfcl_data import (category_files, load_category, package_info,  # noqa: E402
                                    parse_calls_leniently, question_correct, to_json_schema)
from openafm.fm.tool import MAX_CALLS_PER_TURN, tools_prompt  # noqa: E402

CATEGORIES = ("simple_python", "multiple", "parallel")


class FirstTurnDone(Exception):
    """Raised by a tool after recording its call, to end the request after the model's first turn."""


class BfclTool(fm.Tool):
    """One BFCL function as a tool; `call` appends {"name", "arguments"} to a shared record."""

    def __init__(self, function: dict, record: list[dict]):
        self.name = function["name"]
        self.description = function.get("description") or function["name"]
        self._schema = fm.GenerationSchema.from_json_schema(to_json_schema(function["parameters"]))
        self._record = record
        super().__init__()

    @property
    def arguments_schema(self) -> fm.GenerationSchema:
        return self._schema

    async def call(self, args: fm.GeneratedContent) -> str:
        self._record.append({"name": self.name, "arguments": json.loads(args.to_json())})
        raise FirstTurnDone()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print one JSON object (and nothing else) to stdout")
    p.add_argument("--per-category", type=int, default=20, help="questions sampled per category")
    p.add_argument("--seed", type=int, default=0, help="seed of the per-category samples (seeded with 'SEED:category')")
    p.add_argument("--categories", nargs="+", default=list(CATEGORIES))
    p.add_argument("--max-tokens", type=int, default=256,
                   help="response-token limit of both methods (the session's maximum_response_tokens)")
    p.add_argument("--prose-cutoff", type=int, default=48,
                   help="end a free reply after this many tokens if it holds no '{', '[' or '<tool_call>' (0: never)")
    p.add_argument("--details", help="write every question's outputs to this JSON-lines file")
    args = p.parse_args()

    version, data = package_info()
    log(f"bfcl-eval {version}, data {data}")
    model = fm.SystemLanguageModel()
    lm = model.language_model()              # the same loaded model serves the baseline
    details = open(args.details, "w") if args.details else None
    started = time.perf_counter()
    result = {"model": lm.name, "bfcl_eval_version": version, "data_dir": str(data), "seed": args.seed,
              "per_category": args.per_category, "max_tokens": args.max_tokens, "prose_cutoff": args.prose_cutoff,
              "decoding": "greedy", "threads": torch.get_num_threads(), "max_calls_per_turn": MAX_CALLS_PER_TURN,
              "categories": {}}
    # The baseline runs in a worker thread, as the session's generation does (asyncio.to_thread): on a busy
    # machine, generation on the main thread with torch's intra-op threads ran several times slower.
    worker = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    for category in args.categories:
        entries = load_category(data, category)
        sample = random.Random(f"{args.seed}:{category}").sample(entries, min(args.per_category, len(entries)))
        result["categories"][category] = run_category(category, entries, sample, model, lm, args, details, worker)
    if details:
        details.close()
    result["wall_seconds"] = time.perf_counter() - started
    emit(result, args.json)


def run_category(category, entries, sample, model, lm, args, details, worker) -> dict:
    rows = {"constrained": [], "unconstrained": []}
    rejected = []
    seconds = Counter()
    for entry in tqdm(sample, desc=category, file=sys.stderr):
        record: list[dict] = []
        try:
            tools = [BfclTool(f, record) for f in entry["functions"]]
        except fm.InvalidGenerationSchemaError as e:
            rejected.append({"id": entry["id"], "error": str(e)[:300]})
            continue
        schemas = {t.name: t.arguments_schema.to_json_schema() for t in tools}

        t = time.perf_counter()
        error = asyncio.run(_first_turn(entry["question"], tools, model, args.max_tokens))
        seconds["constrained"] += time.perf_counter() - t
        rows["constrained"].append(_score(list(record), entry, schemas, error))

        t = time.perf_counter()
        text, finish = worker.submit(_free_reply, lm, entry["question"], tools, args).result()
        seconds["unconstrained"] += time.perf_counter() - t
        rows["unconstrained"].append({**_score(parse_calls_leniently(text), entry, schemas, None, text),
                                      "finish": finish})

        if details:
            details.write(json.dumps({"id": entry["id"], "ground_truth": entry["ground_truth"],
                                      **{m: r[-1] for m, r in rows.items()}}) + "\n")
            details.flush()
    q_path, a_path = category_files(package_info()[1], category)
    evaluated = len(rows["constrained"])
    out = {"files": [q_path.name, os.path.join("possible_answer", a_path.name)], "size": len(entries),
           "sampled": len(sample), "evaluated": evaluated, "rejected_schemas": rejected,
           "sample_ids": [e["id"] for e in sample],
           "needs_more_calls_than_allowed": sum(len(e["ground_truth"]) > MAX_CALLS_PER_TURN for e in sample)}
    for method, rs in rows.items():
        out[method] = _summary(rs, seconds[method])
    out["ast_accuracy_gain"] = out["constrained"]["ast_accuracy"] - out["unconstrained"]["ast_accuracy"]
    return out


async def _first_turn(question: str, tools: list[BfclTool], model, max_tokens: int) -> str | None:
    """Ask once; None when the model's first turn ended in tool calls, else the error's type name."""
    session = fm.LanguageModelSession(model=model, tools=tools, tool_choice="required")
    try:
        await session.respond(question, options=fm.GenerationOptions(maximum_response_tokens=max_tokens))
    except fm.ToolCallError as e:
        if isinstance(e.__cause__, FirstTurnDone):
            return None
        return f"ToolCallError({type(e.__cause__).__name__})"
    except Exception as e:                       # e.g. a call cut off at max_tokens: its JSON does not parse
        return type(e).__name__
    return "answered without a tool call"


class _ProseCutoff(Exception):
    """Raised from the token callback to end a free reply that has turned into prose."""


def _free_reply(lm, question: str, tools: list[BfclTool], args) -> tuple[str, str]:
    """The baseline: same model, same system prompt, no grammar. Stops at the end of the turn, at the first
    "</tool_call>", at --max-tokens, or after --prose-cutoff tokens without "{", "[" or "<tool_call>" in
    the reply (prose that shows no sign of a call). Returns (text, finish reason)."""
    prompt = lm.chat_prompt(question, system=tools_prompt(tools))
    pieces: list[str] = []

    def on_token(event) -> None:
        pieces.append(event.text)
        if args.prose_cutoff and len(pieces) >= args.prose_cutoff:
            so_far = "".join(pieces)
            if not any(mark in so_far for mark in ("{", "[", "<tool_call>")):
                raise _ProseCutoff()
    try:
        out, = lm.generate_detailed([prompt], max_tokens=args.max_tokens, stop=["</tool_call>"], on_token=on_token)
    except _ProseCutoff:
        return "".join(pieces), "prose_cutoff"
    return out.text, out.finish_reason


def _score(calls: list[dict], entry: dict, schemas: dict, error: str | None, text: str | None = None) -> dict:
    valid = [_valid(c, schemas) for c in calls]
    return {"calls": calls, "valid": valid, "error": error,
            "correct": question_correct(calls, entry["ground_truth"], entry["functions"]),
            **({"text": text} if text is not None else {})}


def _valid(call: dict, schemas: dict) -> str:
    """"ok", or why the call is not structurally valid."""
    if not isinstance(call.get("name"), str) or call["name"] not in schemas:
        return "unknown function"
    validator = jsonschema.Draft202012Validator(schemas[call["name"]],
                                                format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    return "ok" if validator.is_valid(call["arguments"]) else "arguments invalid"


def _summary(rows: list[dict], seconds: float) -> dict:
    n = max(len(rows), 1)
    calls = [v for r in rows for v in r["valid"]]
    reasons = Counter("no call" if not r["valid"] else next((v for v in r["valid"] if v != "ok"), "ok") for r in rows)
    reasons.pop("ok", None)
    return {"valid_share": sum(bool(r["valid"]) and all(v == "ok" for v in r["valid"]) for r in rows) / n,
            "ast_accuracy": sum(r["correct"] for r in rows) / n,
            "calls": len(calls), "valid_call_share": calls.count("ok") / max(len(calls), 1),
            "invalid_reasons": dict(reasons),
            "errors": dict(Counter(r["error"] for r in rows if r["error"])),
            **({"finish": dict(Counter(r["finish"] for r in rows))} if rows and "finish" in rows[0] else {}),
            "seconds_per_question": seconds / n}


if __name__ == "__main__":
    main()
