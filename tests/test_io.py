"""openafm.io: the one atomic write every room uses (files and directories: temporary sibling, fsync, rename), the
JSON Lines readers (strict files, append-only logs with a torn tail) and the YAML reader."""

import json

import pytest

from openafm.errors import ConfigError
from openafm.io import (Blank, JsonlError, atomic_directory, atomic_write, json_object, read_jsonl, read_jsonl_log,
                        read_yaml, write_jsonl, write_text_atomic)


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = write_text_atomic(tmp_path / "sub" / "report.json", "old\n")      # parents are made
    assert path.read_text() == "old\n"

    def half_then_fail(tmp):
        tmp.write_text("half")
        raise RuntimeError("killed mid-write")
    with pytest.raises(RuntimeError, match="killed mid-write"):
        atomic_write(path, half_then_fail)
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in path.parent.iterdir()) == ["report.json"]


def test_the_new_content_replaces_the_old(tmp_path):
    path = write_text_atomic(tmp_path / "a.txt", "one")
    atomic_write(path, lambda tmp: tmp.write_bytes(b"two"))
    assert path.read_text() == "two"


def test_a_directory_appears_whole_or_not_at_all(tmp_path):
    out = tmp_path / "ckpt"
    atomic_directory(out, lambda tmp: (tmp / "a.txt").write_text("one"))
    assert (out / "a.txt").read_text() == "one"

    def half_then_fail(tmp):
        (tmp / "a.txt").write_text("two")
        raise RuntimeError("killed mid-write")
    with pytest.raises(RuntimeError, match="killed mid-write"):
        atomic_directory(out, half_then_fail)
    assert (out / "a.txt").read_text() == "one"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]            # no temporary left behind
    atomic_directory(out, lambda tmp: (tmp / "b.txt").write_text("three"))   # a new directory replaces the old
    assert sorted(p.name for p in out.iterdir()) == ["b.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]


def test_jsonl_round_trip_and_blank_lines(tmp_path):
    path = tmp_path / "rows.jsonl"
    assert write_jsonl(path, [{"a": 1}, {"b": "é"}]) == 2
    assert list(read_jsonl(path)) == [{"a": 1}, {"b": "é"}]
    path.write_text('{"a": 1}\n\n{"b": 2}\n')
    with pytest.raises(JsonlError, match=r"rows.jsonl:2: blank line"):
        list(read_jsonl(path))
    assert list(read_jsonl(path, Blank.SKIP)) == [{"a": 1}, {"b": 2}]


@pytest.mark.parametrize("line, why", [("[1, 2]", "expected a JSON object, got list"), ("{bad", "not valid JSON")])
def test_a_bad_line_raises_the_callers_error_naming_where(line, why):
    class ShardLike(ValueError):
        pass
    with pytest.raises(ShardLike, match=f"f.jsonl:7: {why}"):
        json_object(line, "f.jsonl:7", ShardLike)


def test_a_log_drops_a_torn_last_line_and_can_cut_it(tmp_path):
    path = tmp_path / "metrics.jsonl"
    assert read_jsonl_log(path) == []
    path.write_text(json.dumps({"step": 1}) + "\n" + json.dumps({"step": 2}) + "\n" + '{"step": 3, "lo')
    assert read_jsonl_log(path) == [{"step": 1}, {"step": 2}]
    assert path.read_text().endswith('"lo')                                  # untouched without cut_torn_tail
    assert read_jsonl_log(path, cut_torn_tail=True) == [{"step": 1}, {"step": 2}]
    assert path.read_text() == json.dumps({"step": 1}) + "\n" + json.dumps({"step": 2}) + "\n"
    path.write_text('{"step": 1}\nnot json\n{"step": 3}\n')
    with pytest.raises(JsonlError, match=r"metrics.jsonl:2: .*damaged"):
        read_jsonl_log(path)


def test_read_yaml_names_the_file_and_what_it_is(tmp_path):
    good = tmp_path / "a.yaml"
    good.write_text("steps: 3\n")
    assert read_yaml(good, "config") == {"steps": 3}
    with pytest.raises(ConfigError, match=r"missing.yaml: cannot read the RL config"):
        read_yaml(tmp_path / "missing.yaml", "RL config")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1,\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: not valid YAML"):
        read_yaml(bad, "recipe")
