"""The whole curation run: ingest sources -> 7 stages -> ``{out}/{domain}/shard-NNNNN.jsonl`` + ``report.json``.

Work directories live under ``{out}/work/``: ``00-ingest/{source}-NNNNN.jsonl`` (a ``{source}.done`` marker
per finished source), then ``01-extract`` ... ``07-profanity`` (see runner.py for the per-shard markers).
``{out}/build.json`` records the options; rerunning into the same directory with different options is an
error (the finished shards would mix two builds), rerunning with the same options resumes.
"""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from openafm.data.jsonl import read_documents, write_documents
from openafm.data.pipeline.dedup import DedupStage
from openafm.data.pipeline.extract import ExtractStage
from openafm.data.pipeline.heuristics import HeuristicStage
from openafm.data.pipeline.langid import LangIdStage
from openafm.data.pipeline.pii import PiiStage
from openafm.data.pipeline.profanity import ProfanityStage
from openafm.data.pipeline.quality_model import QualityModelStage
from openafm.data.pipeline.runner import run_stage, shard_paths
from openafm.data.pipeline.stage import Stage
from openafm.data.sources import SOURCES, get_source

DEFAULT_LIMIT = 300


@dataclass(kw_only=True)
class BuildConfig:
    out: str
    sources: list[str] = field(default_factory=lambda: sorted(SOURCES))
    limit_per_source: int | None = DEFAULT_LIMIT   # None = every document of every source
    shard_size: int = 500                          # documents per shard, in the work and the output shards

    def __post_init__(self) -> None:
        for name in self.sources:
            get_source(name)
        if len(set(self.sources)) != len(self.sources):
            raise ValueError(f"sources listed twice: {self.sources}")
        if self.limit_per_source is not None and self.limit_per_source < 1:
            raise ValueError(f"limit_per_source must be >= 1 or None, got {self.limit_per_source}")
        if self.shard_size < 1:
            raise ValueError(f"shard_size must be >= 1, got {self.shard_size}")


def default_stages() -> list[Stage]:
    return [ExtractStage(), LangIdStage(), DedupStage(), HeuristicStage(), QualityModelStage(), PiiStage(),
            ProfanityStage()]


def _chunks(items: list, size: int) -> list[list]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def ingest(config: BuildConfig, ingest_dir: Path, progress: bool = True) -> dict[str, Any]:
    ingest_dir.mkdir(parents=True, exist_ok=True)
    per_source = {}
    for name in tqdm(config.sources, desc="ingest", unit="source", disable=not progress, leave=False):
        marker = ingest_dir / f"{name}.done"
        if marker.exists():
            per_source[name] = json.loads(marker.read_text())
            continue
        docs = list(get_source(name).read(config.limit_per_source))
        for k, chunk in enumerate(_chunks(docs, config.shard_size)):
            write_documents(ingest_dir / f"{name}-{k:05d}.jsonl", chunk)
        per_source[name] = {"documents": len(docs), "bytes": sum(len(d.text.encode()) for d in docs)}
        marker.write_text(json.dumps(per_source[name]))
    return {"stage": "ingest", "out": sum(s["documents"] for s in per_source.values()), "per_source": per_source}


def _check_options(config: BuildConfig, out: Path) -> None:
    path = out / "build.json"
    options = asdict(config)
    if path.exists():
        before = json.loads(path.read_text())
        if before != options:
            diff = {k: (before.get(k), v) for k, v in options.items() if before.get(k) != v}
            raise ValueError(f"{out} holds a build with other options {diff} (before, now); "
                             f"use a new --out directory or delete {out}")
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(options, indent=2) + "\n")


def write_output(final_dir: Path, out: Path, shard_size: int) -> dict[str, Any]:
    """Regroup the last stage's documents by domain into ``{out}/{domain}/shard-NNNNN.jsonl``; returns stats."""
    by_domain: dict[str, list] = defaultdict(list)
    stats: dict[str, dict] = {"per_source": defaultdict(lambda: {"documents": 0, "bytes": 0}),
                              "per_language": defaultdict(lambda: {"documents": 0, "bytes": 0}),
                              "per_domain": defaultdict(lambda: {"documents": 0, "bytes": 0, "shards": 0})}
    for path in shard_paths(final_dir):
        for doc in read_documents(path):
            by_domain[doc.domain].append(doc)
            n = len(doc.text.encode())
            lang = doc.lang or f"code:{doc.meta.get('programming_language', 'unknown')}"
            for key, name in (("per_source", doc.source), ("per_language", lang), ("per_domain", doc.domain)):
                stats[key][name]["documents"] += 1
                stats[key][name]["bytes"] += n
    for domain in by_domain:
        shutil.rmtree(out / domain, ignore_errors=True)
    for domain, docs in sorted(by_domain.items()):
        chunks = _chunks(docs, shard_size)
        for k, chunk in enumerate(chunks):
            write_documents(out / domain / f"shard-{k:05d}.jsonl", chunk)
        stats["per_domain"][domain]["shards"] = len(chunks)
    return {key: dict(sorted(v.items())) for key, v in stats.items()}


def build(config: BuildConfig, *, stages: list[Stage] | None = None, progress: bool = True) -> dict[str, Any]:
    """Run the pipeline; returns the report also written to ``{out}/report.json``."""
    out = Path(config.out)
    _check_options(config, out)
    work = out / "work"
    reports = [ingest(config, work / "00-ingest", progress)]
    prev = work / "00-ingest"
    for i, stage in enumerate(stages if stages is not None else default_stages(), start=1):
        nxt = work / f"{i:02d}-{stage.name}"
        reports.append(run_stage(stage, prev, nxt, progress=progress))
        prev = nxt
    report = {"options": asdict(config), "stages": reports, "output": write_output(prev, out, config.shard_size)}
    (out / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    return report
