"""JSONL documents -> token shards, one group of shards per domain and language.

Input: `{in_dir}/{domain}/*.jsonl`, one `openafm.data.document.Document` JSON object per line (what the
data pipeline writes). Output: `{out_dir}/{domain}/{lang}/shard-00000/`, ... (lang "und" where a document's
language is unknown), each shard at most about `max_tokens_per_shard` tokens. `PackedLoader.from_dir(out_dir)`
reads the result.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from tqdm import tqdm

from openafm.data.document import Document
from openafm.data.shards import ShardError, ShardHeader, ShardWriter
from openafm.io import json_object

UNKNOWN_LANG = "und"  # ISO 639-2 "undetermined"


@dataclasses.dataclass(kw_only=True)
class GroupSummary:
    domain: str
    lang: str | None
    shards: int = 0
    docs: int = 0
    tokens: int = 0
    empty_skipped: int = 0


class _GroupWriter:
    """Writes one (domain, lang)'s documents as a numbered series of shards, tokenizing in batches."""

    def __init__(self, out_dir: Path, domain: str, lang: str | None, tokenizer, max_tokens: int, overwrite: bool):
        self.dir = out_dir / domain / (lang or UNKNOWN_LANG)
        self.domain, self.lang, self.tokenizer, self.max_tokens, self.overwrite = domain, lang, tokenizer, max_tokens, overwrite
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
                self.writer = ShardWriter(self.dir / f"shard-{self.summary.shards:05d}",
                                          vocab_size=self.tokenizer.vocab_size, eos_id=self.tokenizer.eos_token_id,
                                          domain=self.domain, lang=self.lang, tokenizer=repr(self.tokenizer),
                                          overwrite=self.overwrite)
            self.writer.add(ids)
            if self.writer.n_tokens >= self.max_tokens:
                self._close_shard()
        self.pending = []

    def _close_shard(self) -> None:
        header: ShardHeader = self.writer.close()
        self.writer = None
        s = self.summary
        s.shards, s.docs, s.tokens, s.empty_skipped = (s.shards + 1, s.docs + header.n_docs, s.tokens + header.n_tokens,
                                                       s.empty_skipped + header.n_empty_skipped)

    def close(self) -> GroupSummary:
        self.flush()
        if self.writer is not None:
            self._close_shard()
        return self.summary

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.abort()


def tokenize_dir(in_dir: str | os.PathLike, out_dir: str | os.PathLike, tokenizer, *,
                 max_tokens_per_shard: int = 1 << 26, overwrite: bool = False, batch_docs: int = 256,
                 progress: bool = True) -> list[GroupSummary]:
    """Tokenize every `{in_dir}/{domain}/*.jsonl` into shards under out_dir. -> one summary per (domain, lang)."""
    in_dir, out_dir = Path(in_dir), Path(out_dir)
    if tokenizer.eos_token_id is None:
        raise ShardError(f"tokenizer {tokenizer!r} has no EOS token; shards need one between documents")
    if max_tokens_per_shard < 1:
        raise ShardError(f"max_tokens_per_shard {max_tokens_per_shard} must be >= 1")
    files = _input_files(in_dir)
    if out_dir.exists() and any(out_dir.iterdir()) and not overwrite:
        raise ShardError(f"{out_dir}: exists and is not empty (pass overwrite to replace its shards)")
    groups: dict[tuple[str, str | None], _GroupWriter] = {}
    bar = None
    if progress:
        bar = tqdm(desc="tokenize", unit="doc")
    try:
        for domain, path in files:
            with open(path, encoding="utf-8") as f:
                for line_no, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    doc = parse_document_line(line, path, line_no)
                    if doc.domain != domain:
                        raise ShardError(f"{path}:{line_no}: document {doc.id!r} has domain {doc.domain!r} but sits "
                                         f"in the {domain!r} directory")
                    key = (domain, doc.lang)
                    if key not in groups:
                        groups[key] = _GroupWriter(out_dir, domain, doc.lang, tokenizer, max_tokens_per_shard,
                                                   overwrite)
                    groups[key].add(doc.text, batch_docs)
                    if bar is not None:
                        bar.update(1)
        return [groups[k].close() for k in sorted(groups, key=lambda k: (k[0], k[1] or ""))]
    except BaseException:
        for g in groups.values():
            g.abort()
        raise
    finally:
        if bar is not None:
            bar.close()


def _input_files(in_dir: Path) -> list[tuple[str, Path]]:
    if not in_dir.is_dir():
        raise ShardError(f"{in_dir}: not a directory (expected {in_dir}/{{domain}}/*.jsonl)")
    files = []
    for sub in sorted(p for p in in_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if sub.name not in Document.DOMAINS:
            raise ShardError(f"{sub}: {sub.name!r} is not a domain; domain directories are {Document.DOMAINS}")
        files += [(sub.name, p) for p in sorted(sub.glob("*.jsonl"))]
    if not files:
        raise ShardError(f"{in_dir}: no {{domain}}/*.jsonl files (domains: {Document.DOMAINS})")
    return files


def parse_document_line(line: str, path: Path, line_no: int) -> Document:
    """One JSONL line of a curated corpus -> its Document; anything else raises ShardError naming path:line."""
    data = json_object(line, f"{path}:{line_no}", ShardError)
    try:
        return Document.from_json(data)
    except (TypeError, ValueError) as e:
        raise ShardError(f"{path}:{line_no}: not a Document ({e})") from None
