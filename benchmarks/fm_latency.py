"""End-to-end latency a framework user feels: `session.respond` of the README's `@generable` example (the Person
type, instructions "You are concise."), a first turn and a second turn on the same session (the second prefills
only its new tokens), per weight format the framework can be asked for.

Each repeat opens a fresh session and asks "Invent a person." then "Another one.", both `generating=Person`, with
greedy sampling so every repeat and every format decodes a comparable number of tokens. The model is loaded (and
one untimed repeat run) before timing; the load and that first request are reported on their own.

Weight formats: when `fm.SystemLanguageModel` accepts `weights=`, one entry per format (native, float32,
bfloat16); until then one entry for the framework's default, named by the format it holds, and the others are
listed under `unavailable`.

    python benchmarks/fm_latency.py --json --repeats 5
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from _common import add_settle, emit, log, median, parser, settle
from _decode_measures import Weights, weight_format
from openafm import fm


@fm.generable("A person")
class Person:
    name: str = fm.guide("Full name")
    age: int = fm.guide("Age in years", range=(0, 120))
    hobbies: list[str] = fm.guide("Hobbies", max_items=3)


INSTRUCTIONS = "You are concise."
TURNS = ("Invent a person.", "Another one.")
GREEDY = fm.GenerationOptions(sampling=fm.SamplingMode.greedy())


def system_models() -> tuple[list[tuple[str | None, fm.SystemLanguageModel, str]], dict[str, str]]:
    """-> ([(format or None: the default's, read once loaded; model; how it was asked)], {format: why not})."""
    models, unavailable = [], {}
    for w in (Weights.NATIVE, Weights.FLOAT32, Weights.BFLOAT16):
        try:
            models.append((w.value, fm.SystemLanguageModel(weights=w.value),
                           f"fm.SystemLanguageModel(weights={w.value!r})"))
        except TypeError as e:
            if "weights" not in str(e):                        # a TypeError from inside, not the missing keyword
                raise
            unavailable[w.value] = f"fm.SystemLanguageModel does not accept weights= yet ({e})"
    if not models:
        models.append((None, fm.SystemLanguageModel(), "fm.SystemLanguageModel() (its default weights)"))
    return models, unavailable


async def two_turns(model: fm.SystemLanguageModel) -> dict:
    session = fm.LanguageModelSession(instructions=INSTRUCTIONS, model=model)
    row = {}
    for i, prompt in enumerate(TURNS, start=1):
        t = time.perf_counter()
        person = await session.respond(prompt, generating=Person, options=GREEDY)
        row[f"turn{i}_s"] = time.perf_counter() - t
        row[f"turn{i}_prefill_tokens"] = session.last_prefill
        row[f"turn{i}_output"] = {"name": person.name, "age": person.age, "hobbies": list(person.hobbies)}
    return row


async def measure(model: fm.SystemLanguageModel, repeats: int) -> dict:
    t = time.perf_counter()
    lm = await asyncio.to_thread(model.language_model)
    load_s = time.perf_counter() - t
    first = await two_turns(model)                             # untimed: the first request after the load
    rows = [await two_turns(model) for _ in range(repeats)]
    return {"weight_format": weight_format(lm.model), "load_seconds": load_s,
            "first_request_after_load": {k: v for k, v in first.items() if k.endswith("_s")},
            "turn1_s": median([r["turn1_s"] for r in rows]), "turn2_s": median([r["turn2_s"] for r in rows]),
            "turn1_s_runs": [round(r["turn1_s"], 3) for r in rows],
            "turn2_s_runs": [round(r["turn2_s"], 3) for r in rows],
            "turn1_prefill_tokens": rows[0]["turn1_prefill_tokens"],
            "turn2_prefill_tokens": rows[0]["turn2_prefill_tokens"],
            "outputs": [rows[0]["turn1_output"], rows[0]["turn2_output"]],
            "outputs_same_every_repeat": all(r["turn1_output"] == rows[0]["turn1_output"]
                                             and r["turn2_output"] == rows[0]["turn2_output"] for r in rows)}


def main() -> None:
    p = add_settle(parser(__doc__))
    args = p.parse_args()
    load_start = settle(args.settle)
    start = time.perf_counter()
    models, unavailable = system_models()
    for fmt, why in unavailable.items():
        log(f"  {fmt}: asked by name: not available: {why}")
    out = {"example": "README.md @generable Person", "instructions": INSTRUCTIONS, "turns": list(TURNS),
           "sampling": "greedy", "repeats": args.repeats, "unavailable": unavailable,
           "native_available": any(label == "native" for label, _, _ in models)}
    for label, model, how in models:
        log(f"{label or 'default weights'}: {args.repeats} repeats of two turns ...")
        row = asyncio.run(measure(model, args.repeats))
        if label is None:                                      # the default: named by the format it holds
            label = row["weight_format"]
            unavailable.pop(label, None)
        out[label] = {"asked_by": how, **row}
    out["wall_seconds"] = time.perf_counter() - start
    out["loadavg_1min"] = {"start": load_start, "end": os.getloadavg()[0]}   # others' work on this machine
    emit(out, args.json)


if __name__ == "__main__":
    main()
