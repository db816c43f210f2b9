"""`openafm data build`: run the corpus curation pipeline (report §3.1) into JSONL shards."""

from __future__ import annotations

import argparse
import time

from openafm.data.pipeline.build import DEFAULT_LIMIT, BuildConfig, build
from openafm.data.sources import SOURCES


def register(sub) -> None:

    data = sub.add_parser("data", help="build the curated pre-training corpus (sources -> pipeline -> shards)",
                          description="Data curation (report §3.1).")
    data_sub = data.add_subparsers(title="data commands", metavar="COMMAND")
    b = data_sub.add_parser(
        "build", help="read the corpora and run the curation pipeline",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Read the corpora, then run: HTML extraction (trafilatura) -> language id (py3langid) -> "
                    "exact + MinHash near-dup removal -> heuristic filters -> a quality classifier trained on "
                    "the data -> PII scrubbing -> profanity masking. Writes OUT/{domain}/shard-NNNNN.jsonl and "
                    "OUT/report.json (per-stage counts, per-source and per-language documents and bytes). "
                    "Stages work shard by shard with done-markers under OUT/work/: rerunning the same command "
                    "resumes.\n\nsources:\n" + "\n".join(f"  {n:24s} {s.domain:12s} {s.description}"
                                                          for n, s in sorted(SOURCES.items())))
    b.add_argument("--out", required=True, help="output directory")
    b.add_argument("--sources", nargs="+", metavar="NAME", default=None, choices=sorted(SOURCES),
                   help="sources to read (default: all of them, listed below)")
    b.add_argument("--limit-per-source", type=int, default=DEFAULT_LIMIT, metavar="N",
                   help=f"at most N documents per source, evenly spread over it (default {DEFAULT_LIMIT}; "
                        f"0 = no cap: every document, a much longer build)")
    b.add_argument("--shard-size", type=int, default=500, metavar="N", help="documents per shard (default 500)")
    b.set_defaults(run=_cmd_build)
    data.set_defaults(run=lambda args: data.print_help() or 2)


def _cmd_build(args) -> int:

    t = time.perf_counter()
    config = BuildConfig(out=args.out, sources=args.sources or sorted(SOURCES), shard_size=args.shard_size,
                         limit_per_source=args.limit_per_source or None)
    report = build(config)
    for stage in report["stages"]:
        dropped = ", ".join(f"{k} {v}" for k, v in stage.get("dropped", {}).items())
        print(f"{stage['stage']:14s} in {stage.get('in', '-'):>6} out {stage['out']:>6}" + (f"  dropped: {dropped}" if dropped else ""))
        if "model" in stage:
            print(f"{'':14s} quality model held-out accuracy {stage['model']['heldout_accuracy']:.3f} "
                  f"({stage['model']['heldout_windows']} windows)")
    for domain, s in report["output"]["per_domain"].items():
        print(f"{domain:14s} {s['documents']:>6} documents {s['bytes'] / 1e6:8.2f} MB in {s['shards']} shards")
    print(f"wrote {args.out}/report.json in {time.perf_counter() - t:.0f} s")
    return 0
