"""`openafm sft OUT`: supervised fine-tuning on chat examples, a LoRA adapter (OUT.safetensors, the default method)
or every weight (--method full: OUT a checkpoint directory); the data by default the guided-generation data
(openafm.data.guided) that teaches a model the structured-output format and to finish it, or BFCL tool calls."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from openafm.checkpoint.load import load_model
from openafm.checkpoint.packaged import RAW_MODEL
from openafm.data.chat import read_chat_jsonl
from openafm.data.guided import GuidedDataset
from openafm.io import read_jsonl
from openafm.nn.lora import DEFAULT_TARGETS
from openafm.rl.synthesis.tool_data import DEFAULT_CATEGORIES as BFCL_CATEGORIES
from openafm.rl.synthesis.tool_data import bfcl_sft_examples
from openafm.splits import Split
from openafm.train.config import Precision, TrainConfig
from openafm.train.loop import METRICS_FILE
from openafm.train.lora import save_lora_adapter
from openafm.train.sft import Method, SFTLoader, TooLong, build_sft_trainer, heldout_loss, save_full_model

GUIDED, HELDOUT, NONE = "guided", "guided-heldout", "none"
BFCL, BFCL_HELDOUT = "bfcl", "bfcl-heldout"
DRAWN = (GUIDED, BFCL)                                # data built here rather than given: too-long ones are skipped
DEFAULT_LR = {Method.LORA: 5e-4, Method.FULL: 2e-5}
DEFAULT_RANK = 16
SUMMARY_FILE = "sft.json"

EPILOG = f"""data (--data):
  guided        @generable-style schemas (nested types, bounded lists, enums, regex guides, recursive types) with
                valid, short instances, each as a structured request's user turn and the JSON the constrained
                decoder writes (openafm.data.guided, its train split; seeded by --seed)
  bfcl          tool calls: the train split (by question id) of BFCL's {', '.join(BFCL_CATEGORIES)} questions
                (the bfcl-eval wheel), each the framework's tools system prompt, the question, and the
                ground-truth calls as the constrained tool-call grammar writes them (openafm.rl.synthesis.tool_data)
  FILE.jsonl    one {{"prompt": ..., "response": ...}} object per line, optionally "system" (a bad line is an error
                naming file:line)

held-out loss (--eval-data, measured before and after training on --eval-examples examples):
  guided-heldout  the guided data's held-out split: schemas never trained on (default with --data guided)
  bfcl-heldout    BFCL's held-out split, what the bfcl_*_heldout eval tasks score (default with --data bfcl)
  FILE.jsonl      the first --eval-examples examples of a file
  none            no held-out loss (default with a file as --data)

method (--method):
  lora          rank-r LoRA adapters on the frozen base (default; --lr default {DEFAULT_LR[Method.LORA]})
  full          every weight (--lr default {DEFAULT_LR[Method.FULL]}); --rank, --alpha, --targets do not apply

writes:
  OUT.safetensors         lora: the adapter (LoRA factors tied to the base weights' fingerprint); run it with
                          fm.SystemLanguageModel(adapter=fm.SystemLanguageModel.Adapter("OUT.safetensors"))
  OUT/                    full: a checkpoint directory (weights, config.json, tokenizer): --model OUT anywhere
  RUN_DIR/{METRICS_FILE:<15} the loss of every step; RUN_DIR/checkpoints, which --resume continues
  RUN_DIR/{SUMMARY_FILE:<15} the run's figures: first and last losses, held-out loss before and after

examples:
  openafm sft guided-adapter.safetensors --steps 300 --batch-size 4 --seq-len 512
  openafm sft tools-adapter.safetensors --data bfcl --steps 130 --batch-size 1 --seq-len 1024
  openafm sft tools-model --method full --data bfcl --steps 130 --batch-size 1 --seq-len 1024
"""


def register(sub) -> None:
    p = sub.add_parser("sft", help="SFT: a LoRA adapter or a fully fine-tuned model (default data: guided "
                                   "generation)",
                       description="Supervised fine-tuning of rank-r LoRA adapters on a frozen base model, or of "
                                   "every weight (--method full): each "
                                   "example is rendered with the model's chat template and only the assistant "
                                   "turn (its tokens and its end-of-turn token) is trained on; examples are "
                                   "packed whole into rows of --seq-len. The default data teaches guided "
                                   "generation: structured outputs in the session's format that finish.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", help="adapter file to write (.safetensors; --method full: a checkpoint directory)")
    p.add_argument("--method", default=Method.LORA.value, choices=[m.value for m in Method],
                   help="lora (default): adapters on the frozen base; full: every weight")
    p.add_argument("--data", default=GUIDED, help="'guided' (default), 'bfcl' or a JSONL file of {prompt, response}")
    p.add_argument("--model", default=RAW_MODEL, help=f"the base model (default {RAW_MODEL}, the pipeline's base); it needs a "
                                                          f"tokenizer with a chat template")
    p.add_argument("--rank", type=int, default=None, help=f"LoRA rank (default {DEFAULT_RANK})")
    p.add_argument("--alpha", type=float, default=None, help="LoRA alpha (default 2 x rank)")
    p.add_argument("--targets", default=None,
                   help=f"linear layers to adapt, by attribute name (default {','.join(DEFAULT_TARGETS)}: "
                        f"attention and MLP)")
    p.add_argument("--steps", type=int, default=300, help="optimizer steps (default 300)")
    p.add_argument("--batch-size", type=int, default=4, help="rows of --seq-len tokens per step (default 4)")
    p.add_argument("--grad-accum", type=int, default=1, help="micro-batches per step (default 1)")
    p.add_argument("--seq-len", type=int, default=512, help="tokens per row (default 512)")
    p.add_argument("--lr", type=float, default=None,
                   help=f"peak AdamW learning rate (default {DEFAULT_LR[Method.LORA]} lora, {DEFAULT_LR[Method.FULL]} full)")
    p.add_argument("--warmup", type=int, default=20, help="linear warm-up steps, then cosine decay (default 20)")
    p.add_argument("--precision", default=Precision.BF16_AUTOCAST.value, choices=[k.value for k in Precision],
                   help="matmuls under bf16 autocast (default; about 3x faster than float32 on a CPU with native "
                        "bfloat16, AVX512-BF16 or AMX, but far slower without it: 23x per decoder layer, 69x per matmul on an AVX2 CPU, "
                        "and the run warns) or float32")
    p.add_argument("--too-long", default=None, choices=[k.value for k in TooLong],
                   help="an example longer than --seq-len: skip it or raise (default: skip for guided and bfcl "
                        "data, which are built, not given; error for a file)")
    p.add_argument("--eval-data", default=None, help="held-out loss data: guided-heldout, bfcl-heldout, a JSONL "
                                                     "file or none (see below)")
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
    if data == BFCL:
        return bfcl_sft_examples(BFCL_CATEGORIES, split=Split.TRAIN)[0]
    if data.endswith(".jsonl") or Path(data).is_file():
        return read_chat_jsonl(data)
    raise ValueError(f"--data {data!r} is neither 'guided', 'bfcl' nor a JSONL file of {{prompt, response}}")


def _eval_examples(args):
    which = args.eval_data or {GUIDED: HELDOUT, BFCL: BFCL_HELDOUT}.get(args.data, NONE)
    if args.eval_examples < 1 and which != NONE:
        raise ValueError(f"--eval-examples={args.eval_examples} must be >= 1 (or pass --eval-data none)")
    if which == NONE:
        return None
    if which == HELDOUT:
        return GuidedDataset(seed=args.seed, split=Split.HELDOUT, size=args.eval_examples)
    if which in (GUIDED, BFCL):
        raise ValueError(f"--eval-data {which} would measure on training data; use {which}-heldout")
    if which == BFCL_HELDOUT:
        return bfcl_sft_examples(BFCL_CATEGORIES, split=Split.HELDOUT)[0][:args.eval_examples]
    return read_chat_jsonl(which)[:args.eval_examples]


def _lora_options(args, method: Method) -> tuple[int | None, float | None, tuple[str, ...]]:
    """(rank, alpha, targets) for LoRA; for full SFT none may be given (they would be silently ignored)."""
    if method is Method.FULL:
        given = [f"--{k}" for k in ("rank", "alpha", "targets") if getattr(args, k) is not None]
        if given:
            raise ValueError(f"--method full trains every weight; {', '.join(given)}: options of --method lora only")
        return None, None, DEFAULT_TARGETS
    targets = tuple(t for t in (args.targets or ",".join(DEFAULT_TARGETS)).split(",") if t)
    return (args.rank if args.rank is not None else DEFAULT_RANK), args.alpha, targets


def _cmd_sft(args) -> int:
    method, out = Method(args.method), Path(args.out)
    rank, alpha, targets = _lora_options(args, method)
    if method is Method.LORA and out.suffix != ".safetensors":
        raise ValueError(f"OUT {args.out!r} must be a .safetensors file (the adapter of --method lora)")
    if method is Method.FULL and (out.suffix == ".safetensors" or out.is_file()):
        raise ValueError(f"OUT {args.out!r} must be a directory path for --method full (a checkpoint directory)")
    lr = args.lr if args.lr is not None else DEFAULT_LR[method]
    too_long = TooLong(args.too_long or (TooLong.SKIP.value if args.data in DRAWN else TooLong.ERROR.value))
    examples = _examples(args.data, args.seed)
    held_out = _eval_examples(args)
    lm = load_model(args.model, seed=args.seed)
    if lm.tokenizer is None or lm.tokenizer.chat_template is None:
        raise ValueError(f"model {args.model!r} has no tokenizer with a chat template; SFT renders chat turns")
    run_dir = Path(args.run_dir or str(out.with_suffix("")) + ".run")
    config = TrainConfig.from_dict(dict(
        model=args.model, run_dir=str(run_dir), steps=args.steps, batch_size=args.batch_size, seq_len=args.seq_len,
        grad_accum=args.grad_accum, seed=args.seed, device=args.device, init="keep", precision=args.precision,
        optimizer=dict(lr=lr, weight_decay=0.0, grad_clip=1.0),
        schedule=dict(kind="warmup-cosine", warmup_steps=min(args.warmup, args.steps - 1)),
        checkpoint=dict(every=args.checkpoint_every, keep=2)))
    loader = SFTLoader(examples, lm.tokenizer, seq_len=args.seq_len, global_batch=config.rows_per_rank(1),
                       seed=args.seed, too_long=too_long)
    if args.data != GUIDED:
        loader.check_lengths()                        # a finite set: a too-long example fails before training
    evaluate = (lambda model: heldout_loss(model, held_out, lm.tokenizer, seq_len=args.seq_len, too_long=too_long)
                ) if held_out is not None else (lambda model: None)
    before = evaluate(lm.model.to(args.device))
    trainer, fingerprint = build_sft_trainer(config, base=lm.model, loader=loader, rank=rank, alpha=alpha,
                                             targets=targets, method=method)
    trainer.run(resume=args.resume)
    with trainer.eval_model() as model:
        after = evaluate(model)
    if method is Method.LORA:
        path = save_lora_adapter(trainer, out, fingerprint)
        wrote = {"adapter": str(path), "rank": rank, "alpha": trainer.hooks[0].alpha, "targets": list(targets)}
    else:
        path = save_full_model(trainer, out, lm.tokenizer, fingerprint, extra={"data": args.data, "lr": lr})
        wrote = {"checkpoint": str(path)}
    losses = [r["loss"] for r in read_jsonl(run_dir / METRICS_FILE)]
    window = max(1, min(10, len(losses) // 4))
    summary = {"method": method.value, **wrote, "base_model": args.model, "base_fingerprint": fingerprint,
               "data": args.data, "steps": trainer.step, "batch_size": args.batch_size, "seq_len": args.seq_len,
               "lr": lr, "precision": args.precision,
               "examples_seen": loader.state_dict()["next"] - loader.skipped, "examples_skipped": loader.skipped,
               "train_loss_first": losses[0], "train_loss_last": losses[-1],
               f"train_loss_first_{window}_mean": sum(losses[:window]) / window,
               f"train_loss_last_{window}_mean": sum(losses[-window:]) / window,
               "heldout_before": before, "heldout_after": after}
    (run_dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    held = (f"; held-out loss {before['loss']:.4f} -> {after['loss']:.4f} over {after['tokens']} tokens"
            if before is not None else "")
    what = f"LoRA rank {rank}" if method is Method.LORA else "full"
    print(f"SFT {what}: {trainer.step} steps, loss {losses[0]:.4f} -> {losses[-1]:.4f}{held}; "
          f"wrote {path} and {run_dir / SUMMARY_FILE}")
    return 0
