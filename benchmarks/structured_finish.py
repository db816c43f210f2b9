"""Do structured requests finish? Over a fixed set of 41 @generable types (nested, recursive, bounded lists, regex,
enums; benchmarks/_structured_types.py), the share of `session.respond(prompt, generating=T)` requests that end
with a complete, valid object within the default budget (512 tokens), for the base model and for each decoding
remedy (openafm.fm.StructuredDecoding) and the guided-generation adapter. Greedy decoding, so the outcome of each
request is deterministic; latency medians are over the finished requests and depend on the machine's load.

    python benchmarks/structured_finish.py --json [--adapter guided.safetensors] [--configs base,bounded,...]

Each row: finished / cut (the budget ran out: DecodingFailureError, never returned as complete) / invalid (a
returned object that fails jsonschema validation: must be 0) / error (anything else, named).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, log, parser  # noqa: E402
from _structured_types import TYPES  # noqa: E402

import jsonschema  # noqa: E402

import openafm.fm as fm  # noqa: E402
from openafm.fm.options import DEFAULT_MAXIMUM_RESPONSE_TOKENS  # noqa: E402

DEFAULTS = fm.StructuredDecoding()
SINGLE_REMEDIES = ("max_items", "max_depth", "repetition_penalty", "close_within")
PENALTY = 1.3     # repetition_penalty is off by default; its ablation row uses this value


def _alone(name: str) -> fm.StructuredDecoding:
    """Only one remedy on, at its default (or PENALTY for the repetition penalty)."""
    value = getattr(DEFAULTS, name)
    return fm.StructuredDecoding.off().replace(**{name: PENALTY if value is None else value})


CONFIGS = {
    # name: (StructuredDecoding, uses the adapter)
    "base": (fm.StructuredDecoding.off(), False),
    **{name: (_alone(name), False) for name in SINGLE_REMEDIES},
    "default_remedies": (DEFAULTS, False),
    "adapter": (fm.StructuredDecoding.off(), True),
    "adapter_with_remedies": (DEFAULTS, True),
}


def prompt_for(cls) -> str:
    description = cls.generation_schema().to_json_schema().get("description", cls.__name__)
    return f"Invent an example: {description[0].lower()}{description[1:]}."


async def one(model: fm.SystemLanguageModel, cls, structured: fm.StructuredDecoding) -> dict:
    session = fm.LanguageModelSession(model=model)
    schema = cls.generation_schema().to_json_schema()
    options = fm.GenerationOptions(temperature=0.0, structured=structured)
    t = time.perf_counter()
    try:
        result = await session.respond(prompt_for(cls), generating=cls, options=options)
    except fm.DecodingFailureError as e:
        return {"type": cls.__name__, "outcome": "cut", "seconds": time.perf_counter() - t, "detail": str(e)[-120:]}
    except Exception as e:  # noqa: BLE001 - a benchmark row names whatever went wrong
        return {"type": cls.__name__, "outcome": "error", "seconds": time.perf_counter() - t,
                "detail": f"{type(e).__name__}: {e}"[:200]}
    seconds = time.perf_counter() - t
    try:
        jsonschema.validate(json.loads(result.generated_content.to_json()), schema)
    except jsonschema.ValidationError as e:
        return {"type": cls.__name__, "outcome": "invalid", "seconds": seconds, "detail": e.message[:200]}
    return {"type": cls.__name__, "outcome": "finished", "seconds": seconds}


def run_config(name: str, model: fm.SystemLanguageModel, structured: fm.StructuredDecoding, kinds,
               only: set[str] | None = None) -> dict:
    """Every type of `kinds` (or only those named in `only`) under one configuration."""
    rows = []
    for kind in kinds:
        for cls in TYPES[kind]:
            if only is not None and cls.__name__ not in only:
                continue
            row = asyncio.run(one(model, cls, structured))
            row["kind"] = kind
            rows.append(row)
            log(f"[{name}] {kind}/{cls.__name__}: {row['outcome']} in {row['seconds']:.1f}s")
    counts = {o: sum(r["outcome"] == o for r in rows) for o in ("finished", "cut", "invalid", "error")}
    finished = [r["seconds"] for r in rows if r["outcome"] == "finished"]
    return {
        "structured": structured.to_dict(),
        "subset": "the types the base model does not finish" if only is not None else "all",
        "requests": len(rows), **counts,
        "finish_rate": counts["finished"] / max(1, len(rows)),
        "finish_rate_by_kind": {k: sum(r["outcome"] == "finished" for r in rows if r["kind"] == k)
                                / max(1, sum(r["kind"] == k for r in rows)) for k in kinds},
        "median_seconds_finished": statistics.median(finished) if finished else None,
        "rows": rows,
    }


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--adapter", default=None, help="the guided-generation adapter file (for the adapter rows)")
    p.add_argument("--configs", default=None, help=f"comma-separated subset of {list(CONFIGS)}")
    p.add_argument("--kinds", default=",".join(TYPES), help=f"comma-separated subset of {list(TYPES)}")
    p.add_argument("--out", default=None, help="also write the JSON here after each configuration (a killed run "
                                               "keeps the configurations it finished)")
    p.add_argument("--base-from", default=None, metavar="JSON",
                   help="take the base config's rows from an earlier run's JSON instead of running it again")
    p.add_argument("--ablate-on-failures", action="store_true",
                   help="run the single-remedy configs (max_items, max_depth, repetition_penalty, close_within) only "
                        "on the types the base config does not finish (needs base first); saves most of the time")
    args = p.parse_args()
    names = args.configs.split(",") if args.configs else [n for n, (_, a) in CONFIGS.items() if args.adapter or not a]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        p.error(f"unknown configs {unknown}; choose from {list(CONFIGS)}")
    kinds = args.kinds.split(",")
    if [k for k in kinds if k not in TYPES]:
        p.error(f"--kinds takes {list(TYPES)}")
    base = fm.SystemLanguageModel()
    adapted = fm.SystemLanguageModel(adapter=fm.SystemLanguageModel.Adapter(args.adapter)) if args.adapter else None
    results = {}
    if args.base_from:
        results["base"] = json.loads(Path(args.base_from).read_text())["configs"]["base"]
        names = [n for n in names if n != "base"]
    for name in names:
        structured, needs_adapter = CONFIGS[name]
        if needs_adapter and adapted is None:
            p.error(f"config {name!r} needs --adapter")
        only = None
        if args.ablate_on_failures and name in SINGLE_REMEDIES:
            if "base" not in results:
                p.error("--ablate-on-failures needs the base config first in --configs")
            only = {r["type"] for r in results["base"]["rows"] if r["outcome"] != "finished"}
        results[name] = run_config(name, adapted if needs_adapter else base, structured, kinds, only)
        if args.out:
            Path(args.out).write_text(json.dumps(summary(results, kinds, args.adapter), indent=2) + "\n")
    emit(summary(results, kinds, args.adapter), args.json)


def summary(results: dict, kinds: list[str], adapter: str | None) -> dict:
    """The headline figures over the configurations run so far (the 'after' one is the best on all types)."""
    full = [n for n in results if results[n]["subset"] == "all"]
    after_name = max(full, key=lambda n: (results[n]["finish_rate"], -results[n]["invalid"]))
    return {"types": sum(len(TYPES[k]) for k in kinds), "budget_tokens": DEFAULT_MAXIMUM_RESPONSE_TOKENS,
            "finish_rate_before": results.get("base", {}).get("finish_rate"),
            "finish_rate_after": results[after_name]["finish_rate"], "after_config": after_name,
            "median_seconds_before": results.get("base", {}).get("median_seconds_finished"),
            "median_seconds_after": results[after_name]["median_seconds_finished"],
            "adapter": adapter, "configs": results}


if __name__ == "__main__":
    main()
