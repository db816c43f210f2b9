"""What post-training buys the default model, on held-out data only: each model of --models (default: the raw
SmolLM2-135M-Instruct, and openafm-135m, made from it by recipes/default-model.yaml) on the same items, greedy.

    python benchmarks/default_model.py --json                 # resumable: finished parts are kept in --out

Parts (each item held out by construction: openafm.splits, tested in tests/test_heldout_disjoint.py):
    bfcl          BFCL simple / multiple / parallel, held-out question ids, constrained decoding (AST accuracy)
    tool_rounds   held-out tool families (data/tool_rounds.py) in an openafm.fm session with Apple's default
                  tool_choice: success = the tool ran exactly once, the right tool and arguments, and an answer
                  that contains the result's values; asked_once_right counts the model's own calls instead (a call
                  it repeats is in the transcript though RepeatedCalls.REUSE does not run it again)
    guided        held-out @generable schemas (data/guided.py) through session.respond(json_schema=...): valid and
                  non-degenerate (eval/guided_quality.py: no empty strings, no repeated items, the asked count)
    realworld     check-jsonschema's SchemaStore schemas as a session decodes them (structured decoding, 400 tokens):
                  valid, and valid without a degenerate fill (eval/guided_quality.py)
    ifeval        verifiable instructions, held-out prompts, prompt-level strict
    math          reasoning-gym chain_sum held-out questions (the recipe trains on the train split) and
                  gsm_symbolic (never trained on), last number exact
    multilingual  held-out UDHR articles asked in another language: the answer's language (py3langid) matches
    perplexity    held-out Debian Reference text
    weight_forms  the same text's perplexity with float weights and with the GGUF's block weights (the form openafm.load
                  serves), to show what folding an adapter into block weights costs
    decode_speed  greedy decode tokens/s of each model as openafm.load serves it, interleaved (run it alone)

Every rate comes with n and a 95% Wilson interval. Figures: bfcl_gain_points (min over the three categories),
tool_single_call_rate, guided_nondegenerate_rate, realworld_valid_rate, realworld_nondegenerate_rate, if_gain_points,
math_gain_points, multilingual_language_match, ppl_ratio_after — each for the last model of --models against the first — and the
pipeline's reward model's held-out pairwise accuracy, rm_pair_accuracy and rm_pair_accuracy_math (with n and
intervals), read from docs/results/reward_model.json.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

import _schemastore
from _common import emit, log, parser
import openafm
from openafm import fm
from openafm.checkpoint.load import load_model
from openafm.checkpoint.packaged import BUNDLED
from openafm.data.guided import guided_example
from openafm.data.pipeline.langid import identify
from openafm.data.tool_rounds import missing_values, tool_round_cases
from openafm.eval.guided_quality import degeneracies
from openafm.eval.harness import run_eval
from openafm.eval.perplexity import perplexity
from openafm.eval.registry import get_task
from openafm.eval.report import compare_chart, wilson_interval
from openafm.eval.texts import english_text
from openafm.fm import GenerationSchema, InvalidGenerationSchemaError, SchemaFit, StructuredDecoding
from openafm.io import write_text_atomic
from openafm.rl.multilingual_prompts import Kind as UDHRKind
from openafm.rl.multilingual_prompts import udhr_prompts
from openafm.rl.prompts import PromptSource, build_prompts
from openafm.rl.rewards.registry import Extract, extracted
from openafm.rl.rollout import greedy_rows
from openafm.runtime.constrained import GrammarConstraint, GrammarError
from openafm.runtime.generate import GenerationStats
from openafm.splits import Split

ROOT = Path(__file__).resolve().parent.parent
BFCL = ("simple", "multiple", "parallel")
GREEDY = fm.GenerationOptions(sampling=fm.SamplingMode.greedy(), maximum_response_tokens=160)
GREEDY_OBJECT = fm.GenerationOptions(sampling=fm.SamplingMode.greedy(), maximum_response_tokens=400)
MATH = {"chain_sum": {"dataset": "chain_sum", "config": {"min_terms": 2, "max_terms": 3, "max_digits": 2}, "hint": ""},
        "gsm_symbolic": {"dataset": "gsm_symbolic", "hint": ""}}


def rate(hits: int, n: int) -> dict:
    lo, hi = wilson_interval(hits, n)
    return {"rate": hits / n if n else None, "hits": hits, "n": n, "ci95": [round(lo, 4), round(hi, 4)]}


# --- parts ---------------------------------------------------------------------------------------------------

def harness_tasks(name: str, out: Path, limit: int, weights: str) -> dict:
    tasks = [get_task(f"bfcl_{c}_heldout_constrained") for c in BFCL] + [get_task("ifeval"),
                                                                           get_task("perplexity_heldout")]
    lm = load_model(name, weights=weights)
    summary = run_eval(lm, tasks, limit=limit, out=out / "harness",
                       config={"model": name, "adapter": None, "dtype": "float32", "seed": 0})
    return {t: {"value": s["value"], "n": s["n"], "ci95": s["ci95"]} for t, s in summary["tasks"].items()}


async def tool_case(model, case) -> dict:
    session = fm.LanguageModelSession(model=model, tools=case.tools)
    answer = await session.respond(case.question, options=GREEDY)
    calls = [(t.name, args) for t in case.tools for args in t.calls]          # the tools' runs
    asked = [(c["name"], json.loads(c["arguments"])) for e in session.transcript.entries     # the model's calls,
             for c in e.get("toolCalls", [])]                                               # repeats included
    once = len(calls) == 1 and calls[0] == case.expected_call
    missing = missing_values(case.result_values, answer)
    return {"where": case.where, "calls": calls, "asked": asked, "answer": answer, "called_once_right": once,
            "asked_once_right": len(asked) == 1 and asked[0] == case.expected_call,
            "missing": missing, "grounded": not missing, "success": once and not missing}


def miss_kinds(rows: list[dict]) -> dict[str, int]:
    """Why the failed tool rounds failed, each counted once, in this order: the model asked for no call; it asked
    for a wrong tool or arguments, or more than one call (`asked`, repeats included); the tool ran otherwise than
    once and right (the framework's doing); the call was right but the answer drops a result value (`missing`)."""
    kinds = {"no_call": 0, "wrong_or_extra_call": 0, "tool_not_run_once": 0, "answer_drops_a_value": 0}
    for r in rows:
        if r["success"]:
            continue
        if not r["asked"]:
            kinds["no_call"] += 1
        elif not r["asked_once_right"]:
            kinds["wrong_or_extra_call"] += 1
        elif not r["called_once_right"]:
            kinds["tool_not_run_once"] += 1
        else:
            kinds["answer_drops_a_value"] += 1
    return kinds


def tool_rounds(name: str, n: int, weights: str) -> dict:
    return score_tool_cases(fm.SystemLanguageModel(model=name, weights=weights),
                            tool_round_cases(n, seed=0, split=Split.HELDOUT), f"tool rounds {name}")


def score_tool_cases(model: fm.SystemLanguageModel, cases, desc: str) -> dict:
    """Each case asked in a fresh session -> success and its parts (rates with Wilson intervals), miss kinds, rows."""
    rows = [asyncio.run(tool_case(model, case)) for case in tqdm(cases, desc=desc)]
    return {"success": rate(sum(r["success"] for r in rows), len(rows)),
            "called_once_right": rate(sum(r["called_once_right"] for r in rows), len(rows)),
            "asked_once_right": rate(sum(r["asked_once_right"] for r in rows), len(rows)),
            "grounded": rate(sum(r["grounded"] for r in rows), len(rows)),
            "mean_calls": sum(len(r["calls"]) for r in rows) / len(rows),
            "mean_asked": sum(len(r["asked"]) for r in rows) / len(rows), "misses": miss_kinds(rows), "rows": rows}


def guided(name: str, n: int, weights: str) -> dict:
    model = fm.SystemLanguageModel(model=name, weights=weights)
    rows = []
    for i in tqdm(range(n), desc=f"guided {name}"):
        ex = guided_example(0, i, Split.HELDOUT)
        session = fm.LanguageModelSession(model=model)
        try:
            out = asyncio.run(session.respond(ex.request, json_schema=ex.schema, options=GREEDY_OBJECT))
            value, error = out.value(), None
        except fm.GenerationError as e:
            value, error = None, f"{type(e).__name__}: {e}"
        problems = degeneracies(value, ex.schema, counts=ex.counts) if error is None else []
        rows.append({"where": ex.where, "type": ex.type_name, "counts": ex.counts, "error": error,
                     "problems": problems, "output": value})
    ok = [r for r in rows if r["error"] is None]
    return {"valid": rate(len(ok), n), "nondegenerate": rate(sum(not r["problems"] for r in ok), n),
            "asked_counts": rate(sum(not any("asked for" in p for p in r["problems"]) for r in ok if r["counts"]),
                                 sum(1 for r in rows if r["counts"])),
            "rows": rows}


def realworld(name: str, limit: int, weights: str) -> dict:
    lm = openafm.load(name, weights=weights)
    result = _schemastore.run(lm, lm.tokenizer, limit, 0, 400, schema_cls=GenerationSchema,
                              schema_error=InvalidGenerationSchemaError, constraint_cls=GrammarConstraint,
                              grammar_error=GrammarError, fits={"narrowed": SchemaFit.NARROWED},
                              decodings={"structured": StructuredDecoding()})
    gen, n = result["generation"]["structured"], result["generation"]["sample"]["size"]
    schemas = _schemastore.load_schemas(_schemastore.vendor_dir())
    for r in gen["results"]:
        r["problems"] = (degeneracies(json.loads(r["output"]), schemas[r["schema"]])
                         if r["outcome"] == "validated" else None)
    return {"valid": rate(gen["validated"], n), "nondegenerate": rate(sum(r["problems"] == [] for r in gen["results"]), n),
            "detail": gen}


def math(name: str, n: int, weights: str) -> dict:
    lm = load_model(name, weights=weights)
    tok = lm.tokenizer
    out = {}
    for label, options in MATH.items():
        records = build_prompts(PromptSource.REASONING_GYM, options, Split.HELDOUT, size=n, seed=0)
        prompts = [tok.encode(tok.apply_chat_template([{"role": "user", "content": r.prompt}],
                                                      add_generation_prompt=True)) for r in records]
        rows = greedy_rows(lm.model, prompts, max_new_tokens=96, eos_token_ids=set(tok.eos_token_ids), batch=16)
        hits = sum(extracted(tok.decode(row.text_ids), Extract.LAST_NUMBER, "") == str(r.target["answer"])
                   for r, row in zip(records, rows, strict=True))
        out[label] = rate(hits, len(records))
    return out


def multilingual(name: str, n: int, weights: str) -> dict:
    lm = load_model(name, weights=weights)
    tok = lm.tokenizer
    records = udhr_prompts(Split.HELDOUT, kinds=[UDHRKind.ANSWER_IN])[:n]
    prompts = [tok.encode(tok.apply_chat_template([{"role": "user", "content": r.prompt}], add_generation_prompt=True))
               for r in records]
    rows = greedy_rows(lm.model, prompts, max_new_tokens=96, eos_token_ids=set(tok.eos_token_ids), batch=16)
    langs = [identify(tok.decode(row.text_ids))[0] for row in rows]
    return {"language_match": rate(sum(got == r.lang for got, r in zip(langs, records, strict=True)), len(records)),
            "languages": sorted({r.lang for r in records})}


def weight_forms(name: str, tokens: int) -> dict:
    """Held-out perplexity with float weights and with the GGUF's block weights (a bundle re-quantizes its merged
    weights there): what serving from the fast format costs in quality."""
    ids = load_model(name).tokenizer.encode(english_text(Split.HELDOUT))[:tokens]
    return {form: perplexity(load_model(name, weights=form).model, ids, context=512).ppl
            for form in ("float32", "native")} | {"tokens": tokens}


def decode_speed(names: list[str], rounds: int) -> dict:
    """Greedy decode tokens/s of each model as openafm.load serves it, interleaved round by round (medians): a bundle
    stores its folded matrices as Q8_0 where the base had Q4_1, so it reads more bytes per token."""
    models = {n: openafm.load(n) for n in names}
    prompt = "Write a short story about a lighthouse keeper."
    rates: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds + 1):                                  # round 0 warms every model up alike
        for name, lm in models.items():
            stats = GenerationStats()
            lm.chat(prompt, max_tokens=96, stats=stats)
            if r:
                rates[name].append(stats.decode_tokens_per_second)
    out = {n: statistics.median(v) for n, v in rates.items()}
    return {"tok_s": out, "ratio_last_over_first": out[names[-1]] / out[names[0]], "rounds": rounds,
            "max_tokens": 96, "load_average_1min": os.getloadavg()[0]}


# --- the run -------------------------------------------------------------------------------------------------

def part(out: Path, label: str, make) -> dict:
    """A part's result, computed once and kept in OUT/<label>.json (a rerun skips it)."""
    path = out / f"{label}.json"
    if path.is_file():
        return json.loads(path.read_text())
    t = time.perf_counter()
    result = {**make(), "seconds": round(time.perf_counter() - t, 1)}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(result, indent=1, ensure_ascii=False, default=str) + "\n")
    return result


PARTS = ("harness", "tool_rounds", "guided", "math", "multilingual", "realworld", "weight_forms")


def measure(name: str, weights: str | None, out: Path, args) -> dict:
    log(f"== {name}" + (f" (weights={weights})" if weights else ""))
    loaded = weights or "dequantized"           # the harness, math and multilingual parts' own default
    served = weights or "auto"                  # sessions and openafm.load: the blocks as serve runs them
    makers = {"harness": lambda: harness_tasks(name, out, args.limit, loaded),
              "tool_rounds": lambda: tool_rounds(name, args.n, served),
              "guided": lambda: guided(name, args.n, served),
              "math": lambda: math(name, args.n, loaded),
              "multilingual": lambda: multilingual(name, args.n, loaded),
              "realworld": lambda: realworld(name, args.realworld_limit, served),
              "weight_forms": lambda: weight_forms(name, 16 * 512)}
    return {label: part(out, label, makers[label]) for label in args.parts
            if not (weights and label == "weight_forms")}    # float vs block weights: the default run's question


OUTPUTS = {"tool_rounds": (lambda r: r["rows"], "answer"), "guided": (lambda r: r["rows"], "output"),
           "realworld": (lambda r: r["detail"]["results"], "output")}     # part -> (its items, an item's output)


def agreement(first: dict, last: dict) -> dict:
    """Per part with outputs, how many items got the same output in two runs (e.g. two weight forms)."""
    out = {}
    for label in OUTPUTS.keys() & first.keys() & last.keys():
        items, field = OUTPUTS[label]
        pairs = list(zip(items(first[label]), items(last[label]), strict=True))
        out[label] = {"identical": sum(a[field] == b[field] for a, b in pairs), "n": len(pairs)}
    return out


def figures(before: dict, after: dict) -> dict:
    h0, h1 = before["harness"], after["harness"]
    points = {c: 100 * (h1[f"bfcl_{c}_heldout_constrained"]["value"] - h0[f"bfcl_{c}_heldout_constrained"]["value"])
              for c in BFCL}
    return {"bfcl_gain_points": min(points.values()), "bfcl_gain_points_by_category": points,
            "tool_single_call_rate": after["tool_rounds"]["success"]["rate"],
            "guided_nondegenerate_rate": after["guided"]["nondegenerate"]["rate"],
            "guided_gain_points": 100 * (after["guided"]["nondegenerate"]["rate"]
                                         - before["guided"]["nondegenerate"]["rate"]),
            "realworld_valid_rate": after["realworld"]["valid"]["rate"],
            "realworld_nondegenerate_rate": after["realworld"]["nondegenerate"]["rate"],
            "if_gain_points": 100 * (h1["ifeval"]["value"] - h0["ifeval"]["value"]),
            "math_gain_points": 100 * (after["math"]["gsm_symbolic"]["rate"] - before["math"]["gsm_symbolic"]["rate"]),
            "math_gain_points_chain_sum": 100 * (after["math"]["chain_sum"]["rate"]
                                                 - before["math"]["chain_sum"]["rate"]),
            "multilingual_language_match": after["multilingual"]["language_match"]["rate"],
            "ppl_ratio_after": h1["perplexity_heldout"]["value"] / h0["perplexity_heldout"]["value"]}


def reward_model_figures() -> dict:
    """The pipeline's reward model, trained from the raw model by benchmarks/reward_model.py: its held-out pairwise
    accuracy, pooled and on math, read from docs/results/reward_model.json (that benchmark's own figures, not rerun
    here)."""
    rm = json.loads((ROOT / "docs" / "results" / "reward_model.json").read_text())
    interval = rm["pair_accuracy_interval"]
    return {"rm_pair_accuracy": rm["pair_accuracy_verifiable"], "rm_pair_accuracy_math": rm["pair_accuracy_math"],
            "rm_pair_accuracy_n": interval["all"]["n"], "rm_pair_accuracy_ci95": interval["all"]["ci95"],
            "rm_pair_accuracy_math_n": interval["math"]["n"], "rm_pair_accuracy_math_ci95": interval["math"]["ci95"]}


def as_summary(result: dict) -> dict:
    """One model's rates in the evaluation report's shape, for eval/report.compare_chart."""
    rows = {f"BFCL {c}": result["harness"][f"bfcl_{c}_heldout_constrained"] for c in BFCL}
    rows["IFEval strict"] = result["harness"]["ifeval"]
    rows["tool round trip"] = _as_row(result["tool_rounds"]["success"])
    rows["guided, real"] = _as_row(result["guided"]["nondegenerate"])
    rows["SchemaStore valid"] = _as_row(result["realworld"]["valid"])
    rows["SchemaStore, real"] = _as_row(result["realworld"]["nondegenerate"])
    rows |= {f"math {k}": _as_row(v) for k, v in result["math"].items() if k in MATH}
    rows["answer language"] = _as_row(result["multilingual"]["language_match"])
    return {"tasks": {k: {**v, "chance": 0.0, "metric": "rate"} for k, v in rows.items()}}


def _as_row(r: dict) -> dict:
    return {"value": r["rate"], "ci95": r["ci95"], "n": r["n"]}


def record(name: str, heldout: dict) -> None:
    """Write the held-out figures into a bundled model's sidecar (its `heldout` key)."""
    if name not in BUNDLED:
        raise SystemExit(f"--sidecar: {name!r} is not a bundled model ({sorted(BUNDLED)})")
    path = BUNDLED[name].sidecar_path
    meta = json.loads(path.read_text())
    write_text_atomic(path, json.dumps({**meta, "heldout": heldout}, indent=1) + "\n")


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--models", default="smollm2-135m-instruct,openafm-135m",
                   help="comma-separated models openafm.load accepts; figures compare the last with the first "
                        "(one model: its parts only, kept in --out for a later comparison)")
    p.add_argument("--n", type=int, default=100, help="items per session / math / multilingual part")
    p.add_argument("--limit", type=int, default=100, help="items per harness task (BFCL, IFEval, perplexity windows)")
    p.add_argument("--realworld-limit", type=int, default=26, help="SchemaStore schemas generated for (all: 26)")
    p.add_argument("--out", default=str(ROOT / "runs" / "default-model-bench"), help="work folder (resumable)")
    p.add_argument("--threads", type=int, default=2, help="torch threads")
    p.add_argument("--weights", help="comma-separated GGUF weight forms (native: blocks with float32 activations; "
                                      "native-int8: activations rounded to int8 as llama.cpp computes), each model "
                                      "measured with each, every part loading it that way (parts go to "
                                      "OUT/<model>@<weights>; with two forms of one model the output prints how many "
                                      "items got the same output). Default: the harness, math and multilingual parts "
                                      "dequantize to float32, sessions and SchemaStore run the blocks as serve does")
    p.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated parts to run (default: all of {PARTS}; "
                                                             "the figures need harness, tool_rounds, guided, math, "
                                                             "multilingual and realworld)")
    p.add_argument("--speed-rounds", type=int, default=5,
                   help="interleaved rounds of a 96-token greedy decode per model, for tokens/s (0: skip; run alone)")
    p.add_argument("--sidecar", action="store_true",
                   help="record the figures (and this command) in the last model's bundle sidecar (a bundled model)")
    p.add_argument("--plot", help="also draw the models' rates side by side (95%% Wilson intervals) into this PNG")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    forms = [w.strip() for w in args.weights.split(",")] if args.weights else [None]
    args.parts = [x.strip() for x in args.parts.split(",") if x.strip()]
    if not names:
        raise SystemExit("--models names no model")
    if bad := [w for w in forms if w not in (None, "native", "native-int8")] + [x for x in args.parts if x not in PARTS]:
        raise SystemExit(f"--weights / --parts: {bad} not known (weights: native, native-int8; parts: {PARTS})")
    variants = [(n, w) for n in names for w in forms]
    labels = [n + (f"@{w}" if w else "") for n, w in variants]
    results = {label: measure(n, w, Path(args.out) / label, args) for label, (n, w) in zip(labels, variants)}
    complete = all(x in args.parts for x in PARTS[:-1])
    if args.plot:
        compare_chart([as_summary(r) for r in results.values()], labels, Path(args.plot))
    found = (figures(results[labels[0]], results[labels[-1]]) | reward_model_figures()
             if len(labels) > 1 and complete else None)
    same = agreement(results[labels[0]], results[labels[-1]]) if len(names) == 1 and len(forms) > 1 else None
    speed = decode_speed(names, args.speed_rounds) if args.speed_rounds else None
    if args.sidecar:
        record(names[-1], {"command": "python benchmarks/default_model.py " + " ".join(sys.argv[1:]),
                           "against": names[0], "figures": found})
    emit({"command": "python benchmarks/default_model.py " + " ".join(sys.argv[1:]), "models": names,
          "weights": args.weights, "split": "heldout", "decoding": "greedy", "figures": found,
          "same_output": same, "decode_speed": speed,
          "per_model": {n: {k: {kk: vv for kk, vv in v.items() if kk != "rows"} for k, v in r.items()}
                        for n, r in results.items()}}, args.json)


if __name__ == "__main__":
    main()
