"""JSONL documents -> token shards, one job per input file, run on an executor (this process or Ray Data).

Input: ``{in_dir}/{domain}/*.jsonl``, one `openafm.data.document.Document` JSON object per line (what the data
pipeline writes). Output: ``{out_dir}/{domain}/{lang}/{file}-NNNNN/`` (lang "und" where a document's language is
unknown; ``file`` is the input file's name without ``.jsonl``), each shard at most about ``max_tokens_per_shard``
tokens. `PackedLoader.from_dir(out_dir)` reads the result; it finds shards by their header, not their names.

The invariant that makes the work parallel and resumable: **an input file's documents go to shards that only
that file's job writes**, so jobs share nothing, and the bytes of every shard depend only on its input file and
the settings — not on the executor, the worker count or the order jobs ran in. A job writes its shards (each one
atomically), then its done-marker ``{out_dir}/.done/{domain}/{file}.json`` holding its per-language counts. A
rerun skips files with a marker and first clears the shards a crashed job left for a file without one.
``{out_dir}/.tokenize.json`` records the settings, so a rerun with different ones refuses instead of mixing.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from openafm.data.document import Document
from openafm.data.pipeline.executor import ExecutorConfig, largest_first, open_executor
from openafm.data.shards import ShardError, ShardHeader, ShardWriter
from openafm.io import json_object, write_text_atomic

UNKNOWN_LANG = "und"  # ISO 639-2 "undetermined"
SETTINGS_FILE = ".tokenize.json"
DONE_DIR = ".done"


@dataclasses.dataclass(kw_only=True)
class GroupSummary:
    domain: str
    lang: str | None
    shards: int = 0
    docs: int = 0
    tokens: int = 0
    empty_skipped: int = 0

    def add(self, other: GroupSummary) -> None:
        self.shards, self.docs = self.shards + other.shards, self.docs + other.docs
        self.tokens, self.empty_skipped = self.tokens + other.tokens, self.empty_skipped + other.empty_skipped


class _GroupWriter:
    """Writes one input file's documents of one (domain, lang) as numbered shards, tokenizing in batches."""

    def __init__(self, out_dir: Path, stem: str, domain: str, lang: str | None, tokenizer, max_tokens: int):
        self.dir, self.stem = out_dir / domain / (lang or UNKNOWN_LANG), stem
        self.domain, self.lang, self.tokenizer, self.max_tokens = domain, lang, tokenizer, max_tokens
        self.pending: list[str] = []
        self.writer: ShardWriter | None = None
        self.summary = GroupSummary(domain=domain, lang=lang)

    def add(self, text: str, batch_docs: int) -> None:
        self.pending.append(text)
        if len(self.pending) >= batch_docs:
            self.flush()

    def flush(self) -> None:
        for ids in self.tokenizer.encode_batch(self.pending) if self.pending else []:
            if self.writer is None:
                self.writer = ShardWriter(self.dir / f"{self.stem}-{self.summary.shards:05d}",
                                          vocab_size=self.tokenizer.vocab_size, eos_id=self.tokenizer.eos_token_id,
                                          domain=self.domain, lang=self.lang, tokenizer=repr(self.tokenizer))
            self.writer.add(ids)
            if self.writer.n_tokens >= self.max_tokens:
                self._close_shard()
        self.pending = []

    def _close_shard(self) -> None:
        header: ShardHeader = self.writer.close()
        self.writer = None
        self.summary.add(GroupSummary(domain=self.domain, lang=self.lang, shards=1, docs=header.n_docs,
                                      tokens=header.n_tokens, empty_skipped=header.n_empty_skipped))

    def close(self) -> GroupSummary:
        self.flush()
        if self.writer is not None:
            self._close_shard()
        return self.summary

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.abort()


@dataclasses.dataclass(frozen=True)
class FileJob:
    """Tokenize one input file (row: {"domain", "path"}) into its own shards and write its done-marker.
    -> {"groups": [GroupSummary as a dict, ...]}, the same whether it ran now or an earlier run did."""

    out_dir: str
    tokenizer: Any              # an openafm Tokenizer; it pickles, so Ray ships it to the workers
    max_tokens: int
    batch_docs: int

    def __call__(self, row: dict[str, str]) -> dict[str, Any]:
        out, domain, path = Path(self.out_dir), row["domain"], Path(row["path"])
        marker = done_marker(out, domain, path)
        if marker.exists():
            return json.loads(marker.read_text(encoding="utf-8"))
        clear_file_shards(out, domain, path)
        groups: dict[str | None, _GroupWriter] = {}
        try:
            for doc in read_domain_file(path, domain):
                if doc.lang not in groups:
                    groups[doc.lang] = _GroupWriter(out, _stem(path), domain, doc.lang, self.tokenizer,
                                                    self.max_tokens)
                groups[doc.lang].add(doc.text, self.batch_docs)
            summaries = [groups[k].close() for k in sorted(groups, key=lambda k: k or "")]
        except BaseException:
            for g in groups.values():
                g.abort()
            raise
        result = {"groups": [dataclasses.asdict(s) for s in summaries]}
        write_text_atomic(marker, json.dumps(result) + "\n")
        return result


def tokenize_dir(in_dir: str | os.PathLike, out_dir: str | os.PathLike, tokenizer, *,
                 max_tokens_per_shard: int = 1 << 26, overwrite: bool = False, batch_docs: int = 256,
                 executor: ExecutorConfig = ExecutorConfig(), progress: bool = True) -> list[GroupSummary]:
    """Tokenize every ``{in_dir}/{domain}/*.jsonl`` into shards under out_dir, one job per file on ``executor``;
    a rerun with the same settings resumes. -> one summary per (domain, lang), in (domain, lang) order."""
    in_dir, out_dir = Path(in_dir), Path(out_dir)
    if tokenizer.eos_token_id is None:
        raise ShardError(f"tokenizer {tokenizer!r} has no EOS token; shards need one between documents")
    if max_tokens_per_shard < 1:
        raise ShardError(f"max_tokens_per_shard {max_tokens_per_shard} must be >= 1")
    files = _input_files(in_dir)
    settings = {"in_dir": str(in_dir.resolve()), "tokenizer": repr(tokenizer), "vocab_size": tokenizer.vocab_size,
                "eos_id": tokenizer.eos_token_id, "max_tokens_per_shard": max_tokens_per_shard}
    _claim(out_dir, settings, overwrite)
    rows = largest_first([{"domain": d, "path": str(p)} for d, p in files], "path")
    job = FileJob(str(out_dir), tokenizer, max_tokens_per_shard, batch_docs)
    with open_executor(executor, progress) as ex:
        results = ex.map(job, rows, desc="tokenize")
    merged: dict[tuple[str, str], GroupSummary] = {}
    for result in results:
        for g in result["groups"]:
            key = (g["domain"], g["lang"] or "")
            merged.setdefault(key, GroupSummary(domain=g["domain"], lang=g["lang"])).add(GroupSummary(**g))
    return [merged[k] for k in sorted(merged)]


def _claim(out_dir: Path, settings: dict[str, Any], overwrite: bool) -> None:
    """Make out_dir ours for these settings: new, cleared (overwrite), or an earlier run of the same settings."""
    recorded = out_dir / SETTINGS_FILE
    if out_dir.exists() and any(out_dir.iterdir()):
        if overwrite:
            shutil.rmtree(out_dir)
        elif not recorded.exists():
            raise ShardError(f"{out_dir}: exists and is not empty, and no earlier `data tokenize` run wrote it "
                             f"(pass overwrite to replace what is there)")
        else:
            before = json.loads(recorded.read_text(encoding="utf-8"))
            diff = {k: (before.get(k), v) for k, v in settings.items() if before.get(k) != v}
            if diff:
                raise ShardError(f"{out_dir}: an earlier run used other settings, so its shards cannot be resumed: "
                                 + "; ".join(f"{k} was {a!r}, now {b!r}" for k, (a, b) in diff.items())
                                 + " (pass overwrite to start again)")
    write_text_atomic(recorded, json.dumps(settings, indent=1) + "\n")


def done_marker(out_dir: Path, domain: str, path: Path) -> Path:
    return out_dir / DONE_DIR / domain / f"{_stem(path)}.json"


def clear_file_shards(out_dir: Path, domain: str, path: Path) -> None:
    """Remove the shards (and a writer's hidden temporary directories) an unfinished job left for ``path``."""
    name = re.compile(rf"\.?{re.escape(_stem(path))}-\d{{5}}(\.tmp-[0-9a-f]+)?")
    for lang_dir in (out_dir / domain).glob("*"):
        for shard in lang_dir.iterdir() if lang_dir.is_dir() else []:
            if name.fullmatch(shard.name):
                shutil.rmtree(shard)


def _stem(path: Path) -> str:
    return path.name.removesuffix(".jsonl")


def _input_files(in_dir: Path) -> list[tuple[str, Path]]:
    if not in_dir.is_dir():
        raise ShardError(f"{in_dir}: not a directory (expected {in_dir}/{{domain}}/*.jsonl)")
    files = []
    build_work = in_dir / "work" if (in_dir / "report.json").is_file() else None   # `data build`'s intermediates
    for sub in sorted(p for p in in_dir.iterdir() if p.is_dir() and not p.name.startswith(".") and p != build_work):
        if sub.name not in Document.DOMAINS:
            raise ShardError(f"{sub}: {sub.name!r} is not a domain; domain directories are {Document.DOMAINS}")
        files += [(sub.name, p) for p in sorted(sub.glob("*.jsonl"))]
    if not files:
        raise ShardError(f"{in_dir}: no {{domain}}/*.jsonl files (domains: {Document.DOMAINS})")
    return files


def read_domain_file(path: Path, domain: str):
    """The Documents of one ``{domain}/*.jsonl`` file; a line that is not one, or of another domain, raises."""
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            doc = parse_document_line(line, path, line_no)
            if doc.domain != domain:
                raise ShardError(f"{path}:{line_no}: document {doc.id!r} has domain {doc.domain!r} but sits "
                                 f"in the {domain!r} directory")
            yield doc


def parse_document_line(line: str, path: Path, line_no: int) -> Document:
    """One JSONL line of a curated corpus -> its Document; anything else raises ShardError naming path:line."""
    data = json_object(line, f"{path}:{line_no}", ShardError)
    try:
        return Document.from_json(data)
    except (TypeError, ValueError) as e:
        raise ShardError(f"{path}:{line_no}: not a Document ({e})") from None
