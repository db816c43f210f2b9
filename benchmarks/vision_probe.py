"""Can a fresh vision tower learn to read digits in a CPU budget? The contrastive alignment objective of the vision
recipe on READ_DIGIT only, from random weights, with and without per-image pixel standardisation (PixelNorm):

    fit   32 fixed training images, --fit-steps steps: can the tower fit them at all (mean loss of the last 10 steps)
    learn 1,000 training images, --steps steps: does the loss fall below chance (ln 10, ten digits) on images it
          sees about five times each?

No decoder forward (the objective compares the tower's mean token with the decoder's embedding of each digit), so
each step costs the tower only. This is what models/vlm.py's PixelNorm docstring quotes.

    python benchmarks/vision_probe.py --json     # ~8 min on one thread; writes docs/results/vision_probe.json
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, log, parser  # noqa: E402
from openafm.checkpoint.load import load_model  # noqa: E402
from openafm.checkpoint.packaged import DEFAULT_MODEL  # noqa: E402
from openafm.models.vision import get_vision_preset  # noqa: E402
from openafm.models.vl_adapter import AdapterConfig  # noqa: E402
from openafm.models.vlm import PixelNorm, VisionTower, VisionTowerConfig  # noqa: E402
from openafm.splits import Split  # noqa: E402
from openafm.train.vision.mix import ResolutionMix  # noqa: E402
from openafm.train.vision.tasks import Task, digit_qa  # noqa: E402
from openafm.train.vision.vlm import VLMTrainConfig, VLMTrainer  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"


def run(lm, norm: PixelNorm, images: int, steps: int) -> dict:
    torch.manual_seed(0)
    vision = get_vision_preset("vision-small")
    tower = VisionTower(VisionTowerConfig(vision=vision, adapter=AdapterConfig(
        in_dim=vision.width, out_dim=lm.model.config.dim, hidden=128), pixel_norm=norm))
    config = VLMTrainConfig(align_steps=steps, steps=0, lr=2e-3, warmup=10, mix=ResolutionMix(low_rapid=1.0),
                            task_weights=((Task.READ_DIGIT, 1.0),))
    t0 = time.perf_counter()
    history = VLMTrainer(lm.model, lm.tokenizer, tower, config).train({Task.READ_DIGIT: digit_qa(Split.TRAIN, images)})
    losses = [r["loss"] for r in history]
    return {"first_10": sum(losses[:10]) / 10, "last_10": sum(losses[-10:]) / 10, "seconds": time.perf_counter() - t0}


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--fit-steps", type=int, default=60)
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    lm = load_model(DEFAULT_MODEL)
    result: dict = {"model": DEFAULT_MODEL, "tower": "vision-small, pixel-shuffle adapter, random init",
                    "chance_loss": math.log(10), "fit": {}, "learn": {}}
    for norm in PixelNorm:
        log(f"{norm.value}: fit 32 images, then learn from 1,000")
        result["fit"][norm.value] = run(lm, norm, 32, args.fit_steps)
        result["learn"][norm.value] = run(lm, norm, 1000, args.steps)
    if args.json:
        (RESULTS / "vision_probe.json").write_text(json.dumps(result, indent=2) + "\n")
    emit(result, args.json)


if __name__ == "__main__":
    main()
