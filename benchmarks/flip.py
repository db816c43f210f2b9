"""FLIP (report §5.1): CLIP pretraining of the small encoder with 0%, 50% and 75% of the patches dropped —
time per image (target: >= 2x faster at 75%) and zero-shot accuracy on the held-out emoji style at equal
wall time (FLIP's claim: at equal compute, masking wins because it sees more images).

Scale, said plainly: vision-micro (~0.35M encoder, 16-pixel patches, a 64-wide text tower) at 128x128 = an
8x8 grid, 4 windows of 4x4 patches, three global layers (vision-small's layout at 224; the report pretrains
at 448x448, 32x32 patches of 14 px); one training run per ratio of --budget seconds on a shared 2-core CPU;
the classes are two emoji categories (Animals & Nature, Food & Drink: 290 emoji) in the four training
styles, scored zero-shot on the twitter style, never trained on.

    python benchmarks/flip.py --json          # writes docs/results/flip.json (~7 min, one thread)

One run per ratio, from the same initial weights, each given --budget seconds of training; the runs advance
interleaved (always the one with the least time used so far takes the next step), so machine load is shared
alike. Time per image: the median step time of each run (whole steps: data, both towers, backward, AdamW)
over the batch size. Accuracy: zero-shot after the budget, the whole image seen (no masking).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, log, median, parser  # noqa: E402
from openafm.checkpoint.packaged import packaged_tokenizer
from openafm.data.images.emoji import HELD_OUT_STYLE, TRAIN_STYLES, emoji_images
from openafm.data.images.image_set import concat
from openafm.models.clip import ClipModel, clip_preset
from openafm.train.config import ScheduleKind
from openafm.train.vision.clip import ClipTrainConfig, ClipTrainer, zero_shot
from openafm.train.vision.flip import flip_window, kept_per_window

RESULT = Path(__file__).resolve().parent.parent / "docs" / "results" / "flip.json"


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--preset", default="vision-micro")
    p.add_argument("--ratios", default="0,0.5,0.75")
    p.add_argument("--budget", type=float, default=120.0, help="training seconds per ratio (default 120)")
    p.add_argument("--skip", type=int, default=3, help="first steps of each run left out of the step-time median")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--image-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--categories", default="Animals & Nature,Food & Drink")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1: on a shared, oversubscribed "
                                                         "CPU two threads' barriers made steps 4-10x slower)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    ratios = [float(r) for r in args.ratios.split(",")]
    only = [c.strip() for c in args.categories.split(",")]
    torch.manual_seed(0)

    train = concat([emoji_images(s, only=only) for s in TRAIN_STYLES]).resized(args.image_size)  # once
    held_out = emoji_images(HELD_OUT_STYLE, only=only).resized(args.image_size)
    tokenizer = packaged_tokenizer()
    clip_config = clip_preset(args.preset)
    vision = clip_config.vision
    grid = args.image_size // vision.patch_size
    window, n_windows = flip_window(vision, (grid, grid))
    log(f"{len(train)} training images ({len(set(train.keys))} classes), {len(held_out)} held out; "
        f"grid {grid}x{grid}, {n_windows} windows")

    def trainer(ratio: float) -> ClipTrainer:
        torch.manual_seed(0)                                   # the same initial weights for every ratio
        config = ClipTrainConfig(steps=1_000_000, batch_size=args.batch_size, image_size=args.image_size,
                                 mask_ratio=ratio, lr=args.lr, warmup_steps=5, english_share=1.0,
                                 schedule=ScheduleKind.CONSTANT)          # runs are cut by time, not steps
        return ClipTrainer(ClipModel(clip_config), train, tokenizer, config)

    # One run per ratio, advanced interleaved: always the run with the least time used so far takes the next
    # step, until each has used the budget. Every run thus samples the same stretches of machine load.
    runs = {r: trainer(r) for r in ratios}
    used = {r: 0.0 for r in ratios}
    while True:
        open_runs = [r for r in ratios if used[r] < args.budget]
        if not open_runs:
            break
        r = min(open_runs, key=lambda r: used[r])
        used[r] += runs[r].step().seconds
        done = sum(len(t.records) for t in runs.values())
        if done % 25 == 0:
            log(f"{done} steps; seconds used " + ", ".join(f"{r:.0%} {used[r]:.0f}" for r in ratios))
    step_s = {r: median([x.seconds for x in runs[r].records[args.skip:]]) for r in ratios}
    base = step_s[ratios[0]]
    per_ratio = {}
    for r in ratios:
        model, records = runs[r].model, runs[r].records
        held = zero_shot(model, held_out, tokenizer, args.image_size)
        seen = zero_shot(model, train.subset(range(0, len(train), 4)), tokenizer, args.image_size)
        kept = grid * grid if r == 0 else n_windows * kept_per_window(window * window, r)
        per_ratio[f"mask_{round(r * 100)}"] = {
            "mask_ratio": r, "patches_kept": kept,
            "seconds_per_step": step_s[r], "seconds_per_image": step_s[r] / args.batch_size,
            "speedup_vs_unmasked": base / step_s[r],
            "encoder_forward_gflops_per_image": vision.forward_flops(args.image_size, None if r == 0 else kept) / 1e9,
            "equal_time_run": {"steps": len(records), "images_seen": len(records) * args.batch_size,
                               "train_seconds": used[r],
                               "last_loss": sum(x.loss for x in records[-10:]) / len(records[-10:]),
                               "temperature": records[-1].temperature},
            "zero_shot_held_out": {"top1": held.top1, "top5": held.top5},
            "zero_shot_training_styles": {"top1": seen.top1, "top5": seen.top5},
        }
    speedup_75 = base / step_s[0.75] if 0.75 in step_s else None
    result = {
        "what": "CLIP pretraining of the vision encoder with FLIP masking: speed per image and held-out zero-shot "
                "accuracy at equal wall time",
        "scale": f"{args.preset} at {args.image_size}x{args.image_size} ({grid}x{grid} patches of "
                 f"{vision.patch_size} px, {n_windows} windows of {window}x{window}) stands in for the report's "
                 f"448x448 (32x32 patches of 14 px); masking is random within each window",
        "data": {"classes": len(set(train.keys)), "categories": only, "train_styles": [s.value for s in TRAIN_STYLES],
                 "train_images": len(train), "held_out_style": HELD_OUT_STYLE.value, "held_out_images": len(held_out),
                 "captions": "English emoji names"},
        "batch_size": args.batch_size, "budget_seconds_per_ratio": args.budget,
        "schedule": "5 warm-up steps, then constant lr (runs are cut by time)",
        "threads": torch.get_num_threads(),
        "chance_top1": 1 / held.classes, "chance_top5": min(5, held.classes) / held.classes,
        "ratios": per_ratio,
        "speedup_50": base / step_s[0.5] if 0.5 in step_s else None,
        "speedup_75": speedup_75, "target_speedup_75": 2.0,
        "target_met": speedup_75 is not None and speedup_75 >= 2.0,
    }
    if args.json:
        RESULT.parent.mkdir(parents=True, exist_ok=True)
        RESULT.write_text(json.dumps(result, indent=2) + "\n")
    emit(result, args.json)


if __name__ == "__main__":
    main()
