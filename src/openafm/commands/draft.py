"""`openafm draft train --target MODEL --out DIR`: distil a small draft model for speculative decoding from the
target's own token distributions (optionally those of a base + adapter pair, on the adapter's prompts)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from openafm.checkpoint.adapter import attach_adapter, read_adapter
from openafm.io import write_text_atomic
from openafm.checkpoint.load import load_model
from openafm.checkpoint.packaged import DEFAULT_MODEL
from openafm.data.instructions import instruction_prompts
from openafm.runtime.draft import save_draft
from openafm.data.conversations import read_conversations
from openafm.train.draft import DraftTrainConfig, train_draft

EPILOG = """prompts (what the target answers, greedy, and the draft learns to predict):
  default        --prompts N instruction-following prompts (openafm.data.instructions, seed --seed)
  --data FILE    the user turns of a toolkit JSONL file (`openafm adapter train`'s format): with --adapter,
                 the adapter's own training data, so the draft matches the adapted model on its task

writes DIR/draft.safetensors (the draft's layers, norm, head rows and their token ids; the embedding is the
target's, not copied), DIR/draft.json (config, the target's embedding fingerprint) and DIR/train.json (figures).

examples:
  openafm draft train --out drafts/smollm2 --minutes 3
  openafm draft train --out drafts/task --adapter task.safetensors --data train.jsonl
  openafm generate --draft drafts/smollm2 --chat "Name three colours."
"""


def register(sub) -> None:
    p = sub.add_parser("draft", help="draft models for speculative decoding (train)",
                       description="Draft models for speculative decoding.")
    s = p.add_subparsers(dest="draft_command", metavar="COMMAND", required=True)
    t = s.add_parser("train", help="distil a draft from the target's own token distributions",
                     description="Distil a small draft (the target's first --layers layers, its embedding shared, "
                                 "a head over the --vocab most frequent tokens) from the target's greedy answers "
                                 "and its top-k next-token probabilities at every answer position.",
                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("--target", default=DEFAULT_MODEL, help=f"the target model (default {DEFAULT_MODEL})")
    t.add_argument("--out", required=True, help="directory to write the draft into")
    t.add_argument("--adapter", default=None, help="an adapter file: distil from base + adapter (a matched draft)")
    t.add_argument("--data", default=None, help="a toolkit JSONL file whose user turns are the prompts")
    t.add_argument("--prompts", type=int, default=96, help="instruction prompts when no --data (default 96)")
    t.add_argument("--layers", type=int, default=DraftTrainConfig.n_layers, help="draft layers (default 2)")
    t.add_argument("--vocab", type=int, default=DraftTrainConfig.vocab, help="head rows (default 8192)")
    t.add_argument("--answer-tokens", type=int, default=DraftTrainConfig.answer_tokens,
                   help="greedy tokens per answer (default 96)")
    t.add_argument("--epochs", type=int, default=DraftTrainConfig.epochs, help="passes over the answers (default 6)")
    t.add_argument("--lr", type=float, default=DraftTrainConfig.lr, help="peak AdamW learning rate (default 3e-4)")
    t.add_argument("--minutes", type=float, default=None, help="stop distilling after this long")
    t.add_argument("--seed", type=int, default=0, help="seed of the prompts and the data order")
    t.add_argument("--data-cache", default=None, metavar="FILE",
                   help="keep the target's answers and scores in FILE (reused when it exists: retrain faster)")
    t.set_defaults(run=_cmd_train)


def _cmd_train(args) -> int:
    lm = load_model(args.target, weights="float32")
    if lm.tokenizer is None or lm.tokenizer.chat_template is None:
        raise ValueError(f"target {args.target!r} has no tokenizer with a chat template; the draft learns its answers")
    target, name = lm.model, args.target
    if args.adapter is not None:
        target, name = attach_adapter(lm.model, read_adapter(args.adapter)), f"{args.target}+{Path(args.adapter).name}"
    if args.data is not None:
        prompts = [c.prompt_text() for c in read_conversations(args.data)]
    else:
        prompts = [p.prompt for p in instruction_prompts(args.prompts, seed=args.seed)]
    config = DraftTrainConfig(n_layers=args.layers, vocab=args.vocab, answer_tokens=args.answer_tokens,
                              epochs=args.epochs, lr=args.lr, minutes=args.minutes, seed=args.seed)
    start = time.perf_counter()
    draft, report = train_draft(target, lm.tokenizer, prompts, config, target_name=name, data_cache=args.data_cache)
    out = save_draft(args.out, draft)
    report.update({"target": name, "adapter": args.adapter, "data": args.data, "wall_seconds": time.perf_counter() - start})
    write_text_atomic(out / "train.json", json.dumps(report, indent=1) + "\n")
    print(f"draft: {draft.num_parameters() / 1e6:.1f}M own parameters ({config.n_layers} layers, {report['head_rows']} "
          f"head rows covering {report['head_coverage']:.1%} of answer tokens); distillation loss "
          f"{report['first_loss']:.3f} -> {report['final_loss']:.3f} in {report['steps']} steps; wrote {out}")
    return 0
