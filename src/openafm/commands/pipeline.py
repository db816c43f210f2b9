"""`openafm pipeline RECIPE.yaml`: run a training recipe's stages in order (report §4.3)."""

from __future__ import annotations

import argparse

from openafm.pipelines.kinds import StageKind
from openafm.pipelines.recipe import load_recipe
from openafm.pipelines.run import run_recipe, stage_table

EPILOG = f"""stage kinds: {", ".join(k.value for k in StageKind)} (see openafm.pipelines.recipe).
examples:
  openafm pipeline recipes/ondevice-tiny.yaml       pre-training: dense -> upcycle -> MoE teacher -> distillation
                                                    -> eval -> continued pre-training -> context lengthening
  openafm pipeline recipes/posttrain-smollm2.yaml   post-training: synthetic data -> SFT -> RLOO -> evaluation
  openafm pipeline recipes/default-model.yaml       the default model, openafm-135m: synth -> SFT -> package
  openafm pipeline recipes/default-model-rl.yaml    RLOO on its SFT adapter -> a packaged candidate (not installed)
  openafm pipeline recipes/default-model-rl-tools.yaml
                                                    the same on the two turns of a tool round (the right call; an
                                                    answer that keeps the result's values) -> a candidate
  openafm pipeline recipes/default-model-tools.yaml the SFT adapter continued on made-up tools -> a candidate
  openafm pipeline recipes/default-model-instructions.yaml
                                                    the same on its own answers that keep every instruction
                                                    (rejection sampling) -> a candidate
  openafm pipeline recipes/vision-default.yaml      its vision tower: reading -> alignment -> answers, decoder and
                                                    (after reading) encoder frozen
"""


def register(sub) -> None:
    p = sub.add_parser("pipeline", help="run a training recipe (pre-training, post-training, the default model, "
                                        "vision) stage by stage, resumable",
                       description="Run the stages of a recipe YAML in order, each into RUN/stages/<name>/ with a "
                                   "done-marker. Rerunning skips finished stages; a killed train stage resumes from "
                                   "its newest checkpoint. Prints a stage table and writes RUN/report.json.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("recipe", help="path of the recipe YAML")
    p.add_argument("--run-dir", default=None, help="use this run directory instead of the recipe's run_dir")
    p.add_argument("--check", action="store_true", help="only load and validate the recipe, run nothing")
    p.set_defaults(run=_cmd_pipeline)


def _cmd_pipeline(args) -> int:
    recipe = load_recipe(args.recipe, run_dir=args.run_dir)
    if args.check:
        print(f"{args.recipe}: {len(recipe.stages)} stages OK: " + ", ".join(f"{s.name} ({s.kind.value})"
                                                                           for s in recipe.stages))
        return 0
    report = run_recipe(recipe)
    print(stage_table(report))
    return 0
