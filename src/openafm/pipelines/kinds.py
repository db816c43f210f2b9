"""The kinds of recipe stage: what `kind:` names in a recipe (its own module so stage definitions beside recipe.py,
such as pipelines/vision.py, can name their kind without importing the recipe loader)."""

from __future__ import annotations

import enum


class StageKind(str, enum.Enum):
    CORPUS = "corpus"
    TOKENIZER = "tokenizer"
    SHARDS = "shards"
    TRAIN = "train"
    UPCYCLE = "upcycle"
    DISTILL = "distill"
    EVAL = "eval"
    SYNTH = "synth"        # post-training (pipelines/posttrain.py): rejection-sampled, verified chat examples
    SFT = "sft"            # LoRA SFT on chat examples, merged into the weights
    RL = "rl"              # synchronous RLOO (openafm.rl.run)
    TASKS = "tasks"        # the evaluation registry's tasks on model stages (or base:<model>)
    PACKAGE = "package"    # an sft stage's adapter as a bundled model: bfloat16 adapter + sidecar (pipelines/package.py)
    VISION = "vision"      # a vision tower trained against a frozen decoder (pipelines/vision.py)
