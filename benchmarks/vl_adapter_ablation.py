"""Which vision-language adapter: C-Abstractor vs pixel-shuffle vs average pooling, at equal steps and data.

Each kind gets a fresh tower (the same encoder initialisation: the seed is reset before each build) trained the same
--steps steps of the alignment objective of openafm.train.vision.vlm (the mean image token vs SmolLM2's embedding of each
emoji name, InfoNCE over the 40 names; no decoder forward, so the ablation fits a few minutes) on the training
styles, in rapid mode (9 tokens from an 8x8 grid) and balanced mode (144 tokens from 24x24) as the training mix
draws them. Scored on the held-out twitter style: retrieval accuracy (nearest name in the decoder's embedding
space, chance 1/40) per mode. Also: adapter parameters and the adapter's time per 672x672 view.
Not measured here: answer accuracy through the decoder (benchmarks/vlm.py does that for the chosen kind).

    python benchmarks/vl_adapter_ablation.py --json    # ~5 min on one thread; writes
                                                       # docs/results/vl_adapter_ablation.json
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, log, parser  # noqa: E402
from openafm.checkpoint.load import load_model  # noqa: E402
from openafm.checkpoint.packaged import RAW_MODEL  # noqa: E402
from openafm.models.image_views import Resolution  # noqa: E402
from openafm.models.vision import vision_small  # noqa: E402
from openafm.models.vl_adapter import AdapterConfig, AdapterKind  # noqa: E402
from openafm.models.vlm import VisionTower, VisionTowerConfig  # noqa: E402
from openafm.splits import Split
from openafm.train.vision.mix import ResolutionMix  # noqa: E402
from openafm.train.vision.tasks import Task, chance, emoji_qa  # noqa: E402
from openafm.train.vision.vlm import VLMTrainConfig, VLMTrainer, retrieval_accuracy  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=80)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    lm = load_model(RAW_MODEL)
    train, held = emoji_qa(Split.TRAIN), emoji_qa(Split.HELDOUT)
    vision = vision_small()
    config = VLMTrainConfig(steps=0, align_steps=args.steps, align_batch=args.batch,
                            task_weights=((Task.NAME_EMOJI, 1.0),), mix=ResolutionMix(low_rapid=0.75, balanced_of_rest=1.0))
    names = sorted({q.answer for q in train})
    result: dict = {"align_steps": args.steps, "align_batch": args.batch, "mix": "rapid 75%, balanced 25%",
                    "kinds": {},
                    "chance": chance(Task.NAME_EMOJI), "held_out": f"{len(held)} twitter-style emoji"}
    for kind in AdapterKind:
        log(f"training with the {kind.value} adapter")
        torch.manual_seed(0)
        tower = VisionTower(VisionTowerConfig(vision=vision, adapter=AdapterConfig(
            in_dim=vision.width, out_dim=lm.model.config.dim, kind=kind, hidden=128)))
        trainer = VLMTrainer(lm.model, lm.tokenizer, tower, config)
        t0 = time.perf_counter()
        history = trainer.train({Task.NAME_EMOJI: train})       # align_steps contrastive steps, no answer steps
        train_seconds = time.perf_counter() - t0
        acc = {m.value: retrieval_accuracy(lm.model, lm.tokenizer, tower, held, m, names)
               for m in (Resolution.RAPID, Resolution.BALANCED)}
        patches = torch.randn(1, 24, 24, vision.width)
        with torch.inference_mode():
            tower.adapter(patches, 144)
            t1 = time.perf_counter()
            for _ in range(5):
                tower.adapter(patches, 144)
            per_view = (time.perf_counter() - t1) / 5
        result["kinds"][kind.value] = {
            "held_out_retrieval_accuracy": acc, "mean_held_out_accuracy": sum(acc.values()) / len(acc),
            "train_loss_last_10": sum(r["loss"] for r in history[-10:]) / 10,
            "adapter_parameters": sum(p.numel() for p in tower.adapter.parameters()),
            "adapter_ms_per_672_view": per_view * 1000, "train_seconds": train_seconds}
    best = max(result["kinds"], key=lambda k: result["kinds"][k]["mean_held_out_accuracy"])
    result["best_by_held_out_accuracy"] = best
    result["seconds"] = time.perf_counter() - start
    if args.json:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "vl_adapter_ablation.json").write_text(json.dumps(result, indent=2) + "\n")
    emit(result, args.json)


if __name__ == "__main__":
    main()
