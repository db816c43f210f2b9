"""The model openafm ships as its post-trained default (openafm-135m, a rank-32 adapter over the packaged GGUF; and
openafm-135m-sft, its SFT stage alone): each one's files match its sidecar and base, it loads in both weight forms with the adapter folded in, and it answers the
demo's tool question with one call and the result."""

from __future__ import annotations

import asyncio

import pytest
import torch

import openafm
import openafm.fm as fm
from openafm.checkpoint.adapter import read_adapter
from openafm.checkpoint.bundled import file_sha256, sidecar
from openafm.checkpoint.load import load_model
from openafm.checkpoint.packaged import BUNDLED, RAW_MODEL, default_gguf_path
from openafm.commands.demo import TOOL_QUESTION, DemoWeather

pytestmark = pytest.mark.real_model
NAME = "openafm-135m"


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_each_bundle_matches_its_sidecar_and_the_installed_base(name):
    bundle = BUNDLED[name]
    meta = sidecar(bundle)
    assert meta["adapter_sha256"] == file_sha256(bundle.adapter_path)
    assert meta["base_gguf_sha256"] == file_sha256(default_gguf_path()) and meta["base"] == RAW_MODEL
    adapter = read_adapter(bundle.adapter_path)
    assert (adapter.rank, meta["rank"]) == (32, 32) and meta["command"].startswith("openafm pipeline ")


def test_float_and_block_weights_both_carry_the_adapter():
    ids = torch.tensor([openafm.load(RAW_MODEL).encode("The capital of France is")])
    raw = load_model(RAW_MODEL).model(ids)[0, -1]
    folded = load_model(NAME).model(ids)[0, -1]                      # float weights, W += scale * B A
    native = openafm.load(NAME)                                      # Q4_1 blocks, merged and re-quantized
    assert "adapter openafm-135m.safetensors" in native.source
    blocks = native.model(ids)[0, -1]
    moved, noise = (folded - raw).norm(), (blocks - folded).norm()
    assert moved > 0.1 * raw.norm() and noise < moved


def test_the_demo_tool_question_gets_one_call_and_an_answer_from_the_result():
    tool = DemoWeather()
    session = fm.LanguageModelSession(model=fm.SystemLanguageModel(model=NAME), tools=[tool])
    answer = asyncio.run(session.respond(TOOL_QUESTION, options=fm.GenerationOptions(
        sampling=fm.SamplingMode.greedy(), maximum_response_tokens=60)))
    assert tool.cities == ["Paris"] and "21" in answer
