"""What each post-training stage buys on held-out tasks: the default model -> after SFT -> after RLOO.

Runs the post-training recipe (default recipes/posttrain-smollm2.yaml; resumable: finished stages are skipped) and
reads its stages' figures, then adds the one the recipe does not measure itself: the RL math set's held-out
accuracy of the base model (the RL stage records it for its own start, the SFT model, and its end).

    python benchmarks/posttrain.py --json                       # the full recipe (see its header for the time)
    python benchmarks/posttrain.py --json --recipe recipes/posttrain-smollm2-tiny.yaml

Figures (the issue's names):
    math_gain_rloo_points   held-out math accuracy after RLOO minus after SFT (RLOO's start), in points: the mean of
                            the RL reward (reasoning-gym's scorer, which gives 0.5 to an answer with the wrong sign);
                            heldout_math_exact beside it counts exact answers only
    bfcl_gain_sft_points    BFCL multiple / parallel AST accuracy (constrained decoding, held-out question ids)
                            after SFT minus the base model's, in points, the mean of the two categories
    ppl_ratio_after         held-out text perplexity after RLOO / the base model's (no collapse: <= 1.10)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from _common import emit
from openafm.checkpoint.load import load_model
from openafm.pipelines.recipe import BASE_PREFIX, RLStage, StageKind, TasksStage, load_recipe
from openafm.pipelines.run import run_recipe
from openafm.rl.config import RLConfig
from openafm.rl.rewards.registry import Extract, extracted
from openafm.rl.rollout import greedy_rows
from openafm.rl.run import RLRun, render

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_RECIPE = ROOT / "recipes" / "posttrain-smollm2.yaml"
MATH_SET = "math"
BFCL = ("bfcl_multiple_heldout_constrained", "bfcl_parallel_heldout_constrained")
PPL = "perplexity_heldout"


def metric(tasks: dict, model: str, task: str) -> float | None:
    row = tasks.get(model, {}).get(task)
    return None if row is None else row["value"]


def exact_share(run: RLRun, set_index: int, model) -> float:
    """The share of the set's held-out prompts whose last number is exactly the reference answer (greedy)."""
    records = run.heldout[set_index]
    rows = greedy_rows(model, [render(run.tokenizer, r) for r in records], max_new_tokens=run.config.max_new_tokens,
                       eos_token_ids=run.eos, batch=32)
    hits = [extracted(run.tokenizer.decode(row.text_ids), Extract.LAST_NUMBER, "") == str(r.target["answer"])
            for r, row in zip(records, rows)]
    return sum(hits) / len(hits)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recipe", default=str(DEFAULT_RECIPE), help="the post-training recipe to run and read")
    parser.add_argument("--run-dir", default=None, help="override the recipe's run_dir")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    torch.set_flush_denormal(True)
    started = time.perf_counter()
    recipe = load_recipe(args.recipe, run_dir=args.run_dir)
    report = run_recipe(recipe, log=lambda *a: print(*a, file=sys.stderr))
    outputs = {r["name"]: r["outputs"] for r in report["stages"]}
    rl_stage = next(s for s in recipe.stages if isinstance(s, RLStage))
    tasks_stage = next(s for s in recipe.stages if isinstance(s, TasksStage))
    sft_name = rl_stage.from_
    base = next(m for m in tasks_stage.models if m.startswith(BASE_PREFIX))

    rl_out = outputs[rl_stage.name]
    key = f"heldout/{MATH_SET}"
    config = RLConfig.from_dict({"seed": recipe.seed, **rl_stage.rl, "model": base[len(BASE_PREFIX):],
                                 "run_dir": str(Path(recipe.run_dir) / "bench-base-heldout")})
    base_run = RLRun(config)
    base_heldout = base_run.evaluate(base_run.reference)
    math_index = [s.name for s in config.prompt_sets].index(MATH_SET)
    math = {"base": base_heldout.get(key), "sft": rl_out["heldout_before"].get(key),
            "rl": rl_out["heldout_after"].get(key), "n": len(base_run.heldout[math_index])}
    exact = {"base": exact_share(base_run, math_index, base_run.reference),
             "sft": exact_share(base_run, math_index, load_model(outputs[sft_name]["model_dir"]).model),
             "rl": exact_share(base_run, math_index, load_model(rl_out["model_dir"]).model)}
    tasks = outputs[tasks_stage.name]["tasks"]
    per_task = {t: {m: metric(tasks, m, t) for m in tasks_stage.models} for t in tasks_stage.tasks}
    bfcl_gain = [100 * (per_task[t][sft_name] - per_task[t][base]) for t in BFCL if t in per_task]
    ppl = per_task.get(PPL, {})
    result = {
        "recipe": str(args.recipe), "run_dir": recipe.run_dir,
        "stages_wall_s": {r["name"]: round(r["wall_s"], 1) for r in report["stages"]},
        "heldout_math_accuracy": math,
        "math_gain_rloo_points": None if math["rl"] is None else 100 * (math["rl"] - math["sft"]),
        "math_gain_total_points": None if math["rl"] is None else 100 * (math["rl"] - math["base"]),
        "heldout_math_exact": exact,
        "math_gain_rloo_points_exact": 100 * (exact["rl"] - exact["sft"]),
        "tasks": per_task,
        "bfcl_gain_sft_points": sum(bfcl_gain) / len(bfcl_gain) if bfcl_gain else None,
        "ppl_ratio_after": (ppl[rl_stage.name] / ppl[base]) if ppl else None,
        "targets": {"math_gain_rloo_points": ">= 10", "bfcl_gain_sft_points": ">= 15", "ppl_ratio_after": "<= 1.10"},
        "rl_stage": {k: rl_out[k] for k in ("steps", "heldout_before", "heldout_after")},
        "sft_stage": {k: v for k, v in outputs[sft_name].items() if k != "model_dir"},
        "synth_stages": {n: {k: o[k] for k in ("prompts", "samples", "kept", "acceptance_rate") if k in o}
                         for n, o in outputs.items() if recipe.stage(n).kind is StageKind.SYNTH},
        "seconds": time.perf_counter() - started,
    }
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
