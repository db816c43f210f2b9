"""Run stages over JSONL shards, resumably, on an executor: ``{work}/{NN-stage}/{shard}.jsonl`` plus ``{shard}.done``.

A shard's output is written atomically and then its done-marker (a JSON file with that shard's counts), so
an interrupted run — or a worker that dies mid-shard — redoes only unfinished shards, and each stage report
still sums every shard's counts.

Consecutive stages run as one segment: one job takes a shard through all of them (writing each stage's output
and marker in turn), so the executor is called once per segment rather than once per stage. A stage of
``Scope.CORPUS`` (its ``prepare`` reads all of its input: dedup, the trained quality filter) starts a new segment,
since it can only prepare once the stage before it has finished every shard.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openafm.data.jsonl import read_documents, write_documents
from openafm.data.pipeline.executor import Executor, LocalExecutor, largest_first
from openafm.data.pipeline.stage import Drop, Scope, Stage
from openafm.io import write_text_atomic


def shard_paths(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.jsonl"))


def run_shard(stage: Stage, in_path: Path, out_path: Path) -> dict[str, Any]:
    """Process one shard; returns {"in", "out", "dropped": {reason: n}, "counts": {...}}."""
    counts: Counter = Counter()
    dropped: Counter = Counter()
    n_in = 0
    kept = []
    for doc in read_documents(in_path):
        n_in += 1
        result = stage.process(doc, counts)
        if isinstance(result, Drop):
            dropped[result.reason] += 1
        else:
            kept.append(result)
    write_documents(out_path, kept)
    return {"in": n_in, "out": len(kept), "dropped": dict(sorted(dropped.items())), "counts": dict(sorted(counts.items()))}


def _marker(directory: str | Path, shard: str) -> Path:
    return Path(directory) / (shard + ".done")


@dataclass(frozen=True)
class SegmentJob:
    """``{"shard": name}`` through prepared stages: stage i reads ``dirs[i]/name`` and writes ``dirs[i + 1]/name``
    then its marker; a stage whose marker exists is skipped. Returns each stage's counts."""

    stages: tuple[Stage, ...]
    dirs: tuple[str, ...]

    def __call__(self, row: dict[str, str]) -> dict[str, Any]:
        name, reports = row["shard"], []
        for stage, src, dst in zip(self.stages, self.dirs, self.dirs[1:]):
            marker = _marker(dst, name)
            if marker.exists():
                reports.append(json.loads(marker.read_text()))
                continue
            shard = run_shard(stage, Path(src) / name, Path(dst) / name)
            write_text_atomic(marker, json.dumps(shard))
            reports.append(shard)
        return {"stages": reports}


def segments(stages: list[Stage]) -> list[list[int]]:
    """Stage indices grouped into segments: a new one at every CORPUS-scope stage."""
    out: list[list[int]] = []
    for i, stage in enumerate(stages):
        if not out or stage.scope is Scope.CORPUS:
            out.append([])
        out[-1].append(i)
    return out


def _report(stage: Stage, shards: list[dict[str, Any]], resumed: int, prepared: dict[str, Any]) -> dict[str, Any]:
    dropped: Counter = Counter()
    counts: Counter = Counter()
    for s in shards:
        dropped.update(s["dropped"])
        counts.update(s["counts"])
    return {"stage": stage.name, "shards": len(shards), "in": sum(s["in"] for s in shards),
            "out": sum(s["out"] for s in shards), "dropped": dict(sorted(dropped.items())),
            "counts": dict(sorted(counts.items())), "resumed_shards": resumed, **prepared}


def run_segment(stages: list[Stage], dirs: list[Path], executor: Executor) -> list[dict[str, Any]]:
    """Run ``stages[i]`` from ``dirs[i]`` into ``dirs[i + 1]`` over every shard of ``dirs[0]``; each stage's
    report is written to its ``report.json`` and returned."""
    inputs = shard_paths(dirs[0])
    names = [p.name for p in inputs]
    for d in dirs[1:]:
        d.mkdir(parents=True, exist_ok=True)
    prepared = [stages[0].prepare(inputs, dirs[1], executor)]
    prepared += [s.prepare([dirs[i + 1] / n for n in names], dirs[i + 2], executor) for i, s in enumerate(stages[1:])]
    resumed = [sum(_marker(d, n).exists() for n in names) for d in dirs[1:]]
    pending = largest_first([{"shard": n, "path": str(dirs[0] / n)} for n in names
                             if not _marker(dirs[-1], n).exists()], "path")
    job = SegmentJob(tuple(stages), tuple(str(d) for d in dirs))
    fresh = {row["shard"]: result for row, result in
             zip(pending, executor.map(job, pending, desc=" + ".join(s.name for s in stages)))}
    per_stage: list[list[dict[str, Any]]] = [[] for _ in stages]
    for n in names:
        results = fresh[n]["stages"] if n in fresh else [json.loads(_marker(d, n).read_text()) for d in dirs[1:]]
        for i, r in enumerate(results):
            per_stage[i].append(r)
    reports = [_report(s, per_stage[i], resumed[i], prepared[i]) for i, s in enumerate(stages)]
    for report, d in zip(reports, dirs[1:]):
        write_text_atomic(d / "report.json", json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    return reports


def run_stage(stage: Stage, in_dir: Path, out_dir: Path, *, executor: Executor | None = None,
              progress: bool = True) -> dict[str, Any]:
    """Run one ``stage`` over every shard of ``in_dir`` into ``out_dir``; writes and returns its report."""
    return run_segment([stage], [in_dir, out_dir], executor or LocalExecutor(progress))[0]
