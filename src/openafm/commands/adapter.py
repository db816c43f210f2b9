"""`openafm adapter train|eval|export`: the adapter toolkit (report §7) on a user's JSONL conversations."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from openafm.checkpoint.adapter import attach_adapter, read_adapter
from openafm.io import write_text_atomic
from openafm.checkpoint.fingerprint import weights_fingerprint
from openafm.checkpoint.load import load_model
from openafm.checkpoint.packaged import DEFAULT_MODEL
from openafm.data.conversations import read_conversations
from openafm.errors import CheckpointError
from openafm.train.adapter_toolkit import (AdapterConfig, ConversationLoader, answer_accuracy, export_bundle,
                                           train_adapter)
from openafm.train.sft import TooLong, heldout_loss

FORMAT_HELP = """data format (one conversation per line, a JSON array of turns):
  [{"role": "system", "content": "..."}, {"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}]
  roles: system (first, optional), user, assistant, tool; the loss is on every assistant turn
  tool calls: the system turn may carry "tools": [{"name", "description", "parameters"}]; an assistant turn may
  carry "tool_calls": [{"name", "arguments": {...}}] instead of content; {"role": "tool", "content"} gives a result
  a bad line (not a conversation, an unknown role or key, longer than --seq-len) is an error naming file:line;
  with --skip-bad it is skipped, counted and reported
"""

TRAIN_EPILOG = FORMAT_HELP + """
writes OUT (the best epoch's adapter, tied to the base weights' fingerprint), RUN_DIR/ (trainer checkpoints:
--resume continues; epochs.json: eval loss per epoch) and RUN_DIR/adapter.json (the run's figures).

examples:
  openafm adapter train --data train.jsonl --eval eval.jsonl --out task.safetensors --epochs 3
  openafm adapter eval --adapter task.safetensors --data eval.jsonl
  openafm adapter export --adapter task.safetensors --draft drafts/task --out task.fmadapter
"""


def register(sub) -> None:
    p = sub.add_parser("adapter", help="the adapter toolkit: train, eval and export LoRA adapters on your data",
                       description="The adapter toolkit: rank-32 LoRA adapters trained on JSONL conversations.")
    s = p.add_subparsers(dest="adapter_command", metavar="COMMAND", required=True)
    t = s.add_parser("train", help="train an adapter on JSONL conversations", epilog=TRAIN_EPILOG,
                     description="Train a LoRA adapter (rank 32, alpha 16, every attention and MLP linear layer) on "
                                 "the base model, loss on assistant turns only, eval loss each epoch, early stop.",
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("--base", default=DEFAULT_MODEL, help=f"the base model (default {DEFAULT_MODEL})")
    t.add_argument("--data", required=True, help="training conversations (JSONL)")
    t.add_argument("--eval", default=None, help="held-out conversations (JSONL): eval loss each epoch, early stop")
    t.add_argument("--out", required=True, help="adapter file to write (.safetensors)")
    t.add_argument("--run-dir", default=None, help="trainer checkpoints (default OUT without suffix + '.run')")
    t.add_argument("--rank", type=int, default=AdapterConfig.rank, help="LoRA rank (default 32)")
    t.add_argument("--alpha", type=float, default=AdapterConfig.alpha, help="LoRA alpha (default 16)")
    t.add_argument("--epochs", type=int, default=AdapterConfig.epochs, help="passes over the data (default 3)")
    t.add_argument("--patience", type=int, default=AdapterConfig.patience,
                   help="epochs without a better eval loss before stopping (default 1)")
    t.add_argument("--lr", type=float, default=AdapterConfig.lr, help="peak AdamW learning rate (default 5e-4)")
    t.add_argument("--batch-size", type=int, default=AdapterConfig.batch_size, help="rows per step (default 4)")
    t.add_argument("--seq-len", type=int, default=AdapterConfig.seq_len, help="tokens per row (default 512)")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--skip-bad", action="store_true", help="skip bad lines and too-long conversations (counted)")
    t.add_argument("--resume", action="store_true", help="continue the run from its newest checkpoint")
    t.set_defaults(run=_cmd_train)

    e = s.add_parser("eval", help="eval loss and task accuracy of the base model and base + adapter",
                     description="Eval loss over the assistant turns, and task accuracy (the last assistant turn, "
                                 "answered greedily from the turns before it, exact match after stripping "
                                 "whitespace), before (base) and after (base + adapter).",
                     epilog=FORMAT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    e.add_argument("--base", default=DEFAULT_MODEL)
    e.add_argument("--adapter", required=True, help="adapter file (.safetensors)")
    e.add_argument("--data", required=True, help="held-out conversations (JSONL)")
    e.add_argument("--limit", type=int, default=50, help="conversations scored for accuracy (default 50)")
    e.add_argument("--max-tokens", type=int, default=64, help="answer length for accuracy (default 64)")
    e.add_argument("--seq-len", type=int, default=AdapterConfig.seq_len)
    e.add_argument("--skip-bad", action="store_true")
    e.set_defaults(run=_cmd_eval)

    x = s.add_parser("export", help="a self-describing adapter bundle (adapter, metadata, optional draft)",
                     description="Write a bundle directory: adapter.safetensors, bundle.json (base name and "
                                 "fingerprint, rank, alpha, targets, tokenizer hash) and draft/ when --draft is "
                                 "given; fm.SystemLanguageModel.Adapter(DIR) loads it, draft included.")
    x.add_argument("--adapter", required=True)
    x.add_argument("--out", required=True, help="bundle directory to write")
    x.add_argument("--draft", default=None, help="a draft directory to include (openafm draft train --adapter ...)")
    x.add_argument("--base", default=DEFAULT_MODEL, help="the base model (its tokenizer is hashed)")
    x.set_defaults(run=_cmd_export)


def _read(path: str, skip_bad: bool):
    convs = read_conversations(path, skip_bad=skip_bad)
    for reason in convs.skipped[:5]:
        print(f"skipped {reason}")
    if convs.skipped:
        print(f"skipped {len(convs.skipped)} bad lines of {path} (--skip-bad)")
    return convs


def _cmd_train(args) -> int:
    out = Path(args.out)
    if out.suffix != ".safetensors":
        raise ValueError(f"--out {args.out!r} must be a .safetensors file (the adapter)")
    train = _read(args.data, args.skip_bad)
    held = _read(args.eval, args.skip_bad) if args.eval else None
    lm = load_model(args.base, weights="float32")
    config = AdapterConfig(rank=args.rank, alpha=args.alpha, epochs=args.epochs, patience=args.patience, lr=args.lr,
                           batch_size=args.batch_size, seq_len=args.seq_len, seed=args.seed, skip_bad=args.skip_bad)
    run_dir = Path(args.run_dir or str(out.with_suffix("")) + ".run")
    report = train_adapter(lm, train, held, config, out=out, run_dir=run_dir, resume=args.resume, base_name=args.base)
    report["skipped_bad_lines"] = len(train.skipped) + (len(held.skipped) if held else 0)
    write_text_atomic(run_dir / "adapter.json", json.dumps(report, indent=1) + "\n")
    losses = ", ".join(f"{h['eval_loss']:.4f}" for h in report["epochs"] if h["eval_loss"] is not None)
    print(f"adapter rank {config.rank} alpha {config.alpha:g}: {len(report['epochs'])} epochs of "
          f"{report['steps_per_epoch']} steps in {report['seconds']:.0f} s; eval loss per epoch [{losses}]; best epoch "
          f"{report['best_epoch']}{'; stopped early' if report['early_stopped_at'] else ''}; "
          f"{report['skipped_too_long'] + report['skipped_bad_lines']} skipped; wrote {out} "
          f"({report['adapter_bytes'] / 1e6:.1f} MB)")
    return 0


def _cmd_eval(args) -> int:
    convs = _read(args.data, args.skip_bad)
    lm = load_model(args.base, weights="float32")
    adapted = attach_adapter(lm.model, read_adapter(args.adapter))
    too_long = TooLong.SKIP if args.skip_bad else TooLong.ERROR
    result = {}
    for name, model in (("base", lm.model), ("adapter", adapted)):
        loss = heldout_loss(model, convs, lm.tokenizer, seq_len=args.seq_len, too_long=too_long,
                            loader_class=ConversationLoader)
        acc = answer_accuracy(model, lm.tokenizer, convs[:args.limit], max_new_tokens=args.max_tokens)
        result[name] = {"eval_loss": loss["loss"], "accuracy": acc["accuracy"], "n": acc["n"]}
    print(json.dumps(result, indent=1))
    return 0


def _cmd_export(args) -> int:
    lm = load_model(args.base, weights="float32")
    info = read_adapter(args.adapter)
    if weights_fingerprint(lm.model) != info.base_fingerprint:
        raise CheckpointError(f"{args.adapter}: adapter was trained for base {info.base_name!r} "
                              f"({info.base_fingerprint}); --base {args.base!r} has other weights")
    out = export_bundle(args.adapter, args.out, tokenizer=lm.tokenizer, draft=args.draft)
    print(f"wrote {out} (adapter{' + draft' if args.draft else ''}, bundle.json)")
    return 0
