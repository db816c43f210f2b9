import json

import pytest

from openafm.data.document import Document
from openafm.data.jsonl import read_documents, write_documents
from openafm.io import JsonlError, read_jsonl


def test_round_trip(tmp_path):
    docs = [Document(id="a:1", text="Grüße\nzwei", source="a", licence="x", domain="general", lang="de",
                     meta={"k": 1})]
    assert write_documents(tmp_path / "s.jsonl", docs) == 1
    assert list(read_documents(tmp_path / "s.jsonl")) == docs


@pytest.mark.parametrize("lines, lineno, what", [
    (['{"a": 1}', '{"a": 2', '{"a": 3}'], 2, "not valid JSON"),
    (['{"a": 1}', '', '{"a": 3}'], 2, "blank line"),
    (['{"a": 1}', '{"a": 1}', '[1, 2]'], 3, "expected a JSON object, got list"),
])
def test_bad_line_names_file_and_line(tmp_path, lines, lineno, what):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(JsonlError, match=rf"bad\.jsonl:{lineno}: {what}"):
        list(read_jsonl(path))


def test_not_a_document_names_line(tmp_path):
    ok = Document(id="a", text="t", source="s", licence="l", domain="general").to_json()
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(ok) + "\n" + json.dumps({**ok, "domain": "poetry"}) + "\n")
    with pytest.raises(JsonlError, match=r"d\.jsonl:2: not a Document .*poetry"):
        list(read_documents(path))
