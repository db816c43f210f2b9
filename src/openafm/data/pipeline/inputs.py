"""The user's own data as Documents: JSONL, Parquet and WARC files matched by a glob, streamed file by file.

    spec = InputSpec(glob="crawl/**/*.warc.gz")                 # format from each file's suffix
    skipped = Counter()
    for path in input_files(spec):                              # sorted; no match raises InputError
        for doc in read_input_file(path, spec, skipped): ...    # skipped["warc-request"], skipped["empty-text"], ...

Every document has ``source`` "input-jsonl" / "input-parquet" / "input-warc", licence "unknown (user data)", the
spec's domain and ``lang`` None (language identification runs later). Ids are stable across runs: the WARC-Record-ID
of a WARC record; ``<file>:<line>`` (from 1) of a JSONL line and ``<file>:<row>`` (from 0) of a Parquet row, where
``<file>`` is the path relative to the glob's fixed leading folders (the file name unless the glob recurses), or the
user's own id when ``id_field`` is given. HTML pages keep ``meta["format"] == "html"`` for the extract stage.

Records that are not documents are counted, never raised: WARC records that are not responses, resources or
conversions (``warc-<type>``), non-text content (``warc-non-text``), null (``null-text``) or empty text
(``empty-text``). Data that is malformed raises InputError naming the file and the line, row or byte offset; the
documents before it have been yielded. warcio ends quietly at a cut-off archive and only prints a warning for a
damaged one, so each record's mandatory headers, its block against its Content-Length, its gzip member's end marker
and the blank lines after it are checked before its document is yielded, and the archive must be read to its last
byte.
"""

from __future__ import annotations

import codecs
import enum
import glob as globbing
import gzip
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pyarrow
import pyarrow.parquet as pq
from warcio.archiveiterator import ArchiveIterator
from warcio.bufferedreaders import ChunkedDataException
from warcio.exceptions import ArchiveLoadFailed
from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import StatusAndHeadersParserException

from openafm.data.document import Document
from openafm.errors import ConfigError
from openafm.io import json_object


class InputFormat(enum.Enum):
    JSONL = "jsonl"
    PARQUET = "parquet"
    WARC = "warc"


class InputError(ValueError):
    """User data that cannot be read; the message names the file (and line / row / record offset) and what is
    wrong."""


LICENCE = "unknown (user data)"
SUFFIXES = {".jsonl": InputFormat.JSONL, ".jsonl.gz": InputFormat.JSONL, ".json": InputFormat.JSONL,
            ".parquet": InputFormat.PARQUET, ".warc": InputFormat.WARC, ".warc.gz": InputFormat.WARC}
WARC_MANDATORY = ("WARC-Type", "WARC-Record-ID", "WARC-Date", "Content-Length")
WARC_DOCUMENT_TYPES = ("response", "resource", "conversion")
WARC_TEXT_TYPES = {"text/html": "html", "application/xhtml+xml": "html", "text/plain": "text"}
PARQUET_BATCH_ROWS = 1024       # rows per record batch: a batch of long documents stays a few MB
GZIP_MAGIC = b"\x1f\x8b"
# what warcio raises on a cut or damaged record: its own errors, and plain ones where a header it needs is missing
# (a record cut before WARC-Target-URI fails on None.startswith)
WARC_ERRORS = (ArchiveLoadFailed, StatusAndHeadersParserException, ChunkedDataException, EOFError, zlib.error,
               AttributeError, TypeError, ValueError)


@dataclass(frozen=True, kw_only=True)
class InputSpec:
    """Which files to read and how: a glob (``**`` recurses), their format, the text and id columns, the domain."""

    glob: str                          # e.g. "crawl/*.warc.gz"; expanded with glob.glob(recursive=True), sorted
    format: InputFormat | None = None  # None: from each file's suffix (SUFFIXES)
    text_field: str = "text"           # JSONL / Parquet: the field or column holding the text
    id_field: str | None = None        # JSONL / Parquet: a field holding a stable id; None: file plus line / row
    domain: str = "general"            # every document's domain, one of Document.DOMAINS

    def __post_init__(self) -> None:
        if not isinstance(self.glob, str) or not self.glob.strip():
            raise ConfigError(f"input glob {self.glob!r} must be a non-empty pattern such as 'data/*.jsonl'")
        if isinstance(self.format, str):
            accepted = [f.value for f in InputFormat]
            if self.format not in accepted:
                raise ConfigError(f"input format {self.format!r} is not one of {accepted} (or None: from the suffix)")
            object.__setattr__(self, "format", InputFormat(self.format))
        elif self.format is not None and not isinstance(self.format, InputFormat):
            raise ConfigError(f"input format {self.format!r} must be an InputFormat or None")
        if not isinstance(self.text_field, str) or not self.text_field:
            raise ConfigError(f"input text_field {self.text_field!r} must be a non-empty field name")
        if self.id_field is not None and (not isinstance(self.id_field, str) or not self.id_field):
            raise ConfigError(f"input id_field {self.id_field!r} must be a non-empty field name or None")
        if self.domain not in Document.DOMAINS:
            raise ConfigError(f"input domain {self.domain!r} is not one of {Document.DOMAINS}")


def input_files(spec: InputSpec) -> list[Path]:
    """The files the glob matches, sorted; raises InputError when none match (naming the glob) or when one has a
    suffix no format is known for (with ``format`` None), before any file is read."""
    paths = sorted(Path(p) for p in globbing.glob(spec.glob, recursive=True) if Path(p).is_file())
    if not paths:
        raise InputError(f"no files match the input glob {spec.glob!r}")
    for path in paths:
        file_format(path, spec)
    return paths


def file_format(path: Path, spec: InputSpec) -> InputFormat:
    """The spec's format, or the one of the file's suffix; an unknown suffix raises InputError naming the file."""
    if spec.format is not None:
        return spec.format
    name = path.name.lower()
    for suffix in sorted(SUFFIXES, key=len, reverse=True):
        if name.endswith(suffix):
            return SUFFIXES[suffix]
    raise InputError(f"{path}: cannot tell the input format from the file name; accepted suffixes are "
                     f"{', '.join(SUFFIXES)} (or give the format)")


def read_input_file(path: Path, spec: InputSpec, skipped: Counter) -> Iterator[Document]:
    """One file's documents in file order. Records that are not documents are counted in skipped[reason];
    malformed data raises InputError naming the path and position, after the documents before it."""
    path = Path(path)
    fmt = file_format(path, spec)
    try:
        if fmt is InputFormat.JSONL:
            yield from _read_jsonl(path, spec, skipped)
        elif fmt is InputFormat.PARQUET:
            yield from _read_parquet(path, spec, skipped)
        else:
            yield from _read_warc(path, spec, skipped)
    except FileNotFoundError:
        raise InputError(f"{path}: no such input file") from None
    except PermissionError as e:
        raise InputError(f"{path}: cannot read the input file ({e.strerror})") from None


def _document(doc_id: str, text: str, path: Path, fmt: InputFormat, spec: InputSpec, **meta: Any) -> Document:
    return Document(id=doc_id, text=text, source=f"input-{fmt.value}", licence=LICENCE, domain=spec.domain,
                    lang=None, meta={"path": str(path), **meta})


def _file_key(path: Path, spec: InputSpec) -> str:
    """The file's part of a line or row id: the path below the glob's leading folders without wildcards, so
    files of the same name in different folders of a recursive glob get different ids (the name otherwise)."""
    fixed = []
    for part in Path(spec.glob).parts[:-1]:
        if any(c in part for c in "*?["):       # a wildcard, as glob sees one
            break
        fixed.append(part)
    try:
        return path.relative_to(Path(*fixed)).as_posix() if fixed else path.as_posix()
    except ValueError:
        return path.name


def _text_or_skip(text: Any, skipped: Counter) -> str | None:
    """The text, or None with the reason counted when it is null or blank."""
    if text is None:
        skipped["null-text"] += 1
        return None
    if not text.strip():
        skipped["empty-text"] += 1
        return None
    return text


# --- JSONL ----------------------------------------------------------------------------------------------------

def _open_maybe_gzip(path: Path) -> IO[bytes]:
    with open(path, "rb") as f:
        compressed = f.read(2) == GZIP_MAGIC
    return gzip.open(path, "rb") if compressed else open(path, "rb")


def _read_jsonl(path: Path, spec: InputSpec, skipped: Counter) -> Iterator[Document]:
    """Each non-blank line one JSON object (gzip-compressed or not)."""
    key, lineno = _file_key(path, spec), 0
    with _open_maybe_gzip(path) as f:
        try:
            for lineno, raw in enumerate(f, start=1):
                if lineno == 1:
                    raw = raw.removeprefix(codecs.BOM_UTF8)
                if not raw.strip():
                    continue
                where = f"{path}:{lineno}"
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise InputError(f"{where}: not UTF-8 ({e.reason} at column {e.start + 1})") from None
                row = json_object(line, where, InputError)
                text = _text_or_skip(_field(row, spec.text_field, where, str), skipped)
                if text is None:
                    continue
                doc_id = _field(row, spec.id_field, where) if spec.id_field else f"{key}:{lineno}"
                yield _document(str(doc_id), text, path, InputFormat.JSONL, spec, format="text")
        except (EOFError, zlib.error, gzip.BadGzipFile) as e:
            raise InputError(f"{path}: truncated or corrupt gzip file after line {lineno} ({e})") from None


def _field(row: dict[str, Any], name: str, where: str, kind: type | None = None) -> Any:
    """row[name]; a missing field (or, with ``kind``, a value that is neither None nor a ``kind``) raises."""
    if name not in row:
        raise InputError(f"{where}: no field {name!r} (the object has {sorted(row)})")
    value = row[name]
    if kind is None and value is None:
        raise InputError(f"{where}: field {name!r} is null (an id must be a value)")
    if kind is not None and value is not None and not isinstance(value, kind):
        raise InputError(f"{where}: field {name!r} is a {type(value).__name__}, not a {kind.__name__} "
                         f"(the object has {sorted(row)})")
    return value


# --- Parquet --------------------------------------------------------------------------------------------------

def _parquet_file(path: Path, spec: InputSpec) -> pq.ParquetFile:
    """The opened file, its text column checked to be a string column and its id column to exist."""
    try:
        pf = pq.ParquetFile(path)
    except (pyarrow.ArrowException, OSError) as e:
        raise InputError(f"{path}: not a readable Parquet file ({e})") from None
    schema = pf.schema_arrow
    for name in filter(None, (spec.text_field, spec.id_field)):
        if name not in schema.names:
            raise InputError(f"{path}: no column {name!r} (the file has columns {schema.names})")
    kind = schema.field(spec.text_field).type
    if not (pyarrow.types.is_string(kind) or pyarrow.types.is_large_string(kind)
            or getattr(pyarrow.types, "is_string_view", lambda _: False)(kind)):
        raise InputError(f"{path}: column {spec.text_field!r} holds {kind}, not strings")
    return pf


def _read_parquet(path: Path, spec: InputSpec, skipped: Counter) -> Iterator[Document]:
    """Rows in record batches of PARQUET_BATCH_ROWS, only the text and id columns read."""
    pf = _parquet_file(path, spec)
    columns = list(dict.fromkeys(filter(None, (spec.text_field, spec.id_field))))
    key, start = _file_key(path, spec), 0      # start: the batch's first row, counted from 0
    try:
        for batch in pf.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=columns):
            texts = batch.column(spec.text_field).to_pylist()
            ids = batch.column(spec.id_field).to_pylist() if spec.id_field else None
            for i, text in enumerate(texts):
                if _text_or_skip(text, skipped) is None:
                    continue
                if ids is not None and ids[i] is None:
                    raise InputError(f"{path}: row {start + i}: id column {spec.id_field!r} is null")
                doc_id = str(ids[i]) if ids is not None else f"{key}:{start + i}"
                yield _document(doc_id, text, path, InputFormat.PARQUET, spec, format="text")
            start += len(texts)
    except (pyarrow.ArrowException, OSError) as e:
        raise InputError(f"{path}: corrupt Parquet data at row {start} or after it ({e})") from None


# --- WARC -----------------------------------------------------------------------------------------------------

def _read_warc(path: Path, spec: InputSpec, skipped: Counter) -> Iterator[Document]:
    """Response, resource and conversion records of text/html or text/plain content, plain or gzip per record."""
    offset = 0
    with open(path, "rb") as f:
        records = ArchiveIterator(f)
        try:
            for record in records:
                offset = records.offset         # the record's first byte in the file (compressed, for .gz)
                _check_headers(record, path, offset)
                doc = _warc_document(record, path, spec, skipped)
                _read_to_next_record(records, record, path, offset)
                if doc is not None:
                    yield doc
            end, size = records.offset, path.stat().st_size
        except InputError:
            raise
        except WARC_ERRORS as e:
            message = " ".join(f"{type(e).__name__}: {e}".split())[:200]
            raise InputError(f"{path}: truncated or corrupt WARC record at byte offset {offset} ({message})") from None
    if end < size:
        raise InputError(f"{path}: truncated or corrupt WARC: no complete record from byte offset {end} "
                         f"to the end of the file ({size} bytes)")


def _check_headers(record: ArcWarcRecord, path: Path, offset: int) -> None:
    """A record needs the headers WARC makes mandatory: without them it is damaged (or cut inside its header)."""
    if record.format != "warc":
        raise InputError(f"{path}: the record at byte offset {offset} is an {record.format.upper()} record, "
                         f"not WARC")
    missing = [name for name in WARC_MANDATORY if not record.rec_headers.get_header(name)]
    if missing:
        raise InputError(f"{path}: truncated or corrupt WARC: the record at byte offset {offset} lacks the "
                         f"mandatory header(s) {', '.join(missing)}")


def _read_to_next_record(records: ArchiveIterator, record: ArcWarcRecord, path: Path, offset: int) -> None:
    """Read the rest of the record's block and the blank lines after it, so a damaged record fails before its
    document is yielded: a block shorter than its Content-Length is a cut archive, and warcio counts (and only
    prints) a block not followed by blank lines."""
    while record.raw_stream.read(1 << 16):
        pass
    missing = getattr(record.raw_stream, "limit", 0)
    if missing:
        raise InputError(f"{path}: truncated or corrupt WARC: the record at byte offset {offset} ends "
                         f"{missing} bytes short of its Content-Length")
    records.read_to_end()
    if not getattr(records.reader.decompressor, "eof", True):
        raise InputError(f"{path}: truncated or corrupt WARC: the gzip member of the record at byte offset {offset} "
                         f"ends before its end marker")
    if records.err_count:
        raise InputError(f"{path}: corrupt WARC: the record at byte offset {offset} is not followed by the blank "
                         f"lines that end a block (a wrong Content-Length or damaged data)")


def _warc_document(record: ArcWarcRecord, path: Path, spec: InputSpec, skipped: Counter) -> Document | None:
    """The record as a Document, or None with the reason counted (its type, non-text content, empty text)."""
    if record.rec_type not in WARC_DOCUMENT_TYPES:
        skipped[f"warc-{record.rec_type}"] += 1
        return None
    headers = record.http_headers if record.http_headers is not None else record.rec_headers
    mime, charset = _content_type(headers.get_header("Content-Type") or "")
    if mime not in WARC_TEXT_TYPES:
        skipped["warc-non-text"] += 1
        return None
    body = record.content_stream().read()
    text = _text_or_skip(body.decode(charset, errors="replace"), skipped)
    if text is None:
        return None
    record_id = record.rec_headers.get_header("WARC-Record-ID").strip().strip("<>")
    return _document(record_id, text, path, InputFormat.WARC, spec, format=WARC_TEXT_TYPES[mime],
                     url=record.rec_headers.get_header("WARC-Target-URI"),
                     warc_date=record.rec_headers.get_header("WARC-Date"))


def _content_type(value: str) -> tuple[str, str]:
    """("text/html", "iso-8859-1") from "text/html; charset=ISO-8859-1"; the charset is utf-8 when absent or
    unknown to Python."""
    mime, *params = value.split(";")
    charset = "utf-8"
    for param in params:
        name, _, given = param.partition("=")
        if name.strip().lower() == "charset":
            given = given.strip().strip("'\"")
            try:
                charset = codecs.lookup(given).name
            except LookupError:
                pass
    return mime.strip().lower(), charset
