"""`openafm vision pretrain OUT` and `openafm vision zero-shot CKPT`: CLIP pretraining of the vision encoder with
FLIP masking on image-text pairs from installed packages, and its zero-shot accuracy on the held-out emoji style."""

from __future__ import annotations

import argparse
import enum
import json
import time
from pathlib import Path

import torch

from openafm.checkpoint.clip import load_clip, save_clip
from openafm.checkpoint.packaged import packaged_tokenizer
from openafm.data.images.digits import digit_images
from openafm.data.images.emoji import HELD_OUT_STYLE, TRAIN_STYLES, emoji_images
from openafm.data.images.icons import icon_images
from openafm.data.images.image_set import ImageSet, concat
from openafm.errors import ConfigError
from openafm.models.clip import ClipModel, clip_preset
from openafm.models.vision import CONFIG_ONLY, VISION_PRESETS
from openafm.train.vision.clip import ClipTrainConfig, train_clip, zero_shot

SOURCE_SIZE = 64          # every source is loaded at 64x64 and resized to --image-size per batch


class Source(enum.Enum):
    EMOJI = "emoji"       # the training styles (apple, google, facebook, the Noto font); twitter is held out
    ICONS = "icons"       # the Adwaita icon theme
    DIGITS = "digits"     # scikit-learn's handwritten digits


EPILOG = f"""data (--sources, comma-separated; all from installed packages, see openafm.data.images):
  emoji     ~1,900 emoji in the styles {', '.join(s.value for s in TRAIN_STYLES)}; captions: the English name half
            of the time, else a name in one of 13 other languages or a short name
  icons     ~1,000 Adwaita icons, captioned by their names ("user trash full")
  digits    1,797 handwritten digits ("the digit seven")
  The {HELD_OUT_STYLE.value} style is never trained on: `openafm vision zero-shot` scores it.

writes OUT (one safetensors file, written atomically every --save-every steps and at the end): the ClipModel's
tensors ("vision.*" the encoder, "text.*" the text tower, the projections, logit_scale) and in the metadata
format=openafm-clip, the ClipConfig as JSON, the run's settings. openafm.checkpoint.clip.load_vision_encoder(OUT)
loads the encoder alone.

examples:
  openafm vision pretrain runs/clip-small.safetensors --steps 2000 --mask-ratio 0.75
  openafm vision zero-shot runs/clip-small.safetensors
"""


def register(sub) -> None:
    p = sub.add_parser("vision", help="the vision encoder: CLIP pretraining with FLIP masking, zero-shot accuracy",
                       description="The vision encoder (ViTDet with Register-Window, report §2.3): contrastive "
                                   "image-text pretraining with FLIP masking, and zero-shot scoring.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    vs = p.add_subparsers(title="vision commands", metavar="VISION_COMMAND")
    t = vs.add_parser("pretrain", help="CLIP-pretrain a small encoder (and text tower) with FLIP masking",
                      description="Train a vision encoder and a small text tower contrastively (symmetric InfoNCE, "
                                  "learned temperature) on image-text pairs from installed packages, dropping "
                                  "--mask-ratio of each image's patches (FLIP; the same number in every window).",
                      epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("out", type=Path, help="the checkpoint to write (.safetensors)")
    trainable = sorted(set(VISION_PRESETS) - CONFIG_ONLY)
    t.add_argument("--preset", default="vision-small", choices=trainable, help="the encoder (default vision-small)")
    t.add_argument("--init", type=Path, default=None,
                   help="start from this CLIP checkpoint's weights (its config; --preset is then not used); "
                        "the optimizer starts afresh")
    t.add_argument("--sources", default="emoji,icons,digits",
                   help=f"comma-separated, of {[s.value for s in Source]} (default all)")
    t.add_argument("--steps", type=int, default=1000)
    t.add_argument("--batch-size", type=int, default=128)
    t.add_argument("--image-size", type=int, default=224, help="training resolution (default 224)")
    t.add_argument("--mask-ratio", type=float, default=0.75, help="FLIP: share of patches dropped (default 0.75)")
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--save-every", type=int, default=200, help="write OUT every this many steps (and at the end)")
    t.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's; on a shared CPU 1 "
                                                               "avoids oversubscribed thread barriers)")
    t.add_argument("--no-eval", action="store_true", help="skip the held-out zero-shot score at the end")
    t.set_defaults(run=_cmd_pretrain)
    z = vs.add_parser("zero-shot", help="zero-shot accuracy of a CLIP checkpoint on the held-out emoji style",
                      description=f"Each {HELD_OUT_STYLE.value}-style emoji against every emoji name: top-1 and "
                                  "top-5 accuracy (chance: 1 / names). Prints one JSON object.")
    z.add_argument("checkpoint", type=Path)
    z.add_argument("--image-size", type=int, default=224)
    z.set_defaults(run=_cmd_zero_shot)
    p.set_defaults(run=lambda args: p.print_help() or 2)


def load_sources(names: str) -> ImageSet:
    try:
        sources = [Source(n.strip()) for n in names.split(",") if n.strip()]
    except ValueError:
        raise ConfigError(f"--sources {names!r}: each must be one of {[s.value for s in Source]}") from None
    if not sources:
        raise ConfigError("--sources is empty")
    sets = []
    for source in dict.fromkeys(sources):
        if source is Source.EMOJI:
            sets += [emoji_images(style, size=SOURCE_SIZE) for style in TRAIN_STYLES]
        elif source is Source.ICONS:
            sets.append(icon_images(size=SOURCE_SIZE))
        else:
            sets.append(digit_images(size=SOURCE_SIZE))
    return concat(sets)


def _cmd_pretrain(args) -> int:
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    images = load_sources(args.sources)
    tokenizer = packaged_tokenizer()
    model = ClipModel(clip_preset(args.preset)) if args.init is None else load_clip(args.init)
    config = ClipTrainConfig(steps=args.steps, batch_size=args.batch_size, image_size=args.image_size,
                             mask_ratio=args.mask_ratio, lr=args.lr, seed=args.seed,
                             warmup_steps=min(50, args.steps // 10))
    info = dict(preset=args.preset if args.init is None else f"init:{args.init}", sources=args.sources,
                steps=args.steps, batch_size=args.batch_size,
                image_size=args.image_size, mask_ratio=args.mask_ratio, lr=args.lr, seed=args.seed)
    start = time.perf_counter()

    def save_now(record) -> None:
        if (record.step + 1) % args.save_every == 0 and record.step + 1 < args.steps:
            save_clip(model, args.out, **info, steps_done=record.step + 1)

    records = train_clip(model, images, tokenizer, config, on_step=save_now)
    seconds = time.perf_counter() - start
    save_clip(model, args.out, **info, steps_done=len(records), train_seconds=round(seconds, 1))
    summary = {"checkpoint": str(args.out), "images": len(images), "steps": len(records),
               "train_seconds": round(seconds, 1), "first_loss": round(records[0].loss, 4),
               "last_loss": round(sum(r.loss for r in records[-10:]) / len(records[-10:]), 4),
               "temperature": round(records[-1].temperature, 4)}
    if not args.no_eval:
        summary["zero_shot_held_out"] = _zero_shot(model, tokenizer, args.image_size)
    print(json.dumps(summary, indent=2))
    return 0


def _zero_shot(model: ClipModel, tokenizer, image_size: int) -> dict:
    result = zero_shot(model, emoji_images(HELD_OUT_STYLE, size=SOURCE_SIZE), tokenizer, image_size)
    return {"style": HELD_OUT_STYLE.value, "top1": round(result.top1, 4), "top5": round(result.top5, 4),
            "classes": result.classes, "chance_top1": round(1 / result.classes, 5)}


def _cmd_zero_shot(args) -> int:
    print(json.dumps(_zero_shot(load_clip(args.checkpoint), packaged_tokenizer(), args.image_size), indent=2))
    return 0
