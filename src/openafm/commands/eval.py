"""`openafm eval`: score a model on the evaluation tasks (report §8), list the tasks, compare runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from openafm.checkpoint.adapter import attach_adapter, read_adapter
from openafm.checkpoint.load import LoadedModel, load_model
from openafm.checkpoint.packaged import DEFAULT_MODEL
from openafm.eval.harness import check_limit, run_eval
from openafm.eval.registry import TASKS, get_task
from openafm.eval.report import compare_chart, compare_table, load_summary, markdown_table

EPILOG = """examples:
  openafm eval list
  openafm eval --tasks mmlu_wordnet,mmmlu_udhr,mgsm_gsm_symbolic_3shot,bfcl_simple --limit 20 --out runs/base
  openafm eval --tasks mmlu_wordnet --limit 20 --dtype bfloat16 --out runs/bf16
  openafm eval --model out/qat2/packed --tasks mmlu_wordnet --limit 20 --out runs/qat2
  openafm eval compare runs/base runs/bf16 runs/qat2 --chart compare.png

writes (--out DIR): DIR/<task>.jsonl (one record per item: prompt, output, score), DIR/summary.json,
DIR/summary.md. A run killed part way resumes when rerun with the same options: finished items are skipped.
--limit counts items per task, and per language for the per-language (mmmlu_*) tasks.
"""


def register(sub) -> None:
    p = sub.add_parser("eval", help="evaluate a model on MMLU/MMMLU/MGSM/BFCL-format tasks; list tasks; compare runs",
                       description="Score a model on the evaluation tasks (report §8): batched, seeded, resumable. "
                                   "`openafm eval list` lists the tasks and what each stands in for; "
                                   "`openafm eval compare RUN1 RUN2 ...` prints runs side by side and draws a "
                                   "bar chart with 95% Wilson intervals.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", nargs="*", metavar="list | compare RUN...",
                   help="nothing (run the tasks), 'list', or 'compare' followed by output folders")
    p.add_argument("--model", "-m", default=DEFAULT_MODEL, help=f"model name or path (default {DEFAULT_MODEL})")
    p.add_argument("--adapter", metavar="FILE", help="a LoRA adapter file trained for the model")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="weight dtype")
    p.add_argument("--tasks", help="comma-separated task names (see `openafm eval list`)")
    p.add_argument("--limit", type=int, default=50, help="items per task (per language for mmmlu_*; default 50)")
    p.add_argument("--out", help="output folder (default runs/eval/MODEL-DTYPE, git-ignored)")
    p.add_argument("--seed", type=int, default=0, help="seed of the item draws (default 0)")
    p.add_argument("--batch-size", type=int, default=16, help="items per batch (default 16; 1 = one at a time)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--chart", default=None, help="compare: PNG to write (default compare.png in the first run)")
    p.set_defaults(run=_run)


def _run(args) -> int:
    action = args.action[0] if args.action else None
    if action == "list":
        return _list(args)
    if action == "compare":
        return _compare(args.action[1:], args.chart)
    if action is not None:
        raise ValueError(f"openafm eval {action!r}: expected nothing, 'list' or 'compare RUN...'")
    if not args.tasks:
        raise ValueError("--tasks is needed: a comma-separated list of task names (`openafm eval list` shows them)")
    tasks = [get_task(name.strip()) for name in args.tasks.split(",") if name.strip()]
    check_limit(args.limit)
    if args.batch_size < 1:
        raise ValueError(f"--batch-size {args.batch_size}: use 1 or more")
    loaded = load_model(args.model, dtype=args.dtype)
    if args.adapter:
        loaded = LoadedModel(attach_adapter(loaded.model, read_adapter(args.adapter)), loaded.tokenizer,
                             name=f"{loaded.name}+adapter", source=f"{loaded.source} + adapter {args.adapter}")
    out = Path(args.out or f"runs/eval/{loaded.name}-{args.dtype}")
    config = {"model": args.model, "adapter": args.adapter, "dtype": args.dtype, "seed": args.seed}
    summary = run_eval(loaded, tasks, limit=args.limit, out=out, config=config, batch_size=args.batch_size,
                       progress=not args.no_progress)
    print(markdown_table({**summary, "tasks": {t.name: summary["tasks"][t.name] for t in tasks}}), end="")
    print(f"\nwrote {out}/ (per-item JSONL, summary.json, summary.md)")
    return 0


def _list(args) -> int:
    for t in TASKS.values():
        needs = ", ".join(n.package for n in t.data[:1]) + (f" (+{len(t.data) - 1})" if len(t.data) > 1 else "")
        print(f"{t.name:32s} {t.kind.value:16s} shots {t.shots}  metric {t.metrics[0]:13s} data: {needs}")
        print(f"{'':32s} stands in for: {t.stands_in_for}")
    return 0


def _compare(runs: list[str], chart: str | None) -> int:
    if len(runs) < 1:
        raise ValueError("openafm eval compare needs one or more output folders of `openafm eval`")
    summaries = [load_summary(r) for r in runs]
    labels = [Path(r).name or r for r in runs]
    print(compare_table(summaries, labels), end="")
    path = compare_chart(summaries, labels, Path(chart) if chart else Path(runs[0]) / "compare.png")
    print(f"\nchart: {path} (bars: headline score; error bars: 95% Wilson intervals from the item count)")
    return 0
