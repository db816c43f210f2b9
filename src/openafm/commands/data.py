"""`openafm data build`: run the corpus curation pipeline (report §3.1) into JSONL shards, locally or on Ray."""

from __future__ import annotations

import argparse
import time

from openafm.data.document import Document
from openafm.data.pipeline.build import DEFAULT_LIMIT, BuildConfig, build
from openafm.data.pipeline.executor import ExecutorConfig, ExecutorKind
from openafm.data.pipeline.inputs import InputFormat, InputSpec
from openafm.data.sources import SOURCES
from openafm.errors import ConfigError


def register(sub) -> None:

    data = sub.add_parser("data", help="build the curated pre-training corpus (sources -> pipeline -> shards)",
                          description="Data curation (report §3.1).")
    data_sub = data.add_subparsers(title="data commands", metavar="COMMAND")
    b = data_sub.add_parser(
        "build", help="read the corpora and your files and run the curation pipeline",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Read the built-in corpora and/or your own files (--input), then run: HTML extraction "
                    "(trafilatura) -> language id (py3langid) -> global exact + MinHash near-dup removal -> heuristic "
                    "filters -> a quality classifier trained on the data -> PII scrubbing -> profanity masking. "
                    "Writes OUT/{domain}/shard-NNNNN.jsonl and OUT/report.json (per-stage counts, per-source and "
                    "per-language documents and bytes). Work shards carry done-markers under OUT/work/: rerunning "
                    "the same command resumes, on either executor, and the output is the same bytes whichever "
                    "executor and however many workers ran it.\n\n"
                    "examples:\n"
                    "  openafm data build --out corpus                                  # all built-in sources\n"
                    "  openafm data build --out crawl --input 'warc/*.warc.gz'          # your web archives only\n"
                    "  openafm data build --out c --executor ray --workers 2            # Ray Data on this machine\n"
                    "  openafm data build --out c --executor ray --address 10.0.0.1:6379  # join a Ray cluster\n\n"
                    "sources:\n" + "\n".join(f"  {n:24s} {s.domain:12s} {s.description}"
                                             for n, s in sorted(SOURCES.items())))
    b.add_argument("--out", required=True, help="output directory")
    b.add_argument("--sources", nargs="*", metavar="NAME", default=None, choices=sorted(SOURCES),
                   help="built-in sources to read (default: all of them, listed below; none when --input is given "
                        "unless named here)")
    b.add_argument("--limit-per-source", type=int, default=DEFAULT_LIMIT, metavar="N",
                   help=f"at most N documents per source, evenly spread over it (default {DEFAULT_LIMIT}; "
                        f"0 = no cap: every document, a much longer build)")
    b.add_argument("--shard-size", type=int, default=500, metavar="N",
                   help="documents per output shard (default 500)")
    b.add_argument("--work-shard-size", type=int, default=100, metavar="N",
                   help="documents per work shard, the unit of parallel work and of resume (default 100)")
    inputs = b.add_argument_group("your own data")
    inputs.add_argument("--input", metavar="GLOB", default=None,
                        help="files to read beside (or instead of) the sources; ** recurses, e.g. 'crawl/**/*.warc.gz'")
    inputs.add_argument("--format", choices=[f.value for f in InputFormat], default=None,
                        help="file format (default: from each file's suffix: .jsonl .jsonl.gz .json .parquet .warc "
                             ".warc.gz); WARC HTML pages go through the extraction stage")
    inputs.add_argument("--text-field", default="text", metavar="NAME",
                        help="JSONL / Parquet: the field holding the text (default text)")
    inputs.add_argument("--id-field", default=None, metavar="NAME",
                        help="JSONL / Parquet: a field holding a stable unique id (default: file name and line / row)")
    inputs.add_argument("--domain", default="general", choices=Document.DOMAINS,
                        help="the domain of every input document (default general)")
    add_executor_arguments(b, "the build")
    b.set_defaults(run=_cmd_build)
    data.set_defaults(run=lambda args: data.print_help() or 2)


def add_executor_arguments(parser: argparse.ArgumentParser, work: str) -> None:
    """--executor / --workers / --address, shared by the data commands that run per-file or per-shard jobs."""
    run = parser.add_argument_group("where it runs")
    run.add_argument("--executor", choices=[k.value for k in ExecutorKind], default="local",
                     help=f"local: {work} runs in this process, one job after another (default); ray: Ray Data tasks "
                          f"on a local Ray with --workers CPUs, or on the cluster at --address")
    run.add_argument("--workers", type=int, default=None, metavar="N",
                     help="ray: concurrent one-CPU workers (default 2)")
    run.add_argument("--address", default=None, metavar="HOST:PORT",
                     help="ray: a running cluster's head (`ray start --head`); default: start a local Ray")


def executor_config(args) -> ExecutorConfig:
    """The ExecutorConfig that `add_executor_arguments`' options name."""
    kind = ExecutorKind(args.executor)
    workers = args.workers if args.workers is not None else (2 if kind is ExecutorKind.RAY else 1)
    return ExecutorConfig(kind=kind, workers=workers, address=args.address)


def _config(args) -> BuildConfig:
    spec = None
    if args.input is not None:
        spec = InputSpec(glob=args.input, format=args.format, text_field=args.text_field, id_field=args.id_field,
                         domain=args.domain)
    elif args.format or args.id_field or args.text_field != "text" or args.domain != "general":
        raise ConfigError("--format, --text-field, --id-field and --domain describe --input files; give --input GLOB")
    sources = args.sources if args.sources is not None else ([] if spec is not None else sorted(SOURCES))
    return BuildConfig(out=args.out, sources=sources, shard_size=args.shard_size,
                       work_shard_size=args.work_shard_size, limit_per_source=args.limit_per_source or None,
                       input=spec)


def _cmd_build(args) -> int:
    t = time.perf_counter()
    report = build(_config(args), executor=executor_config(args))
    for stage in report["stages"]:
        dropped = ", ".join(f"{k} {v}" for k, v in stage.get("dropped", {}).items())
        print(f"{stage['stage']:14s} in {stage.get('in', '-'):>6} out {stage['out']:>6}" + (f"  dropped: {dropped}" if dropped else ""))
        if "model" in stage:
            print(f"{'':14s} quality model held-out accuracy {stage['model']['heldout_accuracy']:.3f} "
                  f"({stage['model']['heldout_windows']} windows)")
        if stage.get("input_skipped"):
            print(f"{'':14s} input records skipped: " + ", ".join(f"{k} {v}" for k, v in stage["input_skipped"].items()))
    for domain, s in report["output"]["per_domain"].items():
        print(f"{domain:14s} {s['documents']:>6} documents {s['bytes'] / 1e6:8.2f} MB in {s['shards']} shards")
    print(f"wrote {args.out}/report.json in {time.perf_counter() - t:.0f} s")
    return 0
