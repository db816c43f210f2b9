"""Guided generation cost on the default model: median time per output token constrained vs unconstrained
(same prompt, same number of tokens), and wall time for a whole JSON object with forced-token
fast-forward vs without, with the share of forced tokens. Runs are interleaved, medians reported.

    python benchmarks/guided_overhead.py --json
"""

from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, log, parser  # noqa: E402

import openafm  # noqa: E402
from openafm.runtime.constrained import GrammarConstraint  # noqa: E402
from openafm.runtime.generate import GenerationStats, generate_tokens  # noqa: E402
from openafm.runtime.request import Forced  # noqa: E402

# A long free-text field: after the opening key every token is sampled under the mask, as in open text.
LONG_TEXT = {"type": "object", "properties": {"story": {"type": "string", "minLength": 400}}, "required": ["story"]}
PERSON = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 40}, "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "occupation": {"type": "string", "maxLength": 40},
    "favourite_colour": {"enum": ["red", "orange", "yellow", "green", "blue", "indigo", "violet"]},
    "hobbies": {"type": "array", "items": {"type": "string", "maxLength": 30}, "minItems": 1, "maxItems": 3},
    "is_student": {"type": "boolean"}},
    "required": ["name", "age", "occupation", "favourite_colour", "hobbies", "is_student"],
    "additionalProperties": False}


def per_token_times(lm, ids, n, constraint):
    """Seconds between consecutive generated tokens (the first token, which includes prefill, excluded)."""
    stamps = []
    generate_tokens(lm.model, [ids], max_new_tokens=n, constraint=constraint, forced=Forced.SAMPLE,
                    tokenizer=lm.tokenizer, on_token=lambda e: stamps.append(time.perf_counter()))
    return [b - a for a, b in zip(stamps, stamps[1:])]


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--tokens", type=int, default=64, help="tokens per per-token timing run")
    args = p.parse_args()
    lm = openafm.load()
    story_ids = lm.encode(lm.chat_prompt("Write a short story about a lighthouse keeper, as JSON."))
    person_ids = lm.encode(lm.chat_prompt("Describe a fictional person as JSON."))
    GrammarConstraint.from_json_schema(PERSON, lm.tokenizer)            # build the tokenizer bridge once

    log(f"{args.repeats} interleaved rounds ...")
    free, guided, ff_wall, plain_wall, forced_share, mask_us = [], [], [], [], [], []
    for _ in range(args.repeats + 1):                                   # the first round is warm-up
        f = per_token_times(lm, story_ids, args.tokens, None)
        g_constraint = GrammarConstraint.from_json_schema(LONG_TEXT, lm.tokenizer)
        g = per_token_times(lm, story_ids, args.tokens, g_constraint)
        walls = {}
        for ff in (Forced.FEED, Forced.SAMPLE):
            stats = GenerationStats()
            t = time.perf_counter()
            out = generate_tokens(lm.model, [person_ids], max_new_tokens=200, forced=ff, tokenizer=lm.tokenizer,
                                  constraint=GrammarConstraint.from_json_schema(PERSON, lm.tokenizer), stats=stats)[0]
            walls[ff] = time.perf_counter() - t
            if ff is Forced.FEED:
                forced_share.append(stats.forced_tokens / max(stats.new_tokens, 1))
        c = GrammarConstraint.from_json_schema(LONG_TEXT, lm.tokenizer)
        t = time.perf_counter()
        for _ in range(200):
            c.allowed()
        mask_us.append((time.perf_counter() - t) / 200 * 1e6)
        free.append(statistics.median(f))
        guided.append(statistics.median(g))
        ff_wall.append(walls[Forced.FEED])
        plain_wall.append(walls[Forced.SAMPLE])
    free, guided, ff_wall, plain_wall, forced_share, mask_us = (x[1:] for x in (free, guided, ff_wall, plain_wall,
                                                                                 forced_share, mask_us))
    med = statistics.median
    result = {
        "model": "smollm2-135m-instruct fp32", "tokens_per_run": args.tokens, "repeats": args.repeats,
        "per_token_ms": {"unconstrained": 1e3 * med(free), "constrained": 1e3 * med(guided)},
        "ratio_constrained_over_unconstrained": med(guided) / med(free), "target_ratio": 1.05,
        "mask_us_median": med(mask_us),
        "json_object_seconds": {"fast_forward": med(ff_wall), "no_fast_forward": med(plain_wall)},
        "ratio_no_fast_forward_over_fast_forward": med(plain_wall) / med(ff_wall),
        "forced_token_share": med(forced_share),
        "last_object": out.text,
    }
    emit(result, args.json)


if __name__ == "__main__":
    main()
