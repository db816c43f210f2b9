"""JSONL chat examples: each line a {prompt, response} object, kept with where it came from; bad files named."""

from __future__ import annotations

import pytest

from openafm.data.chat import ChatExample, read_chat_jsonl
from openafm.io import JsonlError


def test_lines_become_examples_that_know_their_line(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"prompt": "Hi", "response": "{\\"a\\": 1}"}\n{"response": "yes", "prompt": "Sure?"}\n')
    assert read_chat_jsonl(path) == [ChatExample("Hi", '{"a": 1}', f"{path}:1"), ChatExample("Sure?", "yes", f"{path}:2")]


def test_empty_and_missing_files_are_named(tmp_path):
    (tmp_path / "e.jsonl").write_text("")
    with pytest.raises(JsonlError, match=r"e.jsonl: no examples \(the file is empty\)"):
        read_chat_jsonl(tmp_path / "e.jsonl")
    with pytest.raises(JsonlError, match="nope.jsonl: no such file"):
        read_chat_jsonl(tmp_path / "nope.jsonl")
    (tmp_path / "s.jsonl").write_text('{"prompt": "", "response": "x"}\n')
    with pytest.raises(JsonlError, match=r"s.jsonl:1: 'prompt' must be a non-empty string, got ''"):
        read_chat_jsonl(tmp_path / "s.jsonl")


def test_an_optional_system_turn_is_read_and_checked(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text('{"system": "Be brief.", "prompt": "Hi", "response": "Hello", "meta": {"id": 1}}\n')
    ex, = read_chat_jsonl(path)
    assert ex == ChatExample("Hi", "Hello", f"{path}:1", system="Be brief.") and ex.meta == {"id": 1}
    assert ex.to_dict() == {"prompt": "Hi", "response": "Hello", "system": "Be brief.", "meta": {"id": 1}}
    path.write_text('{"prompt": "Hi", "response": "Hello"}\n{"system": 3, "prompt": "Hi", "response": "Hello"}\n')
    with pytest.raises(JsonlError, match=r"s.jsonl:2: 'system' must be a non-empty string, got 3"):
        read_chat_jsonl(path)
