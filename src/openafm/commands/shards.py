"""`openafm data tokenize`: JSONL Documents -> memory-mapped token shards per domain and language."""

from __future__ import annotations

import argparse

from openafm.checkpoint.load import load_tokenizer
from openafm.commands.data import add_executor_arguments, executor_config
from openafm.data.tokenize_shards import tokenize_dir


def register(sub) -> None:
    data = _data_group(sub)
    t = data.add_parser(
        "tokenize", help="tokenize {IN}/{domain}/*.jsonl Documents into token shards per domain / language",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Read IN_JSONL_DIR/{domain}/*.jsonl (one openafm Document JSON object per line; domain is "
                    "general, code, math or multilingual; `openafm data build` writes this layout) and write "
                    "memory-mapped token shards to OUT/{domain}/{lang}/{file}-NNNNN/ (tokens.bin, offsets.bin, "
                    "shard.json with dtype, vocab size, token count and sha256). Each input file is one job whose "
                    "shards only it writes, so the files tokenize in parallel (--executor ray) and the output is "
                    "the same bytes on either executor. Each shard is written atomically and each finished file "
                    "leaves a marker under OUT/.done/: rerunning the same command resumes. The packed training "
                    "loader (openafm.data.loader.PackedLoader.from_dir) reads OUT.\n\n"
                    "examples:\n"
                    "  openafm data tokenize corpus --out tokens\n"
                    "  openafm data tokenize corpus --out tokens --executor ray --workers 2\n")
    t.add_argument("in_dir", metavar="IN_JSONL_DIR", help="directory of {domain}/*.jsonl Document files")
    t.add_argument("--out", required=True, metavar="DIR", help="output directory of token shards")
    t.add_argument("--tokenizer", default="default",
                   help="'default' (the default model's tokenizer, SmolLM2), a .gguf file, or a directory with "
                        "tokenizer.json (default: default)")
    t.add_argument("--max-tokens-per-shard", type=int, default=1 << 26, metavar="N",
                   help="start a new shard after N tokens (default 67108864)")
    t.add_argument("--overwrite", action="store_true",
                   help="clear DIR first (without it, a DIR from an earlier run with the same settings resumes, and "
                        "one with other settings is refused)")
    add_executor_arguments(t, "tokenization")
    t.set_defaults(run=_cmd_tokenize)


def _data_group(sub):
    """The `data` command's subparsers, created here or shared with another module that registered `data`."""
    if "data" in sub.choices:
        for action in sub.choices["data"]._actions:
            if isinstance(action, argparse._SubParsersAction):
                return action
        raise ValueError("a `data` command exists without subcommands; cannot add `data tokenize` to it")
    d = sub.add_parser("data", help="data pipeline commands (tokenize, ...)",
                       description="Data pipeline commands.")
    return d.add_subparsers(title="data commands", metavar="DATA_COMMAND")


def _cmd_tokenize(args) -> int:
    tokenizer = load_tokenizer(args.tokenizer)
    summaries = tokenize_dir(args.in_dir, args.out, tokenizer, max_tokens_per_shard=args.max_tokens_per_shard,
                             overwrite=args.overwrite, executor=executor_config(args))
    print(f"{'domain':14s} {'lang':5s} {'shards':>6s} {'docs':>9s} {'tokens':>12s}")
    for s in summaries:
        print(f"{s.domain:14s} {s.lang or 'und':5s} {s.shards:6d} {s.docs:9d} {s.tokens:12d}"
              + (f"  ({s.empty_skipped} empty skipped)" if s.empty_skipped else ""))
    print(f"total: {sum(s.docs for s in summaries)} documents, {sum(s.tokens for s in summaries)} tokens -> {args.out}")
    return 0
