"""Token shards: tokenized documents as memory-mapped arrays on disk.

A shard is a directory of three files:

    tokens.bin    every document's token ids back to back (uint16 when the vocabulary has <= 65536 ids,
                  else uint32), little-endian, no separators
    offsets.bin   uint64 [n_docs + 1]: document i is tokens[offsets[i]:offsets[i + 1]]
    shard.json    the header: format, dtype, vocab size, EOS id, counts, domain / language and the
                  sha256 of both binary files

`ShardWriter` streams documents into a temporary directory and renames it into place when closed, so a
shard either exists whole or not at all. `TokenShard.open` memory-maps a shard and checks it: sizes
against the header always, and with `Verify.FULL` the checksums and that every id is below the
vocabulary size. A problem raises `ShardError` naming the file and what is wrong.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
from tqdm import tqdm

from openafm.data.document import Document
from openafm.errors import OpenAFMError
from openafm.io import fsync_tree, replace_directory

FORMAT = "openafm-token-shard/1"
TOKENS_FILE, OFFSETS_FILE, HEADER_FILE = "tokens.bin", "offsets.bin", "shard.json"
_CHUNK = 1 << 22  # elements per chunk when hashing or scanning


class ShardError(OpenAFMError, ValueError):
    """A token shard is missing, truncated, corrupt or inconsistent with its header (names the file)."""


class Verify(enum.Enum):
    SIZES = "sizes"  # file sizes and the offsets table against the header (cheap: no pass over the tokens)
    FULL = "full"    # also both checksums and every token id < vocab_size (one pass over the tokens)


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 when every id fits (vocab_size <= 65536), else uint32."""
    if vocab_size < 1 or vocab_size > 2 ** 32:
        raise ShardError(f"vocab_size {vocab_size} is outside 1 .. 2**32")
    return np.dtype("<u2") if vocab_size <= 2 ** 16 else np.dtype("<u4")


@dataclasses.dataclass(kw_only=True)
class ShardHeader:
    vocab_size: int
    eos_id: int                    # the loader puts it after every document
    dtype: str                     # "uint16" | "uint32"
    n_tokens: int
    n_docs: int
    tokens_sha256: str
    offsets_sha256: str
    domain: str | None = None      # a mixture bucket: general | code | math | multilingual
    lang: str | None = None        # ISO 639-1 code, where known
    tokenizer: str = ""            # free text naming the tokenizer (for humans)
    n_empty_skipped: int = 0       # documents that tokenized to nothing and were left out
    format: str = FORMAT

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: dict, path: Path) -> "ShardHeader":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown, missing = set(d) - names, {f.name for f in dataclasses.fields(cls)
                                             if f.default is dataclasses.MISSING} - set(d)
        if unknown or missing:
            raise ShardError(f"{path}: header keys unknown {sorted(unknown)} / missing {sorted(missing)}; "
                             f"expected {sorted(names)}")
        header = cls(**d)
        if header.format != FORMAT:
            raise ShardError(f"{path}: format {header.format!r} is not {FORMAT!r}")
        if header.dtype != token_dtype(header.vocab_size).name:
            raise ShardError(f"{path}: dtype {header.dtype!r} does not match vocab_size {header.vocab_size} "
                             f"(expected {token_dtype(header.vocab_size).name!r})")
        return header


class ShardWriter:
    """Write one shard: `add(ids)` per document, then `close()` (or use it as a context manager).

    The shard is built in a hidden temporary directory beside `path` and renamed into place on close;
    an exception inside the `with` block removes the temporary directory and leaves `path` untouched.
    """

    def __init__(self, path: str | os.PathLike, *, vocab_size: int, eos_id: int, domain: str | None = None,
                 lang: str | None = None, tokenizer: str = "", overwrite: bool = False):
        self.path = Path(path)
        if self.path.exists() and not overwrite:
            raise ShardError(f"{self.path}: already exists (pass overwrite=True to replace it)")
        if not 0 <= eos_id < vocab_size:
            raise ShardError(f"{self.path}: eos_id {eos_id} is outside the vocabulary 0 .. {vocab_size - 1}")
        self.dtype = token_dtype(vocab_size)
        self.vocab_size, self.eos_id, self.domain, self.lang, self.tokenizer = vocab_size, eos_id, domain, lang, tokenizer
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = self.path.parent / f".{self.path.name}.tmp-{uuid.uuid4().hex[:8]}"
        self._tmp.mkdir()
        self._tokens = open(self._tmp / TOKENS_FILE, "wb")
        self._hash = hashlib.sha256()
        self._offsets = [0]
        self._empty = 0
        self.header: ShardHeader | None = None

    @property
    def n_tokens(self) -> int:
        return self._offsets[-1]

    def add(self, ids: Sequence[int] | np.ndarray) -> None:
        """Append one document's token ids (an empty document is counted and left out)."""
        if self.header is not None:
            raise ShardError(f"{self.path}: add() after close()")
        arr = np.asarray(ids, dtype=np.int64)
        if arr.ndim != 1:
            raise ShardError(f"{self.path}: a document must be a 1-D sequence of ids, got shape {arr.shape}")
        if arr.size == 0:
            self._empty += 1
            return
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi >= self.vocab_size:
            bad = lo if lo < 0 else hi
            raise ShardError(f"{self.path}: document {len(self._offsets) - 1} has token id {bad}, outside the "
                             f"vocabulary 0 .. {self.vocab_size - 1}")
        data = arr.astype(self.dtype).tobytes()
        self._tokens.write(data)
        self._hash.update(data)
        self._offsets.append(self._offsets[-1] + arr.size)

    def close(self) -> ShardHeader:
        """Finish the files, write the header and move the shard into place. -> its header."""
        if self.header is not None:
            return self.header
        self._tokens.close()
        offsets = np.asarray(self._offsets, dtype="<u8").tobytes()
        (self._tmp / OFFSETS_FILE).write_bytes(offsets)
        header = ShardHeader(vocab_size=self.vocab_size, eos_id=self.eos_id, dtype=self.dtype.name,
                             n_tokens=self.n_tokens, n_docs=len(self._offsets) - 1,
                             tokens_sha256=self._hash.hexdigest(), offsets_sha256=hashlib.sha256(offsets).hexdigest(),
                             domain=self.domain, lang=self.lang, tokenizer=self.tokenizer, n_empty_skipped=self._empty)
        (self._tmp / HEADER_FILE).write_text(json.dumps(header.to_json(), indent=1) + "\n")
        fsync_tree(self._tmp)
        replace_directory(self._tmp, self.path)
        self.header = header
        return header

    def abort(self) -> None:
        self._tokens.close()
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> "ShardWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def write_shard(path: str | os.PathLike, documents: Iterable, tokenizer, *, domain: str | None = None,
                lang: str | None = None, overwrite: bool = False, batch_docs: int = 256,
                progress: bool = False) -> ShardHeader:
    """Tokenize `documents` (openafm Documents or strings) with `tokenizer` and write them as one shard.

    `tokenizer` is an `openafm.tokenizer.Tokenizer` (e.g. `openafm.load(...).tokenizer`); it must have an
    EOS token. A Document's domain / language must agree with `domain` / `lang` where those are given.
    """
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ShardError(f"{path}: the tokenizer {tokenizer!r} has no EOS token; shards need one between documents")

    def text_of(doc) -> str:
        if isinstance(doc, str):
            return doc
        if isinstance(doc, Document):
            if domain is not None and doc.domain != domain:
                raise ShardError(f"{path}: document {doc.id!r} has domain {doc.domain!r}, the shard is {domain!r}")
            if lang is not None and doc.lang != lang:
                raise ShardError(f"{path}: document {doc.id!r} has lang {doc.lang!r}, the shard is {lang!r}")
            return doc.text
        raise ShardError(f"{path}: a document must be an openafm Document or a str, got {type(doc).__name__}")

    bar = _progress(progress, f"tokenize {Path(path).name}")
    with ShardWriter(path, vocab_size=tokenizer.vocab_size, eos_id=eos, domain=domain, lang=lang,
                     tokenizer=repr(tokenizer), overwrite=overwrite) as writer:
        chunk: list[str] = []
        for doc in documents:
            chunk.append(text_of(doc))
            if len(chunk) == batch_docs:
                _write_chunk(writer, tokenizer, chunk, bar)
                chunk = []
        _write_chunk(writer, tokenizer, chunk, bar)
    if bar is not None:
        bar.close()
    return writer.header


def _write_chunk(writer: ShardWriter, tokenizer, texts: list[str], bar) -> None:
    if not texts:
        return
    for ids in tokenizer.encode_batch(texts):
        writer.add(ids)
    if bar is not None:
        bar.update(len(texts))


def _progress(enabled: bool, desc: str):
    if not enabled:
        return None
    return tqdm(desc=desc, unit="doc")


class TokenShard:
    """A shard opened for reading: `tokens` and `offsets` are read-only numpy memmaps."""

    def __init__(self, path: Path, header: ShardHeader, tokens: np.ndarray, offsets: np.ndarray):
        self.path, self.header, self.tokens, self.offsets = path, header, tokens, offsets

    @classmethod
    def open(cls, path: str | os.PathLike, verify: Verify = Verify.FULL) -> "TokenShard":
        path = Path(path)
        if not isinstance(verify, Verify):
            raise ShardError(f"verify must be a Verify ({', '.join(v.name for v in Verify)}), got {verify!r}")
        header_path = path / HEADER_FILE
        if not header_path.is_file():
            raise ShardError(f"{header_path}: missing (not a token shard directory)")
        try:
            header = ShardHeader.from_json(json.loads(header_path.read_text()), header_path)
        except json.JSONDecodeError as e:
            raise ShardError(f"{header_path}: not valid JSON ({e})") from None
        dtype = np.dtype(header.dtype).newbyteorder("<")
        tokens = _memmap(path / TOKENS_FILE, dtype, header.n_tokens, f"{header.n_tokens} tokens")
        offsets = _memmap(path / OFFSETS_FILE, np.dtype("<u8"), header.n_docs + 1, f"{header.n_docs} documents + 1")
        if offsets[0] != 0 or offsets[-1] != header.n_tokens or bool((np.diff(offsets.astype(np.int64)) <= 0).any()):
            raise ShardError(f"{path / OFFSETS_FILE}: offsets must rise strictly from 0 to n_tokens "
                             f"{header.n_tokens}; got first {int(offsets[0])}, last {int(offsets[-1])}")
        if verify is Verify.FULL:
            _check_sha(path / TOKENS_FILE, tokens, header.tokens_sha256)
            _check_sha(path / OFFSETS_FILE, offsets, header.offsets_sha256)
            for start in range(0, header.n_tokens, _CHUNK):
                hi = int(tokens[start:start + _CHUNK].max())
                if hi >= header.vocab_size:
                    raise ShardError(f"{path / TOKENS_FILE}: token id {hi} near index {start} is >= vocab_size "
                                     f"{header.vocab_size}")
        return cls(path, header, tokens, offsets)

    def __len__(self) -> int:
        return self.header.n_docs

    def __getitem__(self, i: int) -> np.ndarray:
        """Document i's token ids (a view into the memmap)."""
        if not -len(self) <= i < len(self):
            raise IndexError(f"{self.path}: document {i} out of range for {len(self)} documents")
        i %= len(self)
        return self.tokens[int(self.offsets[i]):int(self.offsets[i + 1])]

    def doc_lengths(self) -> np.ndarray:
        """[n_docs] int64 token counts."""
        return np.diff(self.offsets.astype(np.int64))

    def __repr__(self) -> str:
        h = self.header
        return (f"TokenShard({str(self.path)!r}, {h.n_docs} docs, {h.n_tokens} tokens, {h.dtype}, "
                f"domain={h.domain!r}, lang={h.lang!r})")


def _memmap(path: Path, dtype: np.dtype, count: int, what: str) -> np.ndarray:
    if not path.is_file():
        raise ShardError(f"{path}: missing")
    size, expected = path.stat().st_size, count * dtype.itemsize
    if size != expected:
        raise ShardError(f"{path}: {size} bytes, but the header says {what} x {dtype.itemsize} bytes = {expected} "
                         f"({'truncated' if size < expected else 'trailing data'})")
    if count == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", shape=(count,))


def _check_sha(path: Path, arr: np.ndarray, expected: str) -> None:
    h = hashlib.sha256()
    for start in range(0, arr.size, _CHUNK):
        h.update(np.ascontiguousarray(arr[start:start + _CHUNK]).tobytes())
    if h.hexdigest() != expected:
        raise ShardError(f"{path}: sha256 {h.hexdigest()} does not match the header's {expected} (corrupt file)")
