"""Choosing the structured-decoding remedies on a validation set, never on the held-out one: the default model's
answers to guided-generation requests whose schemas come from the training split (seed 101: not the draws the SFT
data used, seed 0), each checked for degeneracies (eval.guided_quality: an empty string, a repeated item, a count
the prompt asked for and the answer ignored), per `StructuredDecoding` setting of the repetition penalty.

    python benchmarks/guided_validation.py --json [--n 40 --penalties off,1.3]     # ~4 min per setting on 2 cores

The held-out figure (`guided_nondegenerate_rate`) comes from benchmarks/default_model.py, after the choice.
"""

from __future__ import annotations

import asyncio
import collections
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, log, parser  # noqa: E402

import openafm.fm as fm  # noqa: E402
from openafm.data.guided import guided_example  # noqa: E402
from openafm.eval.guided_quality import degeneracies  # noqa: E402
from openafm.eval.report import wilson_interval  # noqa: E402
from openafm.splits import Split  # noqa: E402

SEED = 101            # validation draws of training-split schemas; the SFT data drew seed 0
MAX_TOKENS = 400      # as benchmarks/default_model.py's guided part


def problem_kind(problem: str) -> str:
    """'$.tags: item 2 repeats item 1' -> 'repeated item' (the kinds eval.guided_quality names)."""
    text = problem.split(": ", 1)[-1]
    return ("repeated item" if " repeats " in text else "ignored count" if "asked for" in text
            else "empty string" if "empty" in text else "blank key" if "key" in text else text)


def run(model: fm.SystemLanguageModel, penalty: float | None, n: int) -> dict:
    options = fm.GenerationOptions(sampling=fm.SamplingMode.greedy(), maximum_response_tokens=MAX_TOKENS,
                                   structured=fm.StructuredDecoding(repetition_penalty=penalty))
    good, kinds, errors = 0, collections.Counter(), 0
    for i in range(n):
        ex = guided_example(SEED, i, Split.TRAIN)
        try:
            value = asyncio.run(fm.LanguageModelSession(model=model).respond(
                ex.request, json_schema=ex.schema, options=options)).value()
            problems = degeneracies(value, ex.schema, counts=ex.counts)
        except fm.GenerationError as e:
            problems, errors = [f"error: {type(e).__name__}"], errors + 1
        good += not problems
        kinds.update(problem_kind(p) for p in problems)
    low, high = wilson_interval(good, n)
    return {"nondegenerate": good, "n": n, "rate": good / n, "ci95": [round(low, 4), round(high, 4)],
            "errors": errors, "problems": dict(kinds)}


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--n", type=int, default=40, help="validation requests per setting")
    p.add_argument("--penalties", default="off,1.3", help="repetition penalties to compare ('off' = None)")
    p.add_argument("--model", default="openafm-135m", help="the model (default: the default model)")
    args = p.parse_args()
    model = fm.SystemLanguageModel(model=args.model)
    t = time.perf_counter()
    settings = {}
    for label in args.penalties.split(","):
        penalty = None if label == "off" else float(label)
        settings[label] = run(model, penalty, args.n)
        log(f"   repetition_penalty {label}: {settings[label]['nondegenerate']}/{args.n} {settings[label]['problems']}")
    emit({"model": args.model, "split": "validation (training-split schemas, seed 101)", "decoding": "greedy",
          "max_tokens": MAX_TOKENS, "settings": settings, "seconds": round(time.perf_counter() - t, 1),
          "command": "python benchmarks/guided_validation.py " + " ".join(sys.argv[1:])}, args.json)


if __name__ == "__main__":
    main()
