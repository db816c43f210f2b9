"""Shared fixtures: the packaged SmolLM2-135M-Instruct GGUF, its parsed header, its tokenizer, transformers'
tokenizer for the same file (the reference), and a tiny checkpoint over that tokenizer. Session-scoped: each is
built once (read, never written, by the tests that use it). And `tower`: a tiny random vision tower put on the
default model for one test (fm sessions and the server read images through it)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from openafm.checkpoint.gguf import GGUFFile, read_gguf
from openafm.checkpoint.native import save_checkpoint
from openafm.checkpoint.packaged import DEFAULT_MODEL, default_gguf_path
from openafm.fm import model as fm_model
from openafm.models.image_views import ViewSizes
from openafm.models.vision import vision_tiny
from openafm.models.vl_adapter import AdapterConfig
from openafm.models.vlm import VisionTower, VisionTowerConfig
from openafm.tokenizer import Tokenizer
from tiny import make_tiny


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


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory, tokenizer: Tokenizer) -> str:
    """A tiny random SmolLM2-shaped checkpoint over the real vocabulary, saved with the tokenizer (a trunk that
    `openafm.load` and the reward-model tools load by path)."""
    path = tmp_path_factory.mktemp("tiny-checkpoint") / "base"
    model = make_tiny("smollm2-tiny", vocab_size=tokenizer.vocab_size, max_seq_len=512)
    save_checkpoint(path, model.config, model.state_dict(), tokenizer)
    return str(path)


@pytest.fixture()
def tower(monkeypatch) -> VisionTower:
    """A tiny random vision tower (56-pixel views: 144 tokens balanced, 9 rapid, 720 high) as the default model's,
    for this test only."""
    torch.manual_seed(0)
    t = VisionTower(VisionTowerConfig(vision=vision_tiny(), adapter=AdapterConfig(in_dim=32, out_dim=576, hidden=32),
                                      sizes=ViewSizes(view=56, rapid=28))).eval().requires_grad_(False)
    monkeypatch.setitem(fm_model._TOWERS, DEFAULT_MODEL, t)
    return t
