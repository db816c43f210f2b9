import json
from collections import Counter

import pytest

from openafm.data.document import Document
from openafm.data.jsonl import read_documents, write_documents
from openafm.data.pipeline.build import BuildConfig, build
from openafm.data.pipeline.runner import run_stage
from openafm.data.pipeline.stage import Drop, Stage


class EvenOnly(Stage):
    name = "even"

    def __init__(self):
        self.processed = []

    def process(self, doc, counts):
        self.processed.append(doc.id)
        counts["seen"] += 1
        return doc if int(doc.id) % 2 == 0 else Drop("odd")


def _docs(ids):
    return [Document(id=str(i), text=f"t{i}", source="s", licence="l", domain="general") for i in ids]


def test_runner_counts_and_resumes(tmp_path):
    write_documents(tmp_path / "in" / "a-00000.jsonl", _docs(range(5)))
    write_documents(tmp_path / "in" / "a-00001.jsonl", _docs(range(5, 9)))
    first = run_stage(EvenOnly(), tmp_path / "in", tmp_path / "out", progress=False)
    assert (first["in"], first["out"], first["dropped"], first["counts"]) == (9, 5, {"odd": 4}, {"seen": 9})
    assert [d.id for d in read_documents(tmp_path / "out" / "a-00001.jsonl")] == ["6", "8"]
    (tmp_path / "out" / "a-00001.jsonl.done").unlink()                 # as if interrupted during shard 2
    stage = EvenOnly()
    second = run_stage(stage, tmp_path / "in", tmp_path / "out", progress=False)
    assert stage.processed == ["5", "6", "7", "8"]                    # only the unfinished shard is redone
    assert {k: second[k] for k in ("in", "out", "dropped", "counts")} == \
        {k: first[k] for k in ("in", "out", "dropped", "counts")}
    assert second["resumed_shards"] == 1
    assert json.loads((tmp_path / "out" / "report.json").read_text())["out"] == 5


def test_end_to_end_build_over_real_sources(tmp_path):
    config = BuildConfig(out=str(tmp_path / "b"), sources=["bible-kjv-text", "debian-reference-en", "fortunes-de"],
                         limit_per_source=40, shard_size=16)
    report = build(config, progress=False)
    stages = report["stages"]
    assert [s["stage"] for s in stages] == ["ingest", "extract", "langid", "dedup", "heuristics", "quality-model",
                                            "pii", "profanity"]
    assert stages[0]["per_source"]["debian-reference-en"]["documents"] == 15     # the 15 chapter/appendix pages
    assert stages[0]["out"] == 40 + 15 + 40
    for prev, cur in zip(stages, stages[1:], strict=False):  # consecutive pairs
        assert cur["in"] == prev["out"]
        assert cur["out"] + sum(cur["dropped"].values()) == cur["in"]
    assert stages[1]["counts"]["html-extracted"] == 15
    assert 0.85 < stages[5]["model"]["heldout_accuracy"] <= 1.0
    # the output shards hold exactly what the report says
    out = report["output"]
    found = Counter()
    nbytes = Counter()
    for domain in ("general", "multilingual"):
        for path in sorted((tmp_path / "b" / domain).glob("shard-*.jsonl")):
            for doc in read_documents(path):
                assert doc.domain == domain and doc.lang is not None
                found[doc.source] += 1
                nbytes[doc.source] += len(doc.text.encode())
    assert {k: v["documents"] for k, v in out["per_source"].items()} == dict(found)
    assert {k: v["bytes"] for k, v in out["per_source"].items()} == dict(nbytes)
    assert sum(found.values()) == stages[-1]["out"]
    assert out["per_language"]["de"]["documents"] >= 30 and out["per_language"]["en"]["documents"] >= 40
    assert json.loads((tmp_path / "b" / "report.json").read_text()) == report
    # rerun: every shard resumes, same figures
    again = build(config, progress=False)
    assert all(s["resumed_shards"] == s["shards"] for s in again["stages"][1:])
    assert again["output"] == report["output"]
    with pytest.raises(ValueError, match="other options"):
        build(BuildConfig(out=str(tmp_path / "b"), sources=["bible-kjv-text"], limit_per_source=40, shard_size=16),
              progress=False)


def test_config_rejects_bad_values(tmp_path):
    with pytest.raises(ValueError, match="unknown source 'kjv'"):
        BuildConfig(out=str(tmp_path), sources=["kjv"])
    with pytest.raises(ValueError, match="limit_per_source must be >= 1"):
        BuildConfig(out=str(tmp_path), limit_per_source=0)
