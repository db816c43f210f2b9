"""Speculative decoding on the default model: tokens/s with its distilled draft vs plain decoding, greedy (outputs
asserted identical), gamma = 2..8, float32 and the runtime's default GGUF-block (Q4_1) target, temperature 0.7, and
constrained JSON (fast-forward alone vs fast-forward + speculative, invalid objects counted).

    openafm draft train --out out/drafts/smollm2 --minutes 4        # the draft (a few minutes on a 2-core CPU)
    python benchmarks/speculative.py --json --draft out/drafts/smollm2

Every variant runs the same held-out chat prompts (none is an instruction prompt the draft was distilled on),
interleaved round after round in one process; tokens/s are decode tokens (after the first) over decode seconds,
summed over the prompts, median over rounds. greedy_speedup is the float32 target's at the best gamma.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, log, median, parser  # noqa: E402

import jsonschema  # noqa: E402

import openafm  # noqa: E402
from openafm.runtime.constrained import GrammarConstraint  # noqa: E402
from openafm.runtime.draft import load_draft  # noqa: E402
from openafm.runtime.generate import GenerationStats, generate_tokens  # noqa: E402
from openafm.runtime.sampling import SamplingParams  # noqa: E402
from openafm.runtime.proposers import ProposerKind  # noqa: E402

PROMPTS = ["What is the capital of France?", "Write a short poem about the sea.",
           "Explain what a computer does, in two sentences.", "Give me three tips for sleeping well.",
           "Why is the sky blue?", "Describe a cat to someone who has never seen one."]
PERSON = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 24}, "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "city": {"type": "string", "maxLength": 24}, "hobbies": {"type": "array", "items": {"type": "string",
                                                                                          "maxLength": 16},
                                                                "minItems": 1, "maxItems": 3}},
    "required": ["name", "age", "city", "hobbies"], "additionalProperties": False}
JSON_PROMPTS = ["Invent a person and describe them as JSON.", "A fictional sailor, as JSON.",
                "Make up a teacher who lives in Paris, as JSON.", "A retired pilot, in JSON."]


def run_plain(lm, ids, new, sampling=SamplingParams(), constraint=None):
    stats = GenerationStats()
    out = generate_tokens(lm.model, [ids], max_new_tokens=new, sampling=sampling, constraint=constraint,
                          tokenizer=lm.tokenizer, eos_token_ids=set(lm.tokenizer.eos_token_ids), stats=stats)[0]
    return out, stats, None


def run_spec(lm, draft, ids, new, gamma, sampling=SamplingParams(), constraint=None):
    stats = GenerationStats()
    out = generate_tokens(lm.model, [ids], max_new_tokens=new, gamma=gamma, sampling=sampling, constraint=constraint,
                          tokenizer=lm.tokenizer, eos_token_ids=set(lm.tokenizer.eos_token_ids), stats=stats,
                          speculate=ProposerKind.DRAFT, draft=draft)[0]
    return out, stats, stats


def sweep(lm, draft, prompts, variants: dict, rounds: int, new: int) -> dict:
    """variants: name -> fn(ids) -> (generation, stats, spec). Interleaved per round; per variant the decode
    tokens/s (sum over prompts), outputs of the first round, and acceptance figures."""
    seconds = {k: [] for k in variants}
    outputs = {k: [] for k in variants}
    accept = {k: [0, 0, 0] for k in variants}        # accepted, proposed, rounds
    tokens = {k: 0 for k in variants}
    for r in range(rounds):
        total = {k: [0.0, 0] for k in variants}
        for ids in prompts:
            for name, fn in variants.items():
                out, stats, spec = fn(ids)
                total[name][0] += stats.decode_seconds
                total[name][1] += max(0, stats.new_tokens - 1)
                if r == 0:
                    outputs[name].append(out.token_ids)
                    if spec is not None:
                        accept[name][0] += spec.accepted
                        accept[name][1] += spec.proposed
                        accept[name][2] += spec.decode_steps
        for name in variants:
            seconds[name].append(total[name][0])
            tokens[name] = total[name][1]
    result = {}
    for name in variants:
        tok_s = [tokens[name] / s for s in seconds[name]]
        a, p, n = accept[name]
        result[name] = {"decode_tok_s": median(tok_s), "decode_tok_s_runs": [round(x, 2) for x in tok_s],
                        "decode_tokens": tokens[name]}
        if p:
            result[name] |= {"acceptance_rate": a / p, "mean_accepted_length": a / n}
    return result, outputs


def main() -> None:
    p = parser(__doc__.split("\n")[0])
    p.add_argument("--draft", default="out/drafts/smollm2", help="draft directory (openafm draft train --out DIR)")
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--gammas", default="2,3,4,5,6,8")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--prompts", type=int, default=len(PROMPTS), help="use the first N prompts")
    p.add_argument("--skip", default="", help="comma list of sections to skip: native,sampled,constrained")
    args = p.parse_args()
    if not Path(args.draft, "draft.json").is_file():
        raise SystemExit(f"no draft at {args.draft}: make one with `openafm draft train --out {args.draft}`")
    skip = set(filter(None, args.skip.split(",")))
    gammas = [int(g) for g in args.gammas.split(",")]
    result = {"model": "smollm2-135m-instruct", "draft": json.loads(Path(args.draft, "draft.json").read_text())
              ["config"] | {}, "new_tokens": args.new_tokens, "rounds": args.rounds, "prompts": PROMPTS,
              "gammas": gammas, "threads": __import__("torch").get_num_threads()}
    result["draft"] = {"dir": args.draft, "train": json.loads(Path(args.draft, "train.json").read_text())
                       if Path(args.draft, "train.json").is_file() else None}
    for weights in ("float32", "native"):
        if weights == "native" and "native" in skip:
            continue
        lm = openafm.load("smollm2-135m-instruct", weights=weights)
        draft = load_draft(args.draft, lm.model)
        result["draft"]["own_parameters"] = draft.num_parameters()
        result["target_parameters"] = lm.model.num_parameters()
        prompts = [lm.encode(lm.chat_prompt(q)) for q in PROMPTS[:args.prompts]]
        variants = {"plain": lambda ids: run_plain(lm, ids, args.new_tokens)}
        for g in gammas:
            variants[f"gamma_{g}"] = (lambda g: lambda ids: run_spec(lm, draft, ids, args.new_tokens, g))(g)
        log(f"{weights}: greedy, {len(variants)} variants x {len(prompts)} prompts x {args.rounds} rounds")
        t = time.perf_counter()
        figures, outputs = sweep(lm, draft, prompts, variants, args.rounds, args.new_tokens)
        base = figures["plain"]["decode_tok_s"]
        for g in gammas:
            f = figures[f"gamma_{g}"]
            f["speedup"] = f["decode_tok_s"] / base
            f["identical"] = outputs[f"gamma_{g}"] == outputs["plain"]
        best = max(gammas, key=lambda g: figures[f"gamma_{g}"]["speedup"])
        section = {"greedy": figures, "best_gamma": best, "seconds": time.perf_counter() - t,
                   "sample_output": lm.tokenizer.decode(outputs["plain"][0])}
        if "sampled" not in skip:
            sampling = SamplingParams(temperature=0.7, seed=0)
            sv = {"plain": lambda ids: run_plain(lm, ids, args.new_tokens, sampling),
                  f"gamma_{best}": lambda ids: run_spec(lm, draft, ids, args.new_tokens, best, sampling)}
            log(f"{weights}: temperature 0.7 at gamma {best}")
            sf, _ = sweep(lm, draft, prompts, sv, args.rounds, args.new_tokens)
            sf[f"gamma_{best}"]["speedup"] = sf[f"gamma_{best}"]["decode_tok_s"] / sf["plain"]["decode_tok_s"]
            section["temperature_0_7"] = sf
        result[weights] = section
        if weights == "float32":
            result["greedy_speedup"] = figures[f"gamma_{best}"]["speedup"]
            result["greedy_identical"] = all(figures[f"gamma_{g}"]["identical"] for g in gammas)
            result["best_gamma"] = best
            if "constrained" not in skip:
                result["constrained_json"] = constrained(lm, draft, best, args.rounds)
        del lm, draft
    emit(result, args.json)
    if args.json:
        Path("docs/results").mkdir(parents=True, exist_ok=True)
        Path("docs/results/speculative.json").write_text(json.dumps(result, indent=2) + "\n")


def constrained(lm, draft, gamma: int, rounds: int) -> dict:
    """Whole-object wall time: fast-forward alone vs fast-forward + speculative, greedy; invalid objects counted."""
    prompts = [lm.encode(lm.chat_prompt(q)) for q in JSON_PROMPTS]
    walls = {"fast_forward": [], "fast_forward_speculative": []}
    invalid = {k: 0 for k in walls}
    same = True
    for r in range(rounds):
        total = {k: 0.0 for k in walls}
        for ids in prompts:
            outs = {}
            for name in walls:
                c = GrammarConstraint.from_json_schema(PERSON, lm.tokenizer)
                t = time.perf_counter()
                if name == "fast_forward":
                    out = run_plain(lm, ids, 160, constraint=c)[0]
                else:
                    out = run_spec(lm, draft, ids, 160, gamma, constraint=c)[0]
                total[name] += time.perf_counter() - t
                outs[name] = out.token_ids
                try:
                    jsonschema.validate(json.loads(out.text), PERSON)
                except Exception:  # noqa: BLE001 (any failure to parse or validate is an invalid object)
                    invalid[name] += r == 0
            same = same and outs["fast_forward"] == outs["fast_forward_speculative"]
        for name in walls:
            walls[name].append(total[name])
    ff, spec = median(walls["fast_forward"]), median(walls["fast_forward_speculative"])
    return {"objects": len(prompts), "gamma": gamma, "wall_seconds_fast_forward": ff,
            "wall_seconds_fast_forward_speculative": spec, "speedup": ff / spec, "invalid": invalid,
            "identical_objects": same}


if __name__ == "__main__":
    main()
