"""`openafm vlm train`: a vision tower for a frozen decoder (report §5.1, stage 3), written where sessions find it;
`openafm vlm joint`: the joint stage (report §4.2, stage 2) on a compact decoder, text perplexity before/after."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import torch

from openafm.checkpoint.load import load_model
from openafm.checkpoint.packaged import DEFAULT_MODEL
from openafm.checkpoint.vision import PACKAGED_DIR, PACKAGED_TOWERS, save_tower
from openafm.models.vl_adapter import AdapterKind
from openafm.models.vlm import PixelNorm
from openafm.pipelines.vision import TowerSpec, VisionData, held_out_figures, new_tower, training_pools
from openafm.train.vision.joint import JointConfig, run_joint
from openafm.train.vision.vlm import VLMTrainConfig, VLMTrainer

EPILOG = f"""train: one quick stage of what `openafm pipeline recipes/vision-default.yaml` runs (the recipe is how the
shipped tower is made: resumable, in two stages). The tower (encoder + adapter) learns the rendered tasks (name the
emoji, read the word, read the digit, the tallest bar's value, count the circles, and refuse questions about what
the image does not show) with the decoder frozen; it is then scored on held-out renderings (Serif faces, the
twitter emoji style, held-out colours) and written (float16) with a sidecar JSON holding this command line and
the figures. The default --out is the packaged file sessions load ({PACKAGED_DIR.name}/{PACKAGED_TOWERS[DEFAULT_MODEL]}).

joint: encoder + adapter + a compact decoder trained together on the report's mix (60% text, 10% interleaved,
28.5% captions, 1.5% question-answer), after a text-only warm start; prints held-out text perplexity before and
after the joint steps.

examples:
  openafm vlm train --steps 80
  openafm vlm train --encoder clip_encoder.safetensors --out /tmp/tower.safetensors
  openafm vlm joint --text-steps 150 --joint-steps 150 --json docs/results/vlm_joint.json
"""


def register(sub) -> None:
    v = sub.add_parser("vlm", help="train the vision-language model (report §4.2, §5.1)",
                       description="Vision-language training: the tower for a frozen decoder, or the joint stage.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    vs = v.add_subparsers(dest="vlm_command", required=True)
    t = vs.add_parser("train", help="train a vision tower against a frozen decoder (stage 3)")
    t.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"the decoder (default {DEFAULT_MODEL}; its tower also serves its base / bundled kin)")
    t.add_argument("--out", default=None, help="tower file to write (default: the packaged file for --model)")
    t.add_argument("--vision", default="vision-small", help="vision encoder preset (default vision-small)")
    t.add_argument("--encoder", default=None,
                   help="a CLIP checkpoint from `openafm vision pretrain` (its encoder starts the tower; "
                        "overrides --vision); default: random init")
    t.add_argument("--adapter", default=AdapterKind.PIXEL_SHUFFLE.value, choices=[k.value for k in AdapterKind],
                   help="the adapter kind (default pixel-shuffle: see docs/results/vl_adapter_ablation.json)")
    t.add_argument("--adapter-hidden", type=int, default=128, help="adapter conv / MLP width (default 128)")
    t.add_argument("--align-steps", type=int, default=150,
                   help="contrastive warm-up steps against the decoder's embeddings (no decoder forward)")
    t.add_argument("--steps", type=int, default=80, help="answer-loss steps through the frozen decoder")
    t.add_argument("--batch", type=int, default=8, help="examples per rapid-mode step")
    t.add_argument("--lr", type=float, default=2e-3)
    t.add_argument("--pixel-norm", default=PixelNorm.PER_IMAGE.value, choices=[k.value for k in PixelNorm],
                   help="per-image: standardise each view before the encoder (default; see models/vlm.py)")
    t.add_argument("--per-task", type=int, default=512, help="rendered training questions per task (default 512)")
    t.add_argument("--eval", type=int, default=40, help="held-out questions per task scored after training")
    t.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1: the machine is shared)")
    t.add_argument("--seed", type=int, default=0)
    t.set_defaults(run=_cmd_train)
    j = vs.add_parser("joint", help="the joint stage on a compact decoder: text perplexity before and after")
    j.add_argument("--text-steps", type=int, default=60, help="text-only warm-start steps")
    j.add_argument("--joint-steps", type=int, default=60, help="steps on the report's multimodal mix (and again "
                                                                "on the mix without text, the ablation)")
    j.add_argument("--batch", type=int, default=8)
    j.add_argument("--json", default=None, help="write the figures here as JSON")
    j.add_argument("--threads", type=int, default=1)
    j.add_argument("--seed", type=int, default=0)
    j.set_defaults(run=_cmd_joint)


def _cmd_train(args) -> int:
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    lm = load_model(args.model)
    tower = new_tower(TowerSpec(vision=args.vision, adapter=args.adapter, hidden=args.adapter_hidden,
                                encoder=args.encoder, pixel_norm=PixelNorm(args.pixel_norm)), lm.model.config.dim)
    config = VLMTrainConfig(steps=args.steps, align_steps=args.align_steps, batch=args.batch, lr=args.lr,
                            seed=args.seed)
    tasks = [t for t, _ in config.task_weights]
    pools = training_pools(tasks, VisionData(per_task=args.per_task), args.seed)
    history = VLMTrainer(lm.model, lm.tokenizer, tower, config).train(pools, log=print)
    train_seconds = time.perf_counter() - start
    figures = held_out_figures(lm, tower, tasks, args.eval, args.seed)
    for name, f in figures.items():
        print(f"{name:12} held-out rapid: {f.get('accuracy', f.get('refusal_rate')):.3f} (n={f['n']}); "
              f"e.g. {f['examples'][:2]}")
    out = Path(args.out) if args.out else PACKAGED_DIR / PACKAGED_TOWERS.get(args.model, f"{args.model}.safetensors")
    last = history[-20:]
    sidecar = {"command": "openafm " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
               "encoder_init": args.encoder or "random (no pretrained encoder given)",
               "decoder": args.model, "decoder_frozen": True, "resolution_mix": config.resolution_note,
               "steps": len(history), "train_seconds": round(train_seconds, 1),
               "final_loss_mean_last_20": sum(r["loss"] for r in last) / max(1, len(last)),
               "held_out_rapid": figures, "parameters": sum(p.numel() for p in tower.parameters())}
    save_tower(tower, out, decoder=args.model, sidecar=sidecar, fingerprint_of=lm.model)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB) and {out.with_suffix('.json').name}")
    return 0


def _cmd_joint(args) -> int:
    torch.set_num_threads(args.threads)
    result = run_joint(JointConfig(text_steps=args.text_steps, joint_steps=args.joint_steps, batch=args.batch,
                                   seed=args.seed), log=print)
    result["command"] = "openafm " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0
