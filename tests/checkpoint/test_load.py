"""checkpoint/load.py: the registry of model sources, its precedence, and the tokenizer loader."""

import pytest
import torch
from tiny import make_tiny

from openafm.checkpoint.load import SOURCES, LoadedModel, SourceKind, load_model, load_tokenizer
from openafm.checkpoint.native import save_checkpoint
from openafm.checkpoint.packaged import DEFAULT_MODEL, gguf_tokenizer
from openafm.errors import CheckpointError, UnknownModelError


def test_every_source_kind_has_one_source_and_names_and_presets_come_first():
    kinds = [s.kind for s in SOURCES]
    assert sorted(kinds, key=lambda k: k.value) == sorted(SourceKind, key=lambda k: k.value)
    assert kinds[:2] == [SourceKind.PACKAGED, SourceKind.PRESET]


def test_a_directory_named_like_a_preset_does_not_shadow_it(tmp_path, monkeypatch):
    other = make_tiny("smollm2-tiny", seed=5)
    save_checkpoint(tmp_path / "afm-ondevice-tiny", other.config, other.state_dict())
    monkeypatch.chdir(tmp_path)
    loaded = load_model("afm-ondevice-tiny", seed=1)
    assert loaded.source == "preset (random init, seed 1)"
    assert loaded.model.config == make_tiny("afm-ondevice-tiny").config
    from_dir = load_model("./afm-ondevice-tiny")
    assert from_dir.source.startswith("openafm checkpoint") and from_dir.model.config == other.config


def test_a_loaded_model_is_in_eval_mode_without_gradients_in_the_asked_dtype():
    loaded = load_model("afm-server-dense-tiny", dtype="bf16")
    assert isinstance(loaded, LoadedModel) and not loaded.model.training
    assert all(not p.requires_grad and p.dtype == torch.bfloat16 for p in loaded.model.parameters())
    assert loaded.context_window == loaded.model.kv_plan.max_seq_len == 256


def test_unrecognised_inputs_say_why(tmp_path):
    (tmp_path / "notes.txt").write_text("hi")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="notes.txt: not a checkpoint"):
        load_model(tmp_path / "notes.txt")
    with pytest.raises(CheckpointError, match="empty: not a checkpoint directory"):
        load_model(tmp_path / "empty")
    with pytest.raises(UnknownModelError, match="afm-ondevice-tiny"):
        load_model(tmp_path / "missing")


def test_packed_kernel_is_refused_for_sources_that_are_not_compressed():
    with pytest.raises(ValueError, match="packed_kernel='torch' applies to compressed checkpoint directories only"):
        load_model("afm-ondevice-tiny", packed_kernel="torch")


@pytest.mark.real_model
def test_load_tokenizer_takes_default_a_packaged_name_a_gguf_file_or_a_directory(tmp_path, gguf_path):
    default = load_tokenizer("default")
    text = "Tokenizers split text 12345 times."
    ids = default.encode(text)
    assert load_tokenizer(DEFAULT_MODEL).encode(text) == ids
    assert load_tokenizer(gguf_path).encode(text) == ids == gguf_tokenizer(gguf_path).encode(text)
    default.save(tmp_path / "tok")
    assert load_tokenizer(tmp_path / "tok").encode(text) == ids


def test_load_tokenizer_names_a_bad_spec_and_what_it_accepts(tmp_path):
    with pytest.raises(CheckpointError, match=r"tokenizer 'nope': expected 'default', a packaged model "
                                              r"\(openafm-135m, openafm-135m-sft, smollm2-135m-instruct\), a .gguf "
                                              r"file or a directory"):
        load_tokenizer("nope")
    (tmp_path / "d").mkdir()
    with pytest.raises(CheckpointError, match="tokenizer.json"):
        load_tokenizer(tmp_path / "d")
