"""Stage 3: global deduplication as a shuffle — exact copies and near duplicates, one kept per group, by id.

Exact: the text is NFKC-normalised, case-folded, stripped of punctuation and its whitespace collapsed; the
SHA-1 of that is the key, so copies that differ only in case, spacing or punctuation collapse.

Near: MinHash (128 permutations) over word 5-gram shingles (character 5-grams for Chinese, Japanese, Thai,
which are written without spaces). Five-word shingles are the usual choice for web-scale near-dup detection
(shorter shingles make unrelated texts in one language look similar; longer ones miss documents with small
edits). Two documents are near duplicates when their estimated Jaccard similarity (the share of equal signature
values) is at least 0.7: a copy that keeps 80% of a document's text (Jaccard ~0.8) is then found although the
estimate's spread at 128 permutations is ~0.035, while documents that merely share passages stay. The LSH bands
(18 of 7 rows) are chosen with misses weighted 4:1 over false candidates — the verification removes the latter —
so a pair at Jaccard 0.8 becomes a candidate with probability 0.986. A document with fewer than 5 tokens has one
shingle (all of it).

The decision is global and does not depend on the order shards are processed in:

    1. per shard (a map):   each document -> its exact key and MinHash signature          (signatures/*.jsonl)
    2. shuffle:             rows keyed by exact key and by each LSH band (b bands of r rows, chosen for the
                            threshold) are grouped across all shards; in each group, pairs whose estimated
                            Jaccard (share of equal signature values) reaches the threshold are edges
    3. on the driver:       connected components of the edges; each keeps its smallest document id, the rest
                            are dropped as ``exact-duplicate`` (a copy of a smaller id's normalised text) or
                            ``near-duplicate``                                                (decision/duplicates.jsonl)
    4. per shard (a map):   the stage drops the listed documents (the runner's ordinary shard pass)

So 1 worker, N workers, a resumed run or shuffled shards give the same kept ids.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from openafm.data.document import Document
from openafm.data.jsonl import read_documents
from openafm.data.pipeline.executor import Executor, largest_first
from openafm.data.pipeline.stage import Drop, Scope, Stage
from openafm.io import read_jsonl, write_jsonl, write_text_atomic

_PUNCT = re.compile(r"[^\w\s]+")
_SPACE = re.compile(r"\s+")
CHAR_SHINGLE_LANGS = frozenset({"zh", "ja", "th"})
EXACT, NEAR = "exact-duplicate", "near-duplicate"


def normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return _SPACE.sub(" ", _PUNCT.sub(" ", text)).strip()


def exact_key(text: str) -> str:
    return hashlib.sha1(normalize(text).encode("utf-8")).hexdigest()


def shingles(text: str, lang: str | None, n: int = 5) -> set[str]:
    norm = normalize(text)
    tokens = list(norm.replace(" ", "")) if lang in CHAR_SHINGLE_LANGS else norm.split()
    if len(tokens) < n:
        return {" ".join(tokens)}
    sep = "" if lang in CHAR_SHINGLE_LANGS else " "
    return {sep.join(tokens[i:i + n]) for i in range(len(tokens) - n + 1)}


def lsh_bands(threshold: float, num_perm: int, miss_weight: float = 0.8) -> tuple[int, int]:
    """(bands, rows per band) with bands * rows <= num_perm minimising the weighted false-candidate area below
    ``threshold`` plus the missed-pair area above it on the S-curve 1 - (1 - s**r)**b (datasketch's rule, whose
    default weights are 0.5 / 0.5: 0.8, 128 -> (9, 13)); 0.7, 128 with misses weighted 0.8 -> (18, 7)."""
    best, best_cost = (1, num_perm), float("inf")
    s_low, s_high = np.linspace(0.0, threshold, 200), np.linspace(threshold, 1.0, 200)
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            false = np.trapezoid(1 - (1 - s_low ** r) ** b, s_low)
            missed = np.trapezoid((1 - s_high ** r) ** b, s_high)
            cost = (1 - miss_weight) * false + miss_weight * missed
            if cost < best_cost:
                best, best_cost = (b, r), cost
    return best


@dataclass(frozen=True)
class DedupParams:
    threshold: float = 0.7
    num_perm: int = 128
    shingle: int = 5

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"dedup threshold must be in (0, 1], got {self.threshold}")
        if self.num_perm < 8 or self.shingle < 1:
            raise ValueError(f"dedup needs num_perm >= 8 and shingle >= 1, got {self.num_perm}, {self.shingle}")


def signature(doc: Document, params: DedupParams) -> np.ndarray:
    """[num_perm] uint32: the low 32 bits of datasketch's MinHash values (equality is all LSH and the
    Jaccard estimate use; a chance collision is 2**-32)."""
    from datasketch import MinHash  # on use: datasketch costs ~0.4 s to import (every CLI call)
    m = MinHash(num_perm=params.num_perm, seed=1)
    m.update_batch([s.encode("utf-8") for s in shingles(doc.text, doc.lang, params.shingle)])
    return (m.hashvalues & 0xFFFFFFFF).astype("<u4")


@dataclass(frozen=True)
class SignatureJob:
    """Map step 1 over one shard: ``{"in", "out"}`` -> writes (id, exact key, signature) lines, then a marker."""

    params: DedupParams

    def __call__(self, row: dict[str, str]) -> dict[str, Any]:
        lines = [{"id": d.id, "exact": exact_key(d.text),
                  "sig": base64.b64encode(signature(d, self.params).tobytes()).decode()}
                 for d in read_documents(row["in"])]
        write_jsonl(row["out"], lines)
        write_text_atomic(row["out"] + ".done", str(len(lines)))
        return {"documents": len(lines)}


@dataclass(frozen=True)
class BucketRows:
    """Shuffle emit: one signature file -> rows keyed by exact key and by each LSH band's hash."""

    bands: int
    rows: int

    def __call__(self, row: dict[str, str]) -> list[dict[str, str]]:
        out = []
        for line in read_jsonl(row["path"]):
            sig = np.frombuffer(base64.b64decode(line["sig"]), dtype="<u4")
            out.append({"key": "x" + line["exact"], "id": line["id"], "sig": ""})
            for b in range(self.bands):
                band = hashlib.sha1(sig[b * self.rows:(b + 1) * self.rows].tobytes()).hexdigest()[:20]
                out.append({"key": f"{b}:{band}", "id": line["id"], "sig": line["sig"]})
        return out


@dataclass(frozen=True)
class BucketEdges:
    """Shuffle reduce: one group -> edges. An exact group links its smallest id to each other member (kind
    "exact"); a band bucket links every pair whose signatures agree in at least ``threshold`` of positions."""

    threshold: float

    def __call__(self, group: list[dict[str, str]]) -> list[dict[str, str]]:
        members = sorted(group, key=lambda r: r["id"])
        if len(members) < 2:
            return []
        twice = [a["id"] for a, b in itertools.pairwise(members) if a["id"] == b["id"]]
        if twice:
            raise ValueError(f"document id {twice[0]!r} occurs twice in the input; dedup needs unique ids")
        if members[0]["key"].startswith("x"):
            return [{"a": members[0]["id"], "b": m["id"], "kind": "exact"} for m in members[1:]]
        by_sig: dict[str, list[str]] = {}
        for m in members:
            by_sig.setdefault(m["sig"], []).append(m["id"])
        edges = [{"a": ids[0], "b": other, "kind": "near"} for ids in by_sig.values() for other in ids[1:]]
        reps = [(ids[0], np.frombuffer(base64.b64decode(s), dtype="<u4")) for s, ids in by_sig.items()]
        for i, (id_a, sig_a) in enumerate(reps):
            for id_b, sig_b in reps[i + 1:]:
                if np.mean(sig_a == sig_b) >= self.threshold:
                    edges.append({"a": id_a, "b": id_b, "kind": "near"})
        return edges


def decide(edges: list[dict[str, str]]) -> dict[str, dict[str, str]]:
    """Connected components of the edges -> {dropped id: {"reason", "kept"}}: each component keeps its smallest
    id. A dropped document is an ``exact-duplicate`` when an exact edge reaches it (a smaller id has its normalised
    text), else a ``near-duplicate``. The result depends only on the set of edges, never on their order."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for e in edges:
        ra, rb = find(e["a"]), find(e["b"])
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    exact_copies = {e["b"] for e in edges if e["kind"] == "exact"}
    return {x: {"reason": EXACT if x in exact_copies else NEAR, "kept": find(x)}
            for x in sorted(parent) if find(x) != x}


class DedupStage(Stage):
    """Prepares the global decision through the executor (steps 1–3); ``process`` then drops the listed ids."""

    name = "dedup"
    scope = Scope.CORPUS

    def __init__(self, params: DedupParams = DedupParams()):
        self.params = params
        self.bands, self.rows = lsh_bands(params.threshold, params.num_perm)
        self.duplicates: dict[str, dict[str, str]] | None = None

    def prepare(self, input_shards: list[Path], work_dir: Path, executor: Executor) -> dict[str, Any]:
        decided = work_dir / "decision" / "duplicates.jsonl"      # not beside the shards: it is not one
        sig_dir = work_dir / "signatures"
        rows = [{"in": str(p), "out": str(sig_dir / p.name)} for p in input_shards]
        pending = largest_first([r for r in rows if not Path(r["out"] + ".done").exists()], "in")
        if not decided.exists():
            executor.map(SignatureJob(self.params), pending, desc="dedup signatures")
            edges = executor.shuffle(BucketRows(self.bands, self.rows), [{"path": r["out"]} for r in rows],
                                     BucketEdges(self.params.threshold), desc="dedup buckets")
            dups = decide(edges)
            write_jsonl(decided, ({"id": k, **v} for k, v in dups.items()))
        self.duplicates = {r["id"]: r for r in read_jsonl(decided)}
        reasons = Counter(r["reason"] for r in self.duplicates.values())
        return {"dedup": {"bands": self.bands, "rows_per_band": self.rows, "threshold": self.params.threshold,
                          "duplicates": len(self.duplicates), "by_reason": dict(sorted(reasons.items())),
                          "groups": len({r["kept"] for r in self.duplicates.values()})}}

    def process(self, doc: Document, counts: Counter) -> Document | Drop:
        if self.duplicates is None:
            raise RuntimeError("DedupStage.process called before prepare (no duplicate list)")
        dup = self.duplicates.get(doc.id)
        return doc if dup is None else Drop(dup["reason"])
