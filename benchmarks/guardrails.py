"""Guardrails (openafm.fm.guardrails): precision and recall of the lexical filter on labelled prompts.

Two tables, both written by openafm's authors, both in tests/fm/test_guardrails.py:

* ``dev`` (LABELLED) — the rules were developed against it, so its 100% is a regression check and says
  nothing about unseen text;
* ``held_out`` (HELD_OUT) — written after the rules were final and never used to change them: the
  out-of-sample estimate. Small (44) and by the same authors as the rules, so still optimistic.

"Positive" means blocked. Precision = blocked harmful / all blocked; recall = blocked harmful / all harmful;
category accuracy = blocked harmful blocked under the labelled category / blocked harmful. Checks run with
the DEFAULT setting on the prompt side. Also reported: recall on the evasion variants (leetspeak, spacing,
full-width and look-alike letters) and the time per check.

    python benchmarks/guardrails.py --json
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, median, parser  # noqa: E402

from openafm.fm.guardrails import Guardrails  # noqa: E402

TABLE_FILE = os.path.join(os.path.dirname(__file__), os.pardir, "tests", "fm", "test_guardrails.py")


def load_tables():
    spec = importlib.util.spec_from_file_location("guardrail_tables", TABLE_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.LABELLED, module.HELD_OUT, module.EVASIONS


def score(table: list[tuple[str, str | None]], guard: Guardrails) -> dict:
    counts, per_category, misses, false_positives = Counter(), Counter(), [], []
    for text, label in table:
        verdict = guard.check_prompt(text)
        got = None if verdict.allowed else verdict.category
        if label is not None:
            per_category[(label, "n")] += 1
            if got is None:
                counts["fn"] += 1
                misses.append(text)
            else:
                counts["tp"] += 1
                per_category[(label, "blocked")] += 1
                counts["right_category"] += got == label
        elif got is not None:
            counts["fp"] += 1
            false_positives.append(f"{text} [{verdict.rule}]")
        else:
            counts["tn"] += 1
    tp, fp, fn = counts["tp"], counts["fp"], counts["fn"]
    return {
        "size": len(table), "harmful": tp + fn, "benign": fp + counts["tn"],
        "tp": tp, "fp": fp, "fn": fn, "tn": counts["tn"],
        "precision": tp / max(tp + fp, 1), "recall": tp / max(tp + fn, 1),
        "category_accuracy": counts["right_category"] / max(tp, 1),
        "recall_by_category": {cat: per_category[(cat, "blocked")] / n
                               for (cat, kind), n in sorted(per_category.items()) if kind == "n"},
        "missed": misses, "false_positives": false_positives,
    }


def time_per_check(texts: list[str], guard: Guardrails, repeats: int) -> float:
    rounds = []
    for _ in range(repeats):
        t = time.perf_counter()
        for text in texts:
            guard.check_prompt(text)
        rounds.append((time.perf_counter() - t) / len(texts))
    return median(rounds)


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    dev, held_out, evasions = load_tables()
    guard = Guardrails.DEFAULT
    evasion = score(evasions, guard)
    result = {
        "note": "self-written tables; dev was used to develop the rules (100% there is by construction), "
                "held_out was not. A lexical filter, not a model.",
        "dev": score(dev, guard),
        "held_out": score(held_out, guard),
        "evasion_variants": {"size": evasion["size"], "recall": evasion["recall"],
                             "category_accuracy": evasion["category_accuracy"]},
        "microseconds_per_check": 1e6 * time_per_check([t for t, _ in dev + held_out], guard, args.repeats),
    }
    emit(result, args.json)


if __name__ == "__main__":
    main()
