"""The user's own data: JSONL, Parquet and WARC files read into Documents, skips counted, damage named."""

import gzip
import json
from collections import Counter
from io import BytesIO
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from openafm.data.pipeline import inputs
from openafm.data.pipeline.inputs import InputError, InputFormat, InputSpec, input_files, read_input_file

HTML = "<html><body><h1>Ünïcode</h1><p>A page about package management.</p></body></html>"
LATIN = "Café crème, déjà vu: a plain-text page in Latin-1."


def read_all(path: Path, spec: InputSpec) -> tuple[list, Counter]:
    skipped = Counter()
    return list(read_input_file(path, spec, skipped)), skipped


def read_until_error(path: Path, spec: InputSpec) -> tuple[list, InputError]:
    docs = []
    with pytest.raises(InputError) as e:
        for doc in read_input_file(path, spec, Counter()):
            docs.append(doc)    # noqa: PERF402 (the documents yielded before the error are the point)
    return docs, e.value


# --- WARC -----------------------------------------------------------------------------------------------------

def http(content_type: str) -> StatusAndHeaders:
    return StatusAndHeaders("200 OK", [("Content-Type", content_type)], protocol="HTTP/1.1")


def response(writer: WARCWriter, uri: str, body: bytes, content_type: str):
    return writer.create_warc_record(uri, "response", payload=BytesIO(body), http_headers=http(content_type))


def write_warc(path: Path, *, gzip_records: bool) -> dict[str, str]:
    """A small crawl: warcinfo, a request, a PNG, an HTML page, a Latin-1 text page, an empty page, a text resource.
    Returns the record ids of the documents by what they are."""
    with open(path, "wb") as f:
        w = WARCWriter(f, gzip=gzip_records)
        request = w.create_warc_record("http://example.com/", "request", payload=BytesIO(b""),
                                       http_headers=StatusAndHeaders("GET / HTTP/1.1", [("Host", "example.com")],
                                                                     is_http_request=True))
        records = {
            "warcinfo": w.create_warcinfo_record(path.name, {"software": "test"}),
            "request": request,
            "png": response(w, "http://example.com/logo.png", b"\x89PNG\r\n\x1a\n" + bytes(64), "image/png"),
            "html": response(w, "http://example.com/", HTML.encode(), "text/html; charset=utf-8"),
            "latin": response(w, "http://example.com/cafe.txt", LATIN.encode("latin-1"),
                              "text/plain; charset=ISO-8859-1"),
            "empty": response(w, "http://example.com/empty", b"  \n", "text/html"),
            "resource": w.create_warc_record("file:///notes.txt", "resource", payload=BytesIO(b"Plain notes."),
                                             warc_content_type="text/plain"),
        }
        for record in records.values():
            w.write_record(record)
    return {k: r.rec_headers.get_header("WARC-Record-ID").strip("<>") for k, r in records.items()}


@pytest.mark.parametrize("name, gzip_records", [("crawl.warc.gz", True), ("crawl.warc", False)])
def test_warc_documents_and_skips(tmp_path, name, gzip_records):
    path = tmp_path / name
    ids = write_warc(path, gzip_records=gzip_records)
    assert (path.read_bytes()[:2] == b"\x1f\x8b") == gzip_records
    docs, skipped = read_all(path, InputSpec(glob=str(tmp_path / "*.warc*")))
    assert [(d.id, d.text, d.meta["format"], d.meta["url"]) for d in docs] == [
        (ids["html"], HTML, "html", "http://example.com/"),
        (ids["latin"], LATIN, "text", "http://example.com/cafe.txt"),
        (ids["resource"], "Plain notes.", "text", "file:///notes.txt"),
    ]
    assert all(d.id.startswith("urn:uuid:") for d in docs)
    assert skipped == Counter({"warc-warcinfo": 1, "warc-request": 1, "warc-non-text": 1, "empty-text": 1})
    d = docs[0]
    assert (d.source, d.licence, d.domain, d.lang) == ("input-warc", "unknown (user data)", "general", None)
    assert d.meta["path"] == str(path) and d.meta["warc_date"].startswith("20")


def write_pages(path: Path, n: int, *, gzip_records: bool) -> list[int]:
    """n HTML responses (one gzip member each, if gzipped); returns each record's byte offset and the file's end."""
    offsets = []
    with open(path, "wb") as f:
        w = WARCWriter(f, gzip=gzip_records)
        for i in range(n):
            offsets.append(f.tell())
            body = f"<html><body><p>Page {i}: {'words ' * 200}</p></body></html>".encode()
            w.write_record(response(w, f"http://example.com/{i}", body, "text/html"))
        offsets.append(f.tell())
    return offsets


@pytest.mark.parametrize("suffix, where", [(".warc.gz", "header"), (".warc.gz", "body"), (".warc.gz", "trailer"),
                                           (".warc", "header"), (".warc", "body")])
def test_warc_truncated_names_file_after_yielding_what_came_before(tmp_path, suffix, where):
    full, cut = tmp_path / f"full{suffix}", tmp_path / f"cut{suffix}"
    offsets = write_pages(full, 4, gzip_records=suffix.endswith(".gz"))
    start, end = offsets[2], offsets[3]
    # header: inside the WARC headers (WARC-Type, for .warc); trailer: the gzip member's last bytes (CRC and size)
    at = {"header": start + 20, "body": (start + end) // 2, "trailer": end - 6}[where]
    cut.write_bytes(full.read_bytes()[:at])
    spec = InputSpec(glob=str(cut))
    docs, error = read_until_error(cut, spec)
    assert [d.meta["url"] for d in docs] == ["http://example.com/0", "http://example.com/1"]
    assert str(cut) in str(error) and "offset" in str(error)
    assert len(read_all(full, spec)[0]) == 4


@pytest.mark.parametrize("change", [-1, +5])     # +1 to +3 only take in blank lines that end the block
def test_warc_wrong_content_length(tmp_path, change):
    path = tmp_path / "bad.warc"
    offsets = write_pages(path, 3, gzip_records=False)
    data = path.read_bytes()
    header = data.index(b"Content-Length: ", offsets[1]) + len(b"Content-Length: ")
    digits = data[header:data.index(b"\r\n", header)]
    path.write_bytes(data[:header] + str(int(digits) + change).encode() + data[header + len(digits):])
    docs, error = read_until_error(path, InputSpec(glob=str(path)))
    assert [d.meta["url"] for d in docs] == ["http://example.com/0"]
    assert str(path) in str(error) and f"byte offset {offsets[1]}" in str(error)


def test_not_a_warc(tmp_path):
    junk = tmp_path / "junk.warc.gz"
    junk.write_bytes(b"this is not an archive\n" * 10)
    docs, error = read_until_error(junk, InputSpec(glob=str(junk)))
    assert docs == [] and str(junk) in str(error) and "byte offset 0" in str(error)


# --- JSONL ----------------------------------------------------------------------------------------------------

ROWS = [{"text": "First document.", "id": "a"}, None, {"text": "   ", "id": "b"}, {"text": None, "id": "c"},
        {"text": "Second document.", "id": 7}]


def jsonl(rows) -> str:
    return "".join("\n" if r is None else json.dumps(r) + "\n" for r in rows)


@pytest.mark.parametrize("name", ["data.jsonl", "data.jsonl.gz", "data.json"])
def test_jsonl_documents(tmp_path, name):
    path = tmp_path / name
    data = jsonl(ROWS).encode()
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    docs, skipped = read_all(path, InputSpec(glob=str(tmp_path / "data.*"), domain="code"))
    assert [(d.id, d.text) for d in docs] == [(f"{name}:1", "First document."), (f"{name}:5", "Second document.")]
    assert skipped == Counter({"empty-text": 1, "null-text": 1})
    d = docs[0]
    assert (d.source, d.licence, d.domain, d.lang, d.meta) == (
        "input-jsonl", "unknown (user data)", "code", None, {"path": str(path), "format": "text"})
    by_id, _ = read_all(path, InputSpec(glob=str(path), id_field="id"))
    assert [d.id for d in by_id] == ["a", "7"]


def test_ids_unique_across_folders_of_a_recursive_glob(tmp_path):
    for folder in ("a", "b/c"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "part-0.jsonl").write_text(jsonl([{"text": f"from {folder}"}]))
    spec = InputSpec(glob=str(tmp_path / "**" / "*.jsonl"))
    files = input_files(spec)
    assert files == [tmp_path / "a" / "part-0.jsonl", tmp_path / "b" / "c" / "part-0.jsonl"]
    ids = [d.id for path in files for d in read_input_file(path, spec, Counter())]
    assert ids == ["a/part-0.jsonl:1", "b/c/part-0.jsonl:1"]


@pytest.mark.parametrize("line, says", [
    ("[1, 2]", ["expected a JSON object", "list"]),
    ('{"body": "x"}', ["no field 'text'", "['body']"]),
    ('{"text": 3, "n": 1}', ["field 'text' is a int, not a str", "['n', 'text']"]),
    ('{"text": "x"', ["not valid JSON"]),
])
def test_jsonl_bad_line_names_path_line_and_field(tmp_path, line, says):
    path = tmp_path / "bad.jsonl"
    path.write_text(jsonl([{"text": "good"}]) + line + "\n")
    docs, error = read_until_error(path, InputSpec(glob=str(path)))
    assert [d.text for d in docs] == ["good"]
    assert f"{path}:2" in str(error)
    for part in says:
        assert part in str(error)


def test_jsonl_missing_id_and_truncated_gzip(tmp_path):
    path = tmp_path / "ids.jsonl"
    path.write_text(jsonl([{"text": "x", "id": 1}, {"text": "y"}]))
    _, error = read_until_error(path, InputSpec(glob=str(path), id_field="id"))
    assert f"{path}:2" in str(error) and "no field 'id'" in str(error)
    gz = tmp_path / "big.jsonl.gz"
    gz.write_bytes(gzip.compress(jsonl([{"text": f"line {i} " * 50} for i in range(200)]).encode())[:-40])
    docs, error = read_until_error(gz, InputSpec(glob=str(gz)))
    assert 0 < len(docs) < 200 and str(gz) in str(error) and "gzip" in str(error)


def test_jsonl_byte_order_mark_and_not_utf8(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + jsonl([{"text": "after a BOM"}]).encode() + b'{"text": "caf\xe9"}\n')
    docs, error = read_until_error(path, InputSpec(glob=str(path)))
    assert [d.text for d in docs] == ["after a BOM"]
    assert f"{path}:2: not UTF-8" in str(error)


# --- Parquet --------------------------------------------------------------------------------------------------

def test_parquet_documents_across_batches(tmp_path, monkeypatch):
    monkeypatch.setattr(inputs, "PARQUET_BATCH_ROWS", 2)
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"body": ["zero", None, "", "  ", "four", "five"], "doc_id": [10, 11, 12, 13, 14, 15],
                             "other": [1.0] * 6}), path)
    spec = InputSpec(glob=str(tmp_path / "*.parquet"), text_field="body")
    docs, skipped = read_all(path, spec)
    assert [(d.id, d.text) for d in docs] == [("rows.parquet:0", "zero"), ("rows.parquet:4", "four"),
                                             ("rows.parquet:5", "five")]
    assert skipped == Counter({"null-text": 1, "empty-text": 2})
    assert (docs[0].source, docs[0].meta) == ("input-parquet", {"path": str(path), "format": "text"})
    by_id, _ = read_all(path, InputSpec(glob=str(path), text_field="body", id_field="doc_id"))
    assert [d.id for d in by_id] == ["10", "14", "15"]


def test_parquet_bad_columns(tmp_path):
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"body": ["x"], "n": [1]}), path)
    _, error = read_until_error(path, InputSpec(glob=str(path)))
    assert str(path) in str(error) and "'text'" in str(error) and "['body', 'n']" in str(error)
    _, error = read_until_error(path, InputSpec(glob=str(path), text_field="n"))
    assert "'n'" in str(error) and "not strings" in str(error)
    ids = tmp_path / "ids.parquet"
    pq.write_table(pa.table({"text": ["a", "b"], "id": ["x", None]}), ids)
    docs, error = read_until_error(ids, InputSpec(glob=str(ids), id_field="id"))
    assert [d.id for d in docs] == ["x"] and f"{ids}: row 1: id column 'id' is null" in str(error)
    fake = tmp_path / "fake.parquet"
    fake.write_text("not parquet")
    assert str(fake) in str(read_until_error(fake, InputSpec(glob=str(fake)))[1])


# --- files and the spec ---------------------------------------------------------------------------------------

def test_input_files_sorted_formats_and_errors(tmp_path):
    for name in ("b.jsonl", "a.parquet", "c.warc.gz", "d.JSONL"):
        (tmp_path / name).write_text("")
    (tmp_path / "sub.jsonl").mkdir()
    assert input_files(InputSpec(glob=str(tmp_path / "*"))) == [tmp_path / n for n in
                                                               ("a.parquet", "b.jsonl", "c.warc.gz", "d.JSONL")]
    formats = [inputs.file_format(p, InputSpec(glob="x")) for p in input_files(InputSpec(glob=str(tmp_path / "*")))]
    assert formats == [InputFormat.PARQUET, InputFormat.JSONL, InputFormat.WARC, InputFormat.JSONL]
    with pytest.raises(InputError, match=r"no files match the input glob .*nothing"):
        input_files(InputSpec(glob=str(tmp_path / "nothing*.jsonl")))
    (tmp_path / "notes.txt").write_text(jsonl([{"text": "as JSONL"}]))
    with pytest.raises(InputError, match=r"notes\.txt: cannot tell the input format.*\.warc\.gz"):
        input_files(InputSpec(glob=str(tmp_path / "*")))
    forced = InputSpec(glob=str(tmp_path / "notes.txt"), format="jsonl")
    assert forced.format is InputFormat.JSONL
    assert [d.text for d in read_all(tmp_path / "notes.txt", forced)[0]] == ["as JSONL"]


@pytest.mark.parametrize("kwargs, says", [
    ({"glob": ""}, "''"), ({"glob": "x", "text_field": ""}, "text_field ''"), ({"glob": "x", "id_field": ""}, "''"),
    ({"glob": "x", "domain": "news"}, "'news' is not one of"), ({"glob": "x", "format": "csv"}, "'csv'"),
])
def test_bad_spec_values(kwargs, says):
    with pytest.raises(ValueError, match=says):
        InputSpec(**kwargs)
