"""`openafm sft OUT.safetensors`: train a LoRA adapter by supervised fine-tuning on chat examples, by default the
guided-generation data (openafm.data.guided) that teaches a model the structured-output format and to finish it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from openafm.checkpoint.load import load_model
from openafm.checkpoint.packaged import DEFAULT_MODEL
from openafm.data.chat import read_chat_jsonl
from openafm.data.guided import GuidedDataset, Split
from openafm.data.jsonl import read_jsonl
from openafm.nn.lora import DEFAULT_TARGETS
from openafm.train.config import Precision, TrainConfig
from openafm.train.loop import METRICS_FILE
from openafm.train.lora import save_lora_adapter
from openafm.train.sft import SFTLoader, TooLong, build_sft_trainer, heldout_loss

GUIDED, HELDOUT, NONE = "guided", "guided-heldout", "none"
SUMMARY_FILE = "sft.json"

EPILOG = f"""data (--data):
  guided        @generable-style schemas (nested types, bounded lists, enums, regex guides, recursive types) with
                valid, short instances, each as a structured request's user turn and the JSON the constrained
                decoder writes (openafm.data.guided, its train split; seeded by --seed)
  FILE.jsonl    one {{"prompt": ..., "response": ...}} object per line (a bad line is an error naming file:line)

held-out loss (--eval-data, measured before and after training on --eval-examples examples):
  guided-heldout  the guided data's held-out split: schemas never trained on (default with --data guided)
  FILE.jsonl      the first --eval-examples examples of a file
  none            no held-out loss (default with a file as --data)

writes:
  OUT.safetensors         the adapter (LoRA factors tied to the base weights' fingerprint); run it with
                          fm.SystemLanguageModel(adapter=fm.SystemLanguageModel.Adapter("OUT.safetensors"))
  RUN_DIR/{METRICS_FILE:<15} the loss of every step; RUN_DIR/checkpoints, which --resume continues
  RUN_DIR/{SUMMARY_FILE:<15} the run's figures: first and last losses, held-out loss before and after

example:
  openafm sft guided-adapter.safetensors --steps 300 --batch-size 4 --seq-len 512
"""


def register(sub) -> None:
    p = sub.add_parser("sft", help="train a LoRA adapter by SFT (default data: guided generation)",
                       description="Supervised fine-tuning of rank-r LoRA adapters on a frozen base model: each "
                                   "example is rendered with the model's chat template and only the assistant "
                                   "turn (its tokens and its end-of-turn token) is trained on; examples are "
                                   "packed whole into rows of --seq-len. The default data teaches guided "
                                   "generation: structured outputs in the session's format that finish.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", help="adapter file to write (.safetensors)")
    p.add_argument("--data", default=GUIDED, help="'guided' (default) or a JSONL file of {prompt, response}")
    p.add_argument("--model", default=DEFAULT_MODEL, help=f"the base model (default {DEFAULT_MODEL}); it needs a "
                                                          f"tokenizer with a chat template")
    p.add_argument("--rank", type=int, default=16, help="LoRA rank (default 16)")
    p.add_argument("--alpha", type=float, default=None, help="LoRA alpha (default 2 x rank)")
    p.add_argument("--targets", default=",".join(DEFAULT_TARGETS),
                   help=f"linear layers to adapt, by attribute name (default {','.join(DEFAULT_TARGETS)}: "
                        f"attention and MLP)")
    p.add_argument("--steps", type=int, default=300, help="optimizer steps (default 300)")
    p.add_argument("--batch-size", type=int, default=4, help="rows of --seq-len tokens per step (default 4)")
    p.add_argument("--grad-accum", type=int, default=1, help="micro-batches per step (default 1)")
    p.add_argument("--seq-len", type=int, default=512, help="tokens per row (default 512)")
    p.add_argument("--lr", type=float, default=5e-4, help="peak AdamW learning rate (default 5e-4)")
    p.add_argument("--warmup", type=int, default=20, help="linear warm-up steps, then cosine decay (default 20)")
    p.add_argument("--precision", default=Precision.BF16_AUTOCAST.value, choices=[k.value for k in Precision],
                   help="matmuls under bf16 autocast (default; about 3x faster on a CPU with bf16 support) or "
                        "float32")
    p.add_argument("--too-long", default=None, choices=[k.value for k in TooLong],
                   help="an example longer than --seq-len: skip it or raise (default: skip for guided data, "
                        "which is drawn, not given; error for a file)")
    p.add_argument("--eval-data", default=None, help="held-out loss data: guided-heldout, a JSONL file or none "
                                                     "(see below)")
    p.add_argument("--eval-examples", type=int, default=64, help="held-out examples (default 64)")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N (default cpu)")
    p.add_argument("--checkpoint-every", type=int, default=50, help="training checkpoint every n steps (default 50)")
    p.add_argument("--run-dir", default=None, help="trainer run dir (default OUT without suffix + '.run')")
    p.add_argument("--seed", type=int, default=0, help="seed of the LoRA init, the data order and the guided data")
    p.add_argument("--resume", action="store_true", help="continue the run from its newest checkpoint")
    p.set_defaults(run=_cmd_sft)


def _examples(data: str, seed: int):
    if data == GUIDED:
        return GuidedDataset(seed=seed, split=Split.TRAIN)
    if data.endswith(".jsonl") or Path(data).is_file():
        return read_chat_jsonl(data)
    raise ValueError(f"--data {data!r} is neither 'guided' nor a JSONL file of {{prompt, response}}")


def _eval_examples(args):
    which = args.eval_data or (HELDOUT if args.data == GUIDED else NONE)
    if args.eval_examples < 1 and which != NONE:
        raise ValueError(f"--eval-examples={args.eval_examples} must be >= 1 (or pass --eval-data none)")
    if which == NONE:
        return None
    if which == HELDOUT:
        return GuidedDataset(seed=args.seed, split=Split.HELDOUT, size=args.eval_examples)
    if which == GUIDED:
        raise ValueError("--eval-data guided would measure on training data; use guided-heldout")
    return read_chat_jsonl(which)[:args.eval_examples]


def _cmd_sft(args) -> int:
    out = Path(args.out)
    if out.suffix != ".safetensors":
        raise ValueError(f"OUT {args.out!r} must be a .safetensors file")
    targets = tuple(t for t in args.targets.split(",") if t)
    too_long = TooLong(args.too_long or (TooLong.SKIP.value if args.data == GUIDED else TooLong.ERROR.value))
    examples = _examples(args.data, args.seed)
    held_out = _eval_examples(args)
    lm = load_model(args.model, seed=args.seed)
    if lm.tokenizer is None or lm.tokenizer.chat_template is None:
        raise ValueError(f"model {args.model!r} has no tokenizer with a chat template; SFT renders chat turns")
    run_dir = Path(args.run_dir or str(out.with_suffix("")) + ".run")
    config = TrainConfig.from_dict(dict(
        model=args.model, run_dir=str(run_dir), steps=args.steps, batch_size=args.batch_size, seq_len=args.seq_len,
        grad_accum=args.grad_accum, seed=args.seed, device=args.device, init="keep", precision=args.precision,
        optimizer=dict(lr=args.lr, weight_decay=0.0, grad_clip=1.0),
        schedule=dict(kind="warmup-cosine", warmup_steps=min(args.warmup, args.steps - 1)),
        checkpoint=dict(every=args.checkpoint_every, keep=2)))
    loader = SFTLoader(examples, lm.tokenizer, seq_len=args.seq_len, global_batch=config.rows_per_rank(1),
                       seed=args.seed, too_long=too_long)
    if args.data != GUIDED:
        loader.check_lengths()                        # a file is finite: a too-long example fails before training
    evaluate = (lambda model: heldout_loss(model, held_out, lm.tokenizer, seq_len=args.seq_len, too_long=too_long)
                ) if held_out is not None else (lambda model: None)
    before = evaluate(lm.model.to(args.device))
    trainer, fingerprint = build_sft_trainer(config, base=lm.model, loader=loader, rank=args.rank, alpha=args.alpha,
                                             targets=targets)
    trainer.run(resume=args.resume)
    with trainer.eval_model() as model:
        after = evaluate(model)
    path = save_lora_adapter(trainer, out, fingerprint)
    losses = [r["loss"] for r in read_jsonl(run_dir / METRICS_FILE)]
    window = max(1, min(10, len(losses) // 4))
    summary = {"adapter": str(path), "base_model": args.model, "base_fingerprint": fingerprint, "data": args.data,
               "rank": args.rank, "alpha": trainer.hooks[0].alpha, "targets": list(targets), "steps": trainer.step,
               "batch_size": args.batch_size, "seq_len": args.seq_len, "lr": args.lr, "precision": args.precision,
               "examples_seen": loader.state_dict()["next"] - loader.skipped, "examples_skipped": loader.skipped,
               "train_loss_first": losses[0], "train_loss_last": losses[-1],
               f"train_loss_first_{window}_mean": sum(losses[:window]) / window,
               f"train_loss_last_{window}_mean": sum(losses[-window:]) / window,
               "heldout_before": before, "heldout_after": after}
    (run_dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    held = (f"; held-out loss {before['loss']:.4f} -> {after['loss']:.4f} over {after['tokens']} tokens"
            if before is not None else "")
    print(f"SFT LoRA rank {args.rank}: {trainer.step} steps, loss {losses[0]:.4f} -> {losses[-1]:.4f}{held}; "
          f"wrote {path} and {run_dir / SUMMARY_FILE}")
    return 0
