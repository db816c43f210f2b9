"""Stage 0, ingest: built-in sources and the user's files -> ``{work}/00-ingest/*.jsonl`` shards, one job each.

Each built-in source is one job writing ``{source}-NNNNN.jsonl`` then ``{source}.done`` (its document and byte
counts); each input file is one job writing ``input-{hash}-NNNNN.jsonl`` then ``input-{hash}.done`` (the hash is
of the file's path, so names are stable however the glob's matches are listed). A job first removes chunks an
interrupted attempt left, so a file that failed mid-way and is read again never mixes two attempts. When an
input file is malformed the job raises the reader's InputError naming it; every finished file keeps its marker.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openafm.data.document import Document
from openafm.data.jsonl import write_documents
from openafm.data.pipeline.executor import Executor
from openafm.data.pipeline.inputs import InputSpec, input_files, read_input_file
from openafm.data.sources import get_source
from openafm.io import write_text_atomic


def chunks(docs: Iterable[Document], size: int) -> Iterator[list[Document]]:
    """Consecutive lists of ``size`` documents (the last may be shorter), streamed."""
    chunk: list[Document] = []
    for doc in docs:
        chunk.append(doc)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _write_chunks(docs: Iterable[Document], ingest_dir: Path, prefix: str, shard_size: int) -> dict[str, int]:
    for stale in ingest_dir.glob(f"{prefix}-[0-9][0-9][0-9][0-9][0-9].jsonl"):
        stale.unlink()
    n = nbytes = 0
    for k, chunk in enumerate(chunks(docs, shard_size)):
        write_documents(ingest_dir / f"{prefix}-{k:05d}.jsonl", chunk)
        n += len(chunk)
        nbytes += sum(len(d.text.encode()) for d in chunk)
    return {"documents": n, "bytes": nbytes}


@dataclass(frozen=True)
class SourceJob:
    """``{"source": name}`` -> that built-in source's first ``limit`` documents as ingest shards, then its marker."""

    ingest_dir: str
    limit: int | None
    shard_size: int

    def __call__(self, row: dict[str, str]) -> dict[str, Any]:
        name = row["source"]
        stats = _write_chunks(get_source(name).read(self.limit), Path(self.ingest_dir), name, self.shard_size)
        write_text_atomic(Path(self.ingest_dir) / f"{name}.done", json.dumps(stats))
        return stats


@dataclass(frozen=True)
class InputJob:
    """``{"path", "prefix"}`` -> one of the user's files as ingest shards, then its marker (with skipped records)."""

    ingest_dir: str
    spec: InputSpec
    shard_size: int

    def __call__(self, row: dict[str, str]) -> dict[str, Any]:
        skipped: Counter = Counter()
        docs = read_input_file(Path(row["path"]), self.spec, skipped)
        stats = _write_chunks(docs, Path(self.ingest_dir), row["prefix"], self.shard_size)
        stats = {**stats, "skipped": dict(sorted(skipped.items()))}
        write_text_atomic(Path(self.ingest_dir) / f"{row['prefix']}.done", json.dumps(stats))
        return stats


def input_prefix(path: Path) -> str:
    return "input-" + hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]


def _run_jobs(job, rows: list[dict[str, str]], markers: list[Path], executor: Executor, desc: str) -> list[dict]:
    """The jobs whose marker is missing run on the executor; the others' stats are read back."""
    pending = [(r, m) for r, m in zip(rows, markers) if not m.exists()]
    fresh = dict(zip((str(m) for _, m in pending), executor.map(job, [r for r, _ in pending], desc=desc)))
    return [fresh[str(m)] if str(m) in fresh else json.loads(m.read_text()) for m in markers]


def ingest(sources: list[str], limit: int | None, spec: InputSpec | None, shard_size: int, ingest_dir: Path,
           executor: Executor) -> dict[str, Any]:
    """Run (or resume) the ingest jobs; returns the ingest report: per source and per input file."""
    ingest_dir.mkdir(parents=True, exist_ok=True)
    source_rows = [{"source": name} for name in sources]
    per_source = dict(zip(sources, _run_jobs(SourceJob(str(ingest_dir), limit, shard_size), source_rows,
                                             [ingest_dir / f"{n}.done" for n in sources], executor, "ingest sources")))
    report: dict[str, Any] = {"stage": "ingest", "per_source": per_source}
    if spec is not None:
        paths = input_files(spec)
        rows = [{"path": str(p), "prefix": input_prefix(p)} for p in paths]
        stats = _run_jobs(InputJob(str(ingest_dir), spec, shard_size), rows,
                          [ingest_dir / f"{r['prefix']}.done" for r in rows], executor, "ingest inputs")
        report["per_input"] = {r["path"]: s for r, s in zip(rows, stats)}
        skipped: Counter = Counter()
        for s in stats:
            skipped.update(s["skipped"])
        report["input_skipped"] = dict(sorted(skipped.items()))
    report["out"] = sum(s["documents"] for s in per_source.values()) + sum(
        s["documents"] for s in report.get("per_input", {}).values())
    return report
