"""Tool-use SFT (report §5): BFCL constrained AST accuracy on the held-out split before and after a short LoRA SFT
on the train split, in one run.

    python benchmarks/tool_sft.py --json        # docs/results/tool_sft.json: 24 per category, 120 steps (~17 min)

Data: the `bfcl-eval` wheel's questions, split by question id (eval/bfcl_data.split_of: 25% held out). The SFT
examples are rl/tool_data.bfcl_sft_examples over the train split of simple_python, multiple, parallel and
parallel_multiple (each the framework's tools prompt, the question, and the ground-truth calls as the constrained
grammar writes them, verified by the grammar and the AST match). Evaluation is the `bfcl_*_heldout_constrained`
tasks' code (eval/tool_use.py, ToolMode.CONSTRAINED: the framework's tool-call grammar, greedy) on the first
--limit held-out questions of each category in the task's seeded order, before and after, same questions.

`bfcl_gain_sft_points` is the mean over multiple and parallel of (after - before) x 100 (the issue's target:
>= 15 points). Trained on CPU under bf16 autocast; evaluated in float32.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
import torch  # noqa: E402

from _common import emit, parser  # noqa: E402
from openafm.checkpoint.load import load_model  # noqa: E402
from openafm.checkpoint.packaged import RAW_MODEL  # noqa: E402
from openafm.eval.bfcl_data import Split  # noqa: E402
from openafm.eval.tool_use import ToolMode, bfcl_items, evaluate_tools  # noqa: E402
from openafm.rl.synthesis.tool_data import DEFAULT_CATEGORIES, bfcl_sft_examples  # noqa: E402
from openafm.train.config import TrainConfig  # noqa: E402
from openafm.train.sft import SFTLoader, TooLong, build_sft_trainer, heldout_loss  # noqa: E402

EVAL_CATEGORIES = ("simple_python", "multiple", "parallel")
GAIN_CATEGORIES = ("multiple", "parallel")


def evaluate(model, tokenizer, items: dict) -> dict:
    out = {}
    for category, questions in items.items():
        t = time.perf_counter()
        records = evaluate_tools(model, tokenizer, questions, batch_size=8, mode=ToolMode.CONSTRAINED)
        out[category] = {"ast_accuracy": sum(r["score"] for r in records) / len(records), "n": len(records),
                         "correct_ids": [r["id"] for r in records if r["score"] == 1.0],
                         "seconds": round(time.perf_counter() - t, 1)}
        print(f"  {category}: {out[category]['ast_accuracy']:.3f} of {len(records)}", file=sys.stderr)
    return out


def main() -> None:
    p = parser(__doc__.split("\n")[0])
    p.add_argument("--limit", type=int, default=24, help="held-out questions per category (default 24)")
    p.add_argument("--steps", type=int, default=120, help="SFT steps (default 120)")
    p.add_argument("--batch-size", type=int, default=1, help="rows per step (default 1)")
    p.add_argument("--seq-len", type=int, default=768, help="tokens per row (default 768; longer examples skipped)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--loss-examples", type=int, default=24, help="held-out examples of the assistant-token loss "
                                                                   "(default 24)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    torch.manual_seed(args.seed)
    lm = load_model(RAW_MODEL)
    tok = lm.tokenizer
    items = {c: bfcl_items(c, args.limit, seed=args.seed, task=f"bfcl_{c}_heldout_constrained",
                           split=Split.HELDOUT)[0] for c in EVAL_CATEGORIES}
    train, dropped = bfcl_sft_examples(DEFAULT_CATEGORIES)
    heldout = bfcl_sft_examples(EVAL_CATEGORIES, split=Split.HELDOUT)[0][::8][:args.loss_examples]
    print(f"{len(train)} train examples ({len(dropped)} dropped); evaluating {args.limit} per category",
          file=sys.stderr)
    t0 = time.perf_counter()
    print("before:", file=sys.stderr)
    before = evaluate(lm.model, tok, items)
    print(f"  ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    loss_before = heldout_loss(lm.model, heldout, tok, seq_len=args.seq_len, too_long=TooLong.SKIP)
    with tempfile.TemporaryDirectory() as run_dir:
        config = TrainConfig.from_dict(dict(
            model=RAW_MODEL, run_dir=run_dir, steps=args.steps, batch_size=args.batch_size, seq_len=args.seq_len,
            seed=args.seed, device="cpu", init="keep", precision="bfloat16-autocast",
            optimizer=dict(lr=args.lr, weight_decay=0.0, grad_clip=1.0),
            schedule=dict(kind="warmup-cosine", warmup_steps=min(10, args.steps - 1)),
            checkpoint=dict(every=10 ** 6, keep=1)))
        loader = SFTLoader(train, tok, seq_len=args.seq_len, global_batch=args.batch_size, seed=args.seed,
                           too_long=TooLong.SKIP)
        trainer, _ = build_sft_trainer(config, base=lm.model, loader=loader, rank=args.rank)
        t = time.perf_counter()
        trainer.run()
        train_seconds = time.perf_counter() - t
        seen = loader.state_dict()["next"] - loader.skipped
        print("after:", file=sys.stderr)
        with trainer.eval_model() as model:
            after = evaluate(model, tok, items)
            loss_after = heldout_loss(model, heldout, tok, seq_len=args.seq_len, too_long=TooLong.SKIP)
    per_category = {c: {"before": before[c]["ast_accuracy"], "after": after[c]["ast_accuracy"], "n": before[c]["n"],
                        "gain_points": round(100 * (after[c]["ast_accuracy"] - before[c]["ast_accuracy"]), 2)}
                    for c in EVAL_CATEGORIES}
    gain = sum(per_category[c]["gain_points"] for c in GAIN_CATEGORIES) / len(GAIN_CATEGORIES)
    emit({"model": RAW_MODEL, "mode": "constrained", "split": "heldout",
          "bfcl_gain_sft_points": round(gain, 2), "target_points": 15, "target_met": gain >= 15,
          "per_category": per_category,
          "heldout_assistant_loss": {"before": loss_before, "after": loss_after},
          "sft": {"method": "lora", "rank": args.rank, "steps": args.steps, "batch_size": args.batch_size,
                  "seq_len": args.seq_len, "lr": args.lr, "precision": "bfloat16-autocast",
                  "train_examples": len(train), "dropped_examples": len(dropped), "examples_seen": seen,
                  "examples_skipped_too_long": loader.skipped, "train_seconds": round(train_seconds, 1),
                  "threads": torch.get_num_threads()},
          "correct_ids": {"before": {c: before[c]["correct_ids"] for c in EVAL_CATEGORIES},
                          "after": {c: after[c]["correct_ids"] for c in EVAL_CATEGORIES}},
          "eval_seconds": {"before": sum(v["seconds"] for v in before.values()),
                           "after": sum(v["seconds"] for v in after.values())},
          "total_seconds": round(time.perf_counter() - t0, 1)}, args.json)


if __name__ == "__main__":
    main()
