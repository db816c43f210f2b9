"""Run stages over JSONL shards, resumably: ``{work}/{NN-stage}/{shard}.jsonl`` plus ``{shard}.done``.

A shard's output is written atomically and then its done-marker (a JSON file with that shard's counts), so
an interrupted run redoes only unfinished shards and the stage report still sums every shard's counts.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from tqdm import tqdm

from openafm.data.jsonl import read_documents, write_documents
from openafm.data.pipeline.stage import Drop, Stage


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


def run_stage(stage: Stage, in_dir: Path, out_dir: Path, *, progress: bool = True) -> dict[str, Any]:
    """Run ``stage`` over every shard of ``in_dir`` into ``out_dir``; writes and returns its report."""
    out_dir.mkdir(parents=True, exist_ok=True)
    shards = shard_paths(in_dir)
    prepared = stage.prepare(shards, out_dir)
    total: dict[str, Any] = {"in": 0, "out": 0, "dropped": Counter(), "counts": Counter(), "resumed_shards": 0}
    for in_path in tqdm(shards, desc=stage.name, unit="shard", disable=not progress, leave=False):
        out_path = out_dir / in_path.name
        marker = out_dir / (in_path.name + ".done")
        if marker.exists():
            shard = json.loads(marker.read_text())
            for doc in read_documents(out_path):
                stage.restore(doc)
            total["resumed_shards"] += 1
        else:
            shard = run_shard(stage, in_path, out_path)
            marker.write_text(json.dumps(shard))
        total["in"] += shard["in"]
        total["out"] += shard["out"]
        total["dropped"].update(shard["dropped"])
        total["counts"].update(shard["counts"])
    report = {"stage": stage.name, "shards": len(shards), **total,
              "dropped": dict(sorted(total["dropped"].items())), "counts": dict(sorted(total["counts"].items())),
              **prepared}
    (out_dir / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    return report
