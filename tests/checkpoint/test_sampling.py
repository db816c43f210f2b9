"""A model's recommended sampling, read from where its makers put it: generation_config.json, a GGUF's
general.sampling.* keys (written here as llama.cpp's converter writes them), a packaged model's card or a bundle's
sidecar; unsupported settings are listed, bad values raise naming the file, key and value."""

from __future__ import annotations

import json

import pytest
from families import make, save_gguf, save_hf

import openafm
from openafm.checkpoint.load import load_model
from openafm.checkpoint.bundled import sidecar
from openafm.checkpoint.packaged import BUNDLED, DEFAULT_MODEL, RAW_SAMPLING
from openafm.checkpoint.sampling import RecommendedSampling, from_generation_config, from_gguf_metadata
from openafm.errors import CheckpointError


def write_config(folder, **fields):
    (folder / "generation_config.json").write_text(json.dumps({"bos_token_id": 1, **fields}))
    return folder


def test_generation_config_sampling_fields_when_do_sample(tmp_path):
    got = from_generation_config(write_config(tmp_path, do_sample=True, temperature=0.6, top_p=0.95, top_k=20,
                                              repetition_penalty=1.1))
    assert got.settings() == {"temperature": 0.6, "top_p": 0.95, "top_k": 20}
    assert got.unused == ("repetition_penalty",) and got.source.endswith("generation_config.json")


@pytest.mark.parametrize("fields, settings", [
    ({"do_sample": False, "temperature": 0.6}, None),                   # greedy: the numbers are not used
    ({"temperature": 0.6}, None),                                       # do_sample absent: transformers' greedy
    ({"do_sample": True, "top_k": 0, "top_p": 1.0}, {"temperature": 1.0}),      # HF's "no cut" values
    ({"do_sample": True, "temperature": 0.0}, None),
])
def test_generation_config_without_sampling_recommends_none_or_no_cut(tmp_path, fields, settings):
    got = from_generation_config(write_config(tmp_path, **fields))
    assert (got.settings() if got is not None else None) == settings


def test_a_bad_value_names_the_file_key_and_value(tmp_path):
    with pytest.raises(CheckpointError, match=r"generation_config.json: top_p=1.5 is invalid"):
        from_generation_config(write_config(tmp_path, do_sample=True, top_p=1.5))
    (tmp_path / "generation_config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="not readable JSON"):
        from_generation_config(tmp_path)


def test_a_hugging_face_directory_loads_with_its_recommendation(tmp_path):
    folder = write_config(save_hf(make("qwen2"), tmp_path / "qwen2"), do_sample=True, temperature=0.7, top_p=0.8)
    assert load_model(folder).sampling.settings() == {"temperature": 0.7, "top_p": 0.8}


def test_a_gguf_file_loads_with_its_general_sampling_keys(tmp_path):
    def sampling(writer):
        writer.add_sampling_temp(0.6)
        writer.add_sampling_top_k(20)
        writer.add_sampling_min_p(0.05)
        writer.add_sampling_penalty_repeat(1.1)
    path = save_gguf(make("llama"), "llama", tmp_path / "tiny.gguf", extra=sampling)
    for weights in ("native", "float32"):
        got = load_model(path, weights=weights).sampling
        assert got.settings() == pytest.approx({"temperature": 0.6, "top_k": 20, "min_p": 0.05})
        assert isinstance(got.top_k, int) and got.unused == ("general.sampling.penalty_repeat",)
    assert load_model(save_gguf(make("llama"), "llama", tmp_path / "plain.gguf")).sampling is None


def test_gguf_metadata_without_sampling_keys_recommends_nothing():
    assert from_gguf_metadata({"general.name": "x"}, "x.gguf") is None


def test_recommended_sampling_checks_its_values():
    with pytest.raises(CheckpointError, match="temperature=0 is invalid"):
        RecommendedSampling(temperature=0)
    with pytest.raises(CheckpointError, match="top_k=2.5 is invalid"):
        RecommendedSampling(temperature=1.0, top_k=2.5)


@pytest.mark.real_model
def test_the_packaged_models_recommend_sampling():
    assert openafm.load("smollm2-135m-instruct").sampling == RAW_SAMPLING
    assert RAW_SAMPLING.settings() == {"temperature": 0.2, "top_p": 0.9}
    chosen = sidecar(BUNDLED[DEFAULT_MODEL])["sampling"]                # the default model's own, from its sidecar
    assert openafm.load().sampling.settings() == chosen["settings"]
    assert chosen["heldout"]["instructions"]["n"] > 0
