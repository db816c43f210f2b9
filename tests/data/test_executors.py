"""The curation build on both executors: the same bytes, an order-independent dedup decision, exact resume,
typed errors that leave finished work in place."""

import hashlib
import json
import random
import socket
from collections import Counter
from pathlib import Path

import pytest

from openafm.data.document import Document
from openafm.data.jsonl import read_documents, write_documents
from openafm.data.pipeline.build import BuildConfig, build
from openafm.data.pipeline.dedup import BucketEdges, BucketRows, DedupParams, DedupStage, decide, lsh_bands
from openafm.data.pipeline.executor import ExecutorConfig, ExecutorError, ExecutorKind, LocalExecutor, open_executor
from openafm.data.pipeline.inputs import InputError, InputSpec
from openafm.errors import ConfigError

SOURCES = ["bible-kjv-text", "debian-reference-en", "fortunes-de"]


def output_digest(out: Path) -> dict[str, str]:
    """sha256 of every output shard (the build's product; work/ and the reports name paths and times)."""
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out.glob("*/shard-*.jsonl"))}


def kept_ids(out: Path) -> list[str]:
    return sorted(d.id for p in sorted(out.glob("*/shard-*.jsonl")) for d in read_documents(p))


def planted_inputs(tmp_path: Path) -> Path:
    """Two JSONL files of KJV verses with planted copies across them: an exact copy, a re-wrapped copy (case,
    spacing, punctuation) and an edited copy (a few words changed)."""
    from openafm.data.sources import get_source
    verses = [d.text for d in get_source("bible-kjv-text").read(40)]
    first = [{"text": t} for t in verses[:20]]
    second = [{"text": t} for t in verses[20:]]
    second += [{"text": verses[0]}, {"text": "  ".join(verses[1].upper().split()) + " !"},
               {"text": verses[2].replace(" the ", " a ", 2)}]
    for name, rows in (("a.jsonl", first), ("b.jsonl", second)):
        (tmp_path / "in").mkdir(exist_ok=True)
        (tmp_path / "in" / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path / "in"


@pytest.fixture(scope="module")
def ray_session():
    """One local Ray for the module (the executor joins it and leaves it running)."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    yield
    ray.shutdown()


def test_local_and_ray_write_the_same_bytes(tmp_path, ray_session):
    inputs = planted_inputs(tmp_path)
    config = {"sources": ["debian-reference-en", "fortunes-de", "wordnet-base"], "limit_per_source": 30,
              "work_shard_size": 7, "shard_size": 20, "input": InputSpec(glob=str(inputs / "*.jsonl"))}
    local = build(BuildConfig(out=str(tmp_path / "local"), **config), progress=False)
    ray = build(BuildConfig(out=str(tmp_path / "ray"), **config),
                executor=ExecutorConfig(kind=ExecutorKind.RAY, workers=2), progress=False)
    assert output_digest(tmp_path / "local") == output_digest(tmp_path / "ray") != {}
    assert [s["out"] for s in local["stages"]] == [s["out"] for s in ray["stages"]]
    dedup = next(s for s in local["stages"] if s["stage"] == "dedup")
    assert dedup["dropped"] == {"exact-duplicate": 2, "near-duplicate": 1}      # the three planted copies
    assert dedup["shards"] > 2                                                  # work shards, not one per source


def test_tokenization_on_ray_writes_the_same_shards(tmp_path, ray_session, tokenizer):
    """The build's output tokenized one job per file, in this process and on 2 Ray workers: the same shard bytes;
    a file that is not Documents fails on Ray with the job's own ShardError naming file:line."""
    from openafm.data.shards import ShardError
    from openafm.data.tokenize_shards import tokenize_dir
    corpus = tmp_path / "corpus"
    build(BuildConfig(out=str(corpus), sources=SOURCES, limit_per_source=40, shard_size=15), progress=False)
    assert len(list(corpus.glob("*/shard-*.jsonl"))) >= 4
    local = tokenize_dir(corpus, tmp_path / "t-local", tokenizer, max_tokens_per_shard=2000, progress=False)
    ray = tokenize_dir(corpus, tmp_path / "t-ray", tokenizer, max_tokens_per_shard=2000, progress=False,
                       executor=ExecutorConfig(kind=ExecutorKind.RAY, workers=2))
    assert local == ray
    assert sum(g.docs for g in local) == sum(len(list(read_documents(p))) for p in corpus.glob("*/shard-*.jsonl"))
    digest = {}
    for name in ("t-local", "t-ray"):
        root = tmp_path / name
        digest[name] = {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
                        for p in sorted(root.glob("*/*/*/*")) if not p.name.startswith(".")}
    assert digest["t-local"] == digest["t-ray"] != {}
    (corpus / "general" / "zz-bad.jsonl").write_text('{"id": "x"}\n')
    with pytest.raises(ShardError, match=r"zz-bad\.jsonl:1: not a Document"):
        tokenize_dir(corpus, tmp_path / "t-bad", tokenizer, progress=False,
                     executor=ExecutorConfig(kind=ExecutorKind.RAY, workers=2))
    finished = sorted(p.stem for p in (tmp_path / "t-bad" / ".done").glob("*/*.json"))
    assert finished == sorted(p.stem for p in corpus.glob("*/shard-*.jsonl"))     # every good file stays done


def test_the_keep_rule_does_not_depend_on_shard_order(tmp_path):
    rng = random.Random(0)
    texts = [" ".join(f"w{rng.randrange(10_000)}" for _ in range(40)) for _ in range(12)]
    docs = [Document(id=f"d{i:02d}", text=t, source="s", licence="l", domain="general", lang="en")
            for i, t in enumerate(texts)]
    docs += [Document(id=f"c{i:02d}", text=texts[i].upper(), source="s", licence="l", domain="general", lang="en")
             for i in range(0, 12, 3)]
    decisions = []
    for seed in range(3):
        order = list(docs)
        random.Random(seed).shuffle(order)
        shards = []
        for k in range(0, len(order), 5):
            shards.append(tmp_path / f"s{seed}" / f"x-{k:05d}.jsonl")
            write_documents(shards[-1], order[k:k + 5])
        stage = DedupStage()
        stage.prepare(shards[::-1] if seed else shards, tmp_path / f"w{seed}", LocalExecutor(False))
        decisions.append(stage.duplicates)
    assert decisions[0] == decisions[1] == decisions[2]
    assert {k: v["kept"] for k, v in decisions[0].items()} == {"d00": "c00", "d03": "c03", "d06": "c06", "d09": "c09"}


def test_decide_is_a_function_of_the_edge_set():
    edges = [{"a": "b", "b": "c", "kind": "near"}, {"a": "a", "b": "c", "kind": "exact"},
             {"a": "x", "b": "y", "kind": "near"}]
    want = {"b": {"reason": "near-duplicate", "kept": "a"}, "c": {"reason": "exact-duplicate", "kept": "a"},
            "y": {"reason": "near-duplicate", "kept": "x"}}
    for seed in range(5):
        shuffled = list(edges)
        random.Random(seed).shuffle(shuffled)
        assert decide(shuffled) == want


def test_bucket_edges_verify_the_estimated_jaccard(tmp_path):
    """Two documents that share an LSH band but agree on too few signature values are no edge."""
    assert lsh_bands(0.8, 128, miss_weight=0.5) == (9, 13)    # datasketch's choice for the same weights
    bands, rows = lsh_bands(0.7, 128)
    assert (bands, rows) == (18, 7) and 1 - (1 - 0.8 ** rows) ** bands > 0.98
    import base64

    import numpy as np
    same = np.arange(128, dtype="<u4")
    half = np.where(np.arange(128) < 88, same, same + 1000).astype("<u4")     # 88 / 128 = 0.69 < 0.7
    group = [{"key": "0:k", "id": "a", "sig": base64.b64encode(same.tobytes()).decode()},
             {"key": "0:k", "id": "b", "sig": base64.b64encode(half.tobytes()).decode()},
             {"key": "0:k", "id": "c", "sig": base64.b64encode(same.tobytes()).decode()}]
    assert BucketEdges(0.7)(group) == [{"a": "a", "b": "c", "kind": "near"}]
    with pytest.raises(ValueError, match="'a' occurs twice"):
        BucketEdges(0.7)([{**group[0], "key": "xk"}, {**group[0], "key": "xk"}])
    assert isinstance(BucketRows(bands, rows), BucketRows) and DedupParams().num_perm == 128


def test_resume_after_a_crash_between_output_and_marker(tmp_path):
    config = BuildConfig(out=str(tmp_path / "b"), sources=SOURCES, limit_per_source=20, work_shard_size=8)
    build(config, progress=False)
    before = output_digest(tmp_path / "b")
    heur = tmp_path / "b" / "work" / "04-heuristics"
    shard = sorted(heur.glob("*.jsonl"))[1]
    (heur / (shard.name + ".done")).unlink()              # the output was written, the marker was not
    shard.write_text("")                                  # and as if the crash had cut the output short
    again = build(config, progress=False)
    assert output_digest(tmp_path / "b") == before
    report = next(s for s in again["stages"] if s["stage"] == "heuristics")
    assert report["resumed_shards"] == report["shards"] - 1


def test_a_malformed_input_file_names_itself_and_finished_files_stay(tmp_path):
    inputs = planted_inputs(tmp_path)
    (inputs / "c.jsonl").write_text('{"text": "fine"}\n{"text": "fine too"}\n[1, 2]\n')
    config = BuildConfig(out=str(tmp_path / "b"), sources=[], input=InputSpec(glob=str(inputs / "*.jsonl")))
    with pytest.raises(InputError, match=r"c\.jsonl:3"):
        build(config, progress=False)
    markers = sorted((tmp_path / "b" / "work" / "00-ingest").glob("*.done"))
    assert len(markers) == 2                              # a.jsonl and b.jsonl finished
    (inputs / "c.jsonl").write_text('{"text": "fine"}\n')
    report = build(config, progress=False)
    assert report["stages"][0]["out"] == 20 + 23 + 1


def test_the_ray_executor_raises_the_jobs_own_error(tmp_path, ray_session):
    inputs = planted_inputs(tmp_path)
    (inputs / "c.jsonl").write_text('{"text": "fine"}\n{"txt": "no text field"}\n')
    config = BuildConfig(out=str(tmp_path / "b"), sources=[], input=InputSpec(glob=str(inputs / "*.jsonl")))
    with pytest.raises(InputError, match=r"c\.jsonl:2.*'text'"):
        build(config, executor=ExecutorConfig(kind=ExecutorKind.RAY, workers=2), progress=False)
    assert len(list((tmp_path / "b" / "work" / "00-ingest").glob("*.done"))) == 2


def test_an_unreachable_ray_address_is_named():
    with socket.socket() as s:                            # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ExecutorError, match=f"127.0.0.1:{port}"):
        open_executor(ExecutorConfig(kind=ExecutorKind.RAY, address=f"127.0.0.1:{port}"))


def test_executor_config_rejects_what_it_cannot_do():
    with pytest.raises(ConfigError, match="local executor runs in this process"):
        ExecutorConfig(workers=2)
    with pytest.raises(ConfigError, match="workers must be >= 1"):
        ExecutorConfig(kind=ExecutorKind.RAY, workers=0)
    with pytest.raises(ConfigError, match="not HOST:PORT"):
        ExecutorConfig(kind=ExecutorKind.RAY, address="headnode")


def test_local_shuffle_groups_by_key():
    ex = LocalExecutor(False)
    out = ex.shuffle(lambda row: [{"key": c, "n": row["n"]} for c in row["s"]], [{"s": "ab", "n": 1}, {"s": "b", "n": 2}],
                     lambda group: [{"key": group[0]["key"], "sum": sum(r["n"] for r in group)}], desc="t")
    assert Counter({r["key"]: r["sum"] for r in out}) == Counter({"a": 1, "b": 3})
