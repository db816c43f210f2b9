"""The whole curation run: ingest sources and files -> 7 stages -> ``{out}/{domain}/shard-NNNNN.jsonl`` + ``report.json``.

Work directories live under ``{out}/work/``: ``00-ingest`` (see ingest.py), then ``01-extract`` ... ``07-profanity``
(see runner.py for the per-shard markers). ``{out}/build.json`` records the options; rerunning into the same
directory with different options is an error (the finished shards would mix two builds), rerunning with the same
options resumes — on either executor: the executor is not an option of the output, which is the same bytes
whichever ran it (executor.py).
"""

from __future__ import annotations

import json
import shutil
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from openafm.data.jsonl import read_documents, write_documents
from openafm.data.pipeline.dedup import DedupStage
from openafm.data.pipeline.executor import ExecutorConfig, open_executor
from openafm.data.pipeline.extract import ExtractStage
from openafm.data.pipeline.heuristics import HeuristicStage
from openafm.data.pipeline.ingest import chunks, ingest
from openafm.data.pipeline.inputs import InputSpec
from openafm.data.pipeline.langid import LangIdStage
from openafm.data.pipeline.pii import PiiStage
from openafm.data.pipeline.profanity import ProfanityStage
from openafm.data.pipeline.quality_model import QualityModelStage
from openafm.data.pipeline.runner import run_segment, segments, shard_paths
from openafm.data.pipeline.stage import Stage
from openafm.data.sources import SOURCES, get_source
from openafm.errors import ConfigError

DEFAULT_LIMIT = 300
LOCAL = ExecutorConfig()


@dataclass(kw_only=True)
class BuildConfig:
    out: str
    sources: list[str] = field(default_factory=lambda: sorted(SOURCES))
    limit_per_source: int | None = DEFAULT_LIMIT   # None = every document of every source
    shard_size: int = 500                          # documents per output shard
    work_shard_size: int = 100                     # documents per work shard: the unit of parallel work and resume
    input: InputSpec | None = None                 # the user's own files, read beside the sources

    def __post_init__(self) -> None:
        for name in self.sources:
            get_source(name)
        if len(set(self.sources)) != len(self.sources):
            raise ValueError(f"sources listed twice: {self.sources}")
        if not self.sources and self.input is None:
            raise ConfigError("nothing to build: no sources and no input files (name --sources or --input GLOB)")
        if self.limit_per_source is not None and self.limit_per_source < 1:
            raise ValueError(f"limit_per_source must be >= 1 or None, got {self.limit_per_source}")
        if self.shard_size < 1 or self.work_shard_size < 1:
            raise ValueError(f"shard_size and work_shard_size must be >= 1, got {self.shard_size}, "
                             f"{self.work_shard_size}")

    def options(self) -> dict[str, Any]:
        """The options as JSON (build.json and the report)."""
        d = asdict(self)
        if self.input is not None:
            d["input"] = {**d["input"], "format": self.input.format and self.input.format.value}
        return d


def default_stages() -> list[Stage]:
    return [ExtractStage(), LangIdStage(), DedupStage(), HeuristicStage(), QualityModelStage(), PiiStage(),
            ProfanityStage()]


def _check_options(config: BuildConfig, out: Path) -> None:
    path = out / "build.json"
    options = config.options()
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
        shards = list(chunks(docs, shard_size))
        for k, chunk in enumerate(shards):
            write_documents(out / domain / f"shard-{k:05d}.jsonl", chunk)
        stats["per_domain"][domain]["shards"] = len(shards)
    return {key: dict(sorted(v.items())) for key, v in stats.items()}


def build(config: BuildConfig, *, stages: list[Stage] | None = None, executor: ExecutorConfig = LOCAL,
          progress: bool = True) -> dict[str, Any]:
    """Run the pipeline on the executor; returns the report also written to ``{out}/report.json``."""
    out = Path(config.out)
    _check_options(config, out)
    work = out / "work"
    with open_executor(executor, progress) as ex:
        workers = ex.workers                        # Ray's may be fewer than asked: the cluster's CPUs
        t = time.perf_counter()
        reports = [ingest(config.sources, config.limit_per_source, config.input, config.work_shard_size,
                          work / "00-ingest", ex)]
        seconds = [{"segment": "ingest", "seconds": round(time.perf_counter() - t, 2)}]
        stages = stages if stages is not None else default_stages()
        dirs = [work / "00-ingest"] + [work / f"{i:02d}-{s.name}" for i, s in enumerate(stages, start=1)]
        for seg in segments(stages):
            t = time.perf_counter()
            reports += run_segment([stages[i] for i in seg], dirs[seg[0]:seg[-1] + 2], ex)
            seconds.append({"segment": " + ".join(stages[i].name for i in seg),
                            "seconds": round(time.perf_counter() - t, 2)})
    report = {"options": config.options(), "stages": reports, "timing": seconds, "workers": workers,
              "output": write_output(dirs[-1], out, config.shard_size)}
    (out / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    return report
