"""Distillation (report §4.3): held-out perplexity of the dense model distilled from the upcycled MoE teacher
for the last 10% of its tokens vs the same dense model trained on the same batches without a teacher.

Runs `recipes/ondevice-tiny.yaml` (or reads a finished run: finished stages are skipped, so a second call is
instant) and reports its eval stage: the student with KD, the student without, the teacher itself and the
dense model both started from. The teacher's perplexity is reported beside them because a teacher no
better than the student cannot help. --quick runs a shortened copy of the recipe (a smoke test: its numbers
say little).

    python benchmarks/distill.py --json                       # the full recipe, ~10-25 min on 2 CPU cores
    python benchmarks/distill.py --json --run-dir runs/ondevice-tiny
"""

from __future__ import annotations

import copy
import os
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, log  # noqa: E402

RECIPE = Path(__file__).resolve().parents[1] / "recipes" / "ondevice-tiny.yaml"


def quick_recipe(data: dict) -> dict:
    """Every train stage at most 20 steps (continuations 4), 40 documents per source."""
    data = copy.deepcopy(data)
    for stage in data["stages"]:
        if stage["kind"] == "corpus":
            stage["limit_per_source"] = 40
        if stage["kind"] in ("train", "distill"):
            stage["train"] = {**stage["train"], "steps": min(stage["train"]["steps"], 20),
                              "checkpoint": {"every": 10, "keep": 1}}
            if stage["data"].get("skip_steps"):
                stage["train"]["steps"] = 4
                stage["data"] = {**stage["data"], "skip_steps": 20}
    return data


def main() -> None:
    import argparse

    from openafm.pipelines.recipe import recipe_from_dict
    from openafm.pipelines.run import run_recipe, stage_table
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print one JSON object (and nothing else) to stdout")
    p.add_argument("--recipe", default=str(RECIPE), help="recipe YAML (default recipes/ondevice-tiny.yaml)")
    p.add_argument("--run-dir", default=None, help="run directory (default runs/distill-bench[-quick])")
    p.add_argument("--quick", action="store_true", help="a shortened recipe (smoke test)")
    args = p.parse_args()
    data = yaml.safe_load(Path(args.recipe).read_text())
    if args.quick:
        data = quick_recipe(data)
    data["run_dir"] = args.run_dir or ("runs/distill-bench-quick" if args.quick else "runs/distill-bench")
    recipe = recipe_from_dict(data, args.recipe)
    t = time.perf_counter()
    report = run_recipe(recipe, log=log)
    log(stage_table(report))
    stages = {r["name"]: r for r in report["stages"]}
    ppl = stages["eval"]["outputs"]["perplexity"]
    kd, lm = ppl["student-kd"]["ppl"], ppl["student-lm"]["ppl"]
    result = {
        "benchmark": "distill", "recipe": args.recipe, "quick": args.quick, "run_dir": recipe.run_dir,
        "heldout_tokens": ppl["student-kd"]["tokens"], "context": stages["eval"]["outputs"]["context"],
        "ppl_student_kd": kd, "ppl_student_lm": lm, "ppl_teacher": ppl["teacher"]["ppl"],
        "ppl_dense_start": ppl["dense"]["ppl"],
        "kd_over_lm_ppl_ratio": kd / lm, "distillation_wins": kd < lm,
        "teacher_better_than_student_lm": ppl["teacher"]["ppl"] < lm,
        "per_domain": {name: {d: v["ppl"] for d, v in r["per_domain"].items()} for name, r in ppl.items()},
        "student_tokens_total": stages["dense"]["outputs"]["tokens"] + stages["student-kd"]["outputs"]["tokens"],
        "continuation_tokens": stages["student-kd"]["outputs"]["tokens"],
        "teacher_params": stages["teacher"]["outputs"]["params"], "student_params": stages["dense"]["outputs"]["params"],
        "stage_wall_s": {name: r["wall_s"] for name, r in stages.items()},
        "recipe_wall_s": report["stage_wall_s_sum"], "this_invocation_s": time.perf_counter() - t,
    }
    emit(result, args.json)


if __name__ == "__main__":
    main()
