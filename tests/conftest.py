"""Shared fixtures: the packaged SmolLM2-135M-Instruct GGUF, its parsed header, its tokenizer, and
transformers' tokenizer for the same file (the reference). Session-scoped: each is built once."""

from __future__ import annotations

from pathlib import Path

import pytest

from openafm.checkpoint.gguf import GGUFFile, read_gguf
from openafm.checkpoint.packaged import default_gguf_path
from openafm.tokenizer import Tokenizer


@pytest.fixture(scope="session")
def gguf_path() -> Path:
    return default_gguf_path()


@pytest.fixture(scope="session")
def gguf_file(gguf_path: Path) -> GGUFFile:
    return read_gguf(gguf_path)


@pytest.fixture(scope="session")
def tokenizer(gguf_file: GGUFFile) -> Tokenizer:
    return Tokenizer.from_gguf_metadata(gguf_file.metadata)


@pytest.fixture(scope="session")
def hf_tokenizer(gguf_path: Path):
    """transformers' tokenizer built from the same GGUF file (~5 s)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
