"""`openafm synth OUT.jsonl`: rejection-sampling synthesis of verified SFT data (openafm.rl.synthesis.rejection): k samples per
prompt from a model, kept when a verifier accepts them, written with their provenance for `openafm sft --data`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from openafm.checkpoint.load import load_model
from openafm.checkpoint.packaged import RAW_MODEL
from openafm.data.instructions import instruction_prompts
from openafm.io import read_jsonl
from openafm.rl.synthesis.rejection import SynthPrompt, Verifier, model_sampler, rejection_sample, write_synth_jsonl

INSTRUCTIONS, MATH = "instructions", "math"
AUTO, MAJORITY = "auto", "majority"
MATH_DATASET = "basic_arithmetic"
ANSWER_HINT = "\nEnd your reply with a line 'Answer: ' followed by the final answer."

EPILOG = f"""prompts (--prompts) and the verifier each gets with --verifier auto:
  {INSTRUCTIONS:<12}  seeded prompts with checkable constraints (openafm.data.instructions); kept when every
                constraint is followed strictly (reward 'instructions', level strict, aggregate all)
  {MATH:<12}  reasoning-gym's {MATH_DATASET} problems with an 'Answer:' hint; kept when reasoning-gym's scorer
                gives the answer after 'Answer:' full marks (reward 'reasoning-gym')
  FILE.jsonl    {{"prompt": ..., "answer": ...}} per line: kept when the marked answer matches (reward 'math');
                lines without "answer" (all of them): majority vote over the k samples' answers
--verifier majority forces the vote for any prompts.

writes OUT.jsonl: {{"prompt", "response", "meta": {{source, verifier, reward or answer and agreement,
acceptance_rate, k, sample}}}} per kept sample (`openafm sft --data OUT.jsonl` reads it); prints a JSON summary.

example:
  openafm synth math.jsonl --prompts math --n 200 --k 8 --max-tokens 256
"""


def register(sub) -> None:
    p = sub.add_parser("synth", help="rejection-sample verified SFT data from a model",
                       description="Sample k responses per prompt, keep those a verifier accepts (a rule-based "
                                   "reward, or majority vote where only agreement is available), and write them "
                                   "as chat examples with their provenance.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", help="JSONL file to write")
    p.add_argument("--prompts", default=INSTRUCTIONS, help=f"{INSTRUCTIONS} (default), {MATH} or a JSONL file")
    p.add_argument("--n", type=int, default=64, help="prompts to draw (instructions, math; default 64)")
    p.add_argument("--k", type=int, default=8, help="samples per prompt (default 8)")
    p.add_argument("--model", default=RAW_MODEL, help=f"the sampling model (default {RAW_MODEL}, the pipeline's base)")
    p.add_argument("--max-tokens", type=int, default=256, help="most new tokens per sample (default 256)")
    p.add_argument("--temperature", type=float, default=0.8, help="sampling temperature, > 0 (default 0.8)")
    p.add_argument("--top-p", type=float, default=0.95, help="nucleus mass (default 0.95)")
    p.add_argument("--verifier", default=AUTO, choices=[AUTO, MAJORITY], help="auto (per prompts, see below) or "
                                                                              "majority")
    p.add_argument("--min-agreement", type=float, default=0.5, help="majority: the least share of the k samples "
                                                                    "the winning answer needs (default 0.5)")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N (default cpu)")
    p.add_argument("--seed", type=int, default=0, help="seed of the prompts and the samples (default 0)")
    p.set_defaults(run=_cmd_synth)


def _math_prompts(n: int, seed: int) -> list[SynthPrompt]:
    import reasoning_gym  # heavy optional import (loads every dataset module)

    data = reasoning_gym.create_dataset(MATH_DATASET, size=n, seed=seed)
    return [SynthPrompt(e["question"] + ANSWER_HINT, e, f"reasoning-gym {MATH_DATASET} seed {seed} #{i}")
            for i, e in enumerate(data)]


def _file_prompts(path: Path) -> tuple[list[SynthPrompt], bool]:
    """-> (prompts, whether they carry answers)."""
    rows = list(read_jsonl(path))
    if not rows:
        raise ValueError(f"{path}: no prompts (the file is empty)")
    for i, row in enumerate(rows, start=1):
        if not isinstance(row.get("prompt"), str) or not row["prompt"] or set(row) - {"prompt", "answer"}:
            raise ValueError(f"{path}:{i}: a prompt line is {{\"prompt\": non-empty string, \"answer\": optional}}, "
                             f"got keys {sorted(row)}")
    with_answer = ["answer" in row for row in rows]
    if any(with_answer) and not all(with_answer):
        raise ValueError(f"{path}:{with_answer.index(not with_answer[0]) + 1}: some lines have an \"answer\" and "
                         f"some not; give every line one (verified) or none (majority vote)")
    return [SynthPrompt(r["prompt"], r.get("answer"), f"{path}:{i}") for i, r in enumerate(rows, start=1)], \
        with_answer[0]


def _prompts_and_verifier(args) -> tuple[list[SynthPrompt], Verifier]:
    if args.n < 1 and args.prompts in (INSTRUCTIONS, MATH):
        raise ValueError(f"--n={args.n} must be >= 1")
    if args.prompts == INSTRUCTIONS:
        prompts = [SynthPrompt(p.prompt, p.constraints, p.where) for p in instruction_prompts(args.n, seed=args.seed)]
        verifier = Verifier.from_reward("instructions", level="strict", aggregate="all")
    elif args.prompts == MATH:
        prompts, verifier = _math_prompts(args.n, args.seed), Verifier.from_reward("reasoning-gym")
    elif Path(args.prompts).is_file():
        prompts, answered = _file_prompts(Path(args.prompts))
        verifier = Verifier.from_reward("math") if answered else Verifier.majority(min_agreement=args.min_agreement)
    else:
        raise ValueError(f"--prompts {args.prompts!r} is neither {INSTRUCTIONS!r}, {MATH!r} nor a JSONL file")
    if args.verifier == MAJORITY:
        verifier = Verifier.majority(min_agreement=args.min_agreement)
    return prompts, verifier


def _cmd_synth(args) -> int:
    if args.k < 1:
        raise ValueError(f"--k={args.k} must be >= 1")
    prompts, verifier = _prompts_and_verifier(args)
    lm = load_model(args.model, device=args.device, seed=args.seed)
    if lm.tokenizer is None:
        raise ValueError(f"model {args.model!r} has no tokenizer; sampling renders prompts with its chat template")
    sampler = model_sampler(lm.model, lm.tokenizer, max_new_tokens=args.max_tokens, temperature=args.temperature,
                            top_p=args.top_p)
    kept, summary = rejection_sample(prompts, sampler, verifier, k=args.k, seed=args.seed, progress=True)
    write_synth_jsonl(args.out, kept)
    print(json.dumps({**summary, "prompts_from": args.prompts, "model": args.model, "out": args.out}))
    return 0
