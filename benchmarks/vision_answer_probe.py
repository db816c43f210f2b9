"""Where do the shipped tower's answers stop improving: its fixed question pools, or the frozen decoder? From the
packaged tower, --steps more answer steps (the recipe's answer settings: batch 8, lr 1e-3, cosine, encoder frozen,
75% rapid) in one variant:

    fixed       the decoder frozen, questions drawn from pools rendered once (the recipe's: 1,000 per task, emoji
                with 8 placed copies, 25% absent-object questions)
    fresh       the decoder frozen, every question rendered afresh (train/vision/questions.py FreshQuestions, 25%)
    fresh-lora  fresh questions and a rank --rank LoRA on every decoder projection (alpha 2 x rank), at the
                encoder's rate (5e-4, the same cosine); the prefix K/V is recomputed each step through the adapted
                decoder

then answers --n validation questions per task (TRAIN-split renderings from seed 7, which no training draw uses:
no held-out image is looked at) and --n absent-object ones, rapid mode, greedy, exact match.

    python benchmarks/vision_answer_probe.py fresh-lora --steps 300 --json > runs/vlm-lora-probe/fresh-lora.json

One variant per run (each is ~6-9 min of training and ~4 min of answers on 2 cores); the tower (and adapter) it
ends with is written to --out.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, log, parser  # noqa: E402
from openafm.checkpoint.load import load_model  # noqa: E402
from openafm.checkpoint.vision import load_tower, packaged_tower_path  # noqa: E402
from openafm.models.image_views import Resolution  # noqa: E402
from openafm.nn.lora import apply_lora, lora_state_dict  # noqa: E402
from openafm.pipelines.vision import (  # noqa: E402
    VisionData,
    answerable_refusal_rate,
    headline_rates,
    held_out_figures,
    training_pools,
)
from openafm.splits import Split  # noqa: E402
from openafm.train.vision.mix import ResolutionMix  # noqa: E402
from openafm.train.vision.questions import FixedPools, FreshQuestions  # noqa: E402
from openafm.train.vision.tasks import Task  # noqa: E402
from openafm.train.vision.vlm import EncoderTraining, PrefixKV, VLMTrainConfig, VLMTrainer  # noqa: E402

VARIANTS = ("fixed", "fresh", "fresh-lora")
VALIDATION_SEED = 7
ABSENT = 0.25


def adapt_decoder(trainer: VLMTrainer, rank: int) -> None:
    """A rank-`rank` LoRA on every decoder projection, trained in the answer optimizer's second group (the rate the
    trainer gives it: encoder_lr), with the question prefix's K/V recomputed through it before each loss. The
    encoder must be frozen: the trainer schedules its first two groups only (adapter, then encoder or this one)."""
    if trainer.config.encoder is not EncoderTraining.FROZEN or len(trainer.opt.param_groups) != 1:
        raise ValueError("the decoder LoRA rides the answer optimizer's second group: freeze the encoder")
    decoder = trainer.decoder
    apply_lora(decoder, rank=rank, alpha=2 * rank)
    params = [p for name, p in decoder.named_parameters() if "lora_" in name]
    for p in params:
        p.requires_grad_(True)
    trainer.opt.add_param_group({"params": params, "lr": trainer.config.encoder_lr, "weight_decay": 0.0})
    plain = trainer.loss

    def loss(batch, mode):
        task = batch[0].task
        trainer.prefix_kv[task] = PrefixKV.capture(decoder, torch.tensor([trainer.rendered[task].prefix]))
        return plain(batch, mode)
    trainer.loss = loss
    decoder.train()


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("variant", choices=VARIANTS)
    p.add_argument("--steps", type=int, default=300, help="answer steps from the packaged tower")
    p.add_argument("--rank", type=int, default=16, help="the decoder LoRA's rank (fresh-lora)")
    p.add_argument("--n", type=int, default=80, help="validation questions per task")
    p.add_argument("--model", default="openafm-135m")
    p.add_argument("--out", type=Path, default=Path("runs/vlm-lora-probe"), help="where the trained tower goes")
    args = p.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(0)
    lm = load_model(args.model, seed=0)
    tower = load_tower(packaged_tower_path(args.model), decoder_model=lm.model).requires_grad_(True)
    config = VLMTrainConfig(align_steps=0, steps=args.steps, batch=8, lr=1e-3, encoder=EncoderTraining.FROZEN,
                            warmup=20, mix=ResolutionMix(low_rapid=0.75, balanced_of_rest=1.0), seed=1)
    tasks = [t for t, _ in config.task_weights]
    source = (FixedPools(training_pools(tasks, VisionData(per_task=1000, emoji_copies=8, absent=ABSENT), 0))
              if args.variant == "fixed" else FreshQuestions(ABSENT))
    trainer = VLMTrainer(lm.model, lm.tokenizer, tower, config)
    if args.variant == "fresh-lora":
        adapt_decoder(trainer, args.rank)
    start = time.perf_counter()
    history = trainer.train(source, log=log)
    seconds = time.perf_counter() - start
    lm.model.eval()
    looked = held_out_figures(lm, tower, list(Task), args.n, VALIDATION_SEED, split=Split.TRAIN, mode=Resolution.RAPID)
    args.out.mkdir(parents=True, exist_ok=True)
    torch.save(tower.state_dict(), args.out / f"tower_{args.variant}_{args.steps}.pt")
    if args.variant == "fresh-lora":
        torch.save(lora_state_dict(lm.model), args.out / f"lora_r{args.rank}_{args.steps}.pt")
    emit({"command": "python benchmarks/vision_answer_probe.py " + " ".join(sys.argv[1:]), "variant": args.variant,
          "steps": args.steps, "rank": args.rank if args.variant == "fresh-lora" else None,
          "train_seconds": round(seconds), "loss_last_50": sum(r["loss"] for r in history[-50:]) / 50,
          "validation": headline_rates(looked), "answerable_refused": answerable_refusal_rate(looked),
          "examples": {k: v.get("examples") for k, v in looked.items()}}, args.json)


if __name__ == "__main__":
    main()
