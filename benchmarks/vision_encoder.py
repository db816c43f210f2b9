"""The vision encoder (report §2.3): ViTDet with Register-Window vs the plain windowed ViTDet (no register) vs a
global ViT of the same size — FLOPs and time per image at 672x672, and held-out accuracy after the same CLIP
pretraining: does the register window earn its place here?

    python benchmarks/vision_encoder.py --json      # writes docs/results/vision_encoder.json (~6 min, one thread)

- FLOPs: closed form (VisionConfig.forward_flops, checked against torch's flop counter in the tests), at
  report scale (ViT-L/14 widths, 48x48 patches at 672) and for the small preset that runs here.
- Time: forward of one 672x672 image through each variant of vision-small (24x24 patches of 28 px, 6x6
  windows of 4x4), interleaved rounds, medians.
- Accuracy: each variant of vision-micro (8x8 patches at 128 px) CLIP-pretrained the same number of steps on
  the same batches (FLIP 75%; emoji of two categories in four styles), then scored on the held-out twitter
  style: zero-shot (the image against all 290 names) and a linear probe (a softmax classifier on the frozen
  image feature — the register, or the mean patch without one — fit on the training styles).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

import torch
from torch.nn import functional as F

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, interleaved, log, median, parser  # noqa: E402
from openafm.checkpoint.packaged import packaged_tokenizer
from openafm.data.images.emoji import HELD_OUT_STYLE, TRAIN_STYLES, emoji_images
from openafm.data.images.image_set import ImageSet, concat
from openafm.models.clip import ClipModel, clip_preset
from openafm.models.vision import RegisterKind, VisionConfig, VisionEncoder, get_vision_preset
from openafm.train.vision.clip import ClipTrainConfig, ClipTrainer, zero_shot

RESULT = Path(__file__).resolve().parent.parent / "docs" / "results" / "vision_encoder.json"


def variants(config: VisionConfig) -> dict[str, VisionConfig]:
    return {"vitdet_rw": config,
            "vitdet": dataclasses.replace(config, register=RegisterKind.NONE),
            "global_vit": dataclasses.replace(config, global_layers=tuple(range(config.depth)))}


@torch.no_grad()
def features(encoder: VisionEncoder, images: ImageSet, size: int) -> torch.Tensor:
    encoder.eval()
    return torch.cat([encoder(images.pixels(range(i, min(i + 256, len(images))), size=size)).register
                      for i in range(0, len(images), 256)])


def linear_probe(train_x, train_y, test_x, test_y, classes: int, steps: int = 300) -> float:
    """A softmax classifier on standardised frozen features (full-batch Adam, light weight decay)."""
    mean, std = train_x.mean(0), train_x.std(0) + 1e-6
    train_x, test_x = (train_x - mean) / std, (test_x - mean) / std
    torch.manual_seed(0)
    head = torch.nn.Linear(train_x.shape[1], classes)
    opt = torch.optim.AdamW(head.parameters(), lr=1e-2, weight_decay=1e-3)
    for _ in range(steps):
        opt.zero_grad()
        F.cross_entropy(head(train_x), train_y).backward()
        opt.step()
    with torch.no_grad():
        return float((head(test_x).argmax(1) == test_y).float().mean())


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--steps", type=int, default=100, help="CLIP steps per variant (default 100)")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--mask-ratio", type=float, default=0.75)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--categories", default="Animals & Nature,Food & Drink")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1; see benchmarks/flip.py)")
    p.set_defaults(repeats=12)                      # 5 rounds left the 672 timings within noise on a busy machine
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    only = [c.strip() for c in args.categories.split(",")]

    # FLOPs at 672, report scale and the small preset
    flops = {}
    for scale, name in (("report_vit_l_14", "vitdet-l-rw"), ("vision_small", "vision-small")):
        vs = variants(get_vision_preset(name))
        flops[scale] = {k: {"params": c.param_count(), "gflops_per_image_672": c.forward_flops(672) / 1e9}
                        for k, c in vs.items()}
        flops[scale]["global_over_vitdet_rw"] = (flops[scale]["global_vit"]["gflops_per_image_672"]
                                                 / flops[scale]["vitdet_rw"]["gflops_per_image_672"])

    # time per image at 672, vision-small variants
    torch.manual_seed(0)
    small = {k: VisionEncoder(c).eval() for k, c in variants(get_vision_preset("vision-small")).items()}
    image = torch.rand(1, 3, 672, 672)

    def forward(encoder):
        def run():
            with torch.inference_mode():
                encoder(image)
        return run

    log(f"672x672 forward, {args.repeats} interleaved rounds ...")
    times = interleaved({k: forward(e) for k, e in small.items()}, args.repeats)
    seconds = {k: median(v) for k, v in times.items()}

    # accuracy after the same CLIP pretraining, vision-micro variants
    base = clip_preset("vision-micro")
    size = base.vision.image_size
    train = concat([emoji_images(s, only=only) for s in TRAIN_STYLES]).resized(size)     # once, not per batch
    held_out = emoji_images(HELD_OUT_STYLE, only=only).resized(size)
    tokenizer = packaged_tokenizer()
    config = ClipTrainConfig(steps=args.steps, batch_size=args.batch_size, image_size=size,
                             mask_ratio=args.mask_ratio, lr=args.lr, warmup_steps=min(10, args.steps),
                             english_share=1.0)
    runs = {}
    for k, vc in variants(base.vision).items():
        torch.manual_seed(0)
        runs[k] = ClipTrainer(ClipModel(dataclasses.replace(base, vision=vc)), train, tokenizer, config)
    used = {k: 0.0 for k in runs}
    for step in range(args.steps):                               # interleaved: the same batches, shared drift
        for k, t in runs.items():
            used[k] += t.step().seconds
        if (step + 1) % 20 == 0:
            log(f"step {step + 1}/{args.steps}: " + ", ".join(f"{k} loss {t.records[-1].loss:.3f}"
                                                              for k, t in runs.items()))
    names = list(dict.fromkeys(train.names))
    train_y = torch.tensor([names.index(n) for n in train.names])
    test_y = torch.tensor([names.index(n) for n in held_out.names])
    accuracy = {}
    for k, t in runs.items():
        zs = zero_shot(t.model, held_out, tokenizer, size)
        probe = linear_probe(features(t.model.vision, train, size), train_y, features(t.model.vision, held_out, size),
                             test_y, len(names))
        accuracy[k] = {"zero_shot_top1": zs.top1, "zero_shot_top5": zs.top5, "linear_probe_top1": probe,
                       "train_seconds": used[k],
                       "last_loss": sum(r.loss for r in t.records[-10:]) / len(t.records[-10:])}
    torch.manual_seed(0)                                          # the probe on an untrained encoder: the floor
    untrained = VisionEncoder(base.vision)
    floor = linear_probe(features(untrained, train, size), train_y, features(untrained, held_out, size), test_y,
                         len(names))
    result = {
        "what": "ViTDet with Register-Window vs windowed ViTDet without register vs global ViT at equal size",
        "flops_672": flops,
        "seconds_per_image_672": {"preset": "vision-small (24x24 patches, windows of 4x4)", **seconds,
                                  "global_over_vitdet_rw": seconds["global_vit"] / seconds["vitdet_rw"],
                                  "vitdet_over_vitdet_rw": seconds["vitdet"] / seconds["vitdet_rw"]},
        "accuracy": {"preset": f"vision-micro at {size}x{size} (8x8 patches, 4 windows of 4x4), CLIP "
                               f"{args.steps} steps x {args.batch_size}, FLIP {args.mask_ratio:.0%}",
                     "classes": len(names), "held_out_style": HELD_OUT_STYLE.value,
                     "chance_top1": 1 / len(names), "untrained_vitdet_rw_linear_probe_top1": floor, **accuracy},
        "threads": torch.get_num_threads(), "repeats": args.repeats,
    }
    if args.json:
        RESULT.parent.mkdir(parents=True, exist_ok=True)
        RESULT.write_text(json.dumps(result, indent=2) + "\n")
    emit(result, args.json)


if __name__ == "__main__":
    main()
