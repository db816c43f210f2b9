"""The shipped vision tower (real model): made by the vision recipe, it serves the default model and its base, is tied
to their token embeddings, and a session asked about a held-out image answers from it."""

import asyncio
import json

import pytest
from PIL import Image

import openafm.fm as fm
from openafm.checkpoint.load import load_model
from openafm.checkpoint.packaged import DEFAULT_MODEL, RAW_MODEL
from openafm.checkpoint.vision import load_tower, packaged_tower_path, shipped_towers, tower_decoder
from openafm.errors import CheckpointError
from openafm.splits import Split
from openafm.train.vision.tasks import Task, absent_qa, is_refusal, task_pools

pytestmark = pytest.mark.real_model
GREEDY = fm.GenerationOptions(maximum_response_tokens=8, sampling=fm.SamplingMode.greedy())


def test_the_shipped_tower_is_the_recipes_and_is_tied_to_the_default_models_embeddings(tiny_checkpoint):
    assert {DEFAULT_MODEL, RAW_MODEL} <= set(shipped_towers())
    assert tower_decoder(RAW_MODEL) == DEFAULT_MODEL
    path = packaged_tower_path(DEFAULT_MODEL)
    sidecar = json.loads(path.with_suffix(".json").read_text())
    assert sidecar["command"] == "openafm pipeline recipes/vision-default.yaml" and sidecar["decoder_frozen"]
    tower = load_tower(path, decoder=DEFAULT_MODEL, decoder_model=load_model(RAW_MODEL).model)  # same embeddings
    assert tower.config.pixel_norm.value == "per-image"
    with pytest.raises(CheckpointError, match="trained against a decoder whose token embeddings"):
        load_tower(path, decoder_model=load_model(tiny_checkpoint).model)


def _ask(question: str, image: Image.Image, tmp_path, resolution=fm.Resolution.BALANCED) -> str:
    path = tmp_path / "image.png"
    image.save(path)
    model = fm.SystemLanguageModel(resolution=resolution)

    async def go():
        return await fm.LanguageModelSession(model=model).respond([question, fm.ImageAttachment(path)], options=GREEDY)
    return asyncio.run(go())


def test_a_session_answers_held_out_images_and_refuses_an_absent_object(tmp_path):
    held = task_pools(Split.HELDOUT, 4, seed=0)
    for task in Task:
        assert _ask(task.question, held[task][0].image, tmp_path).strip()
    # the tower trained mostly in rapid mode, where it refuses 86% of held-out absent-object questions (n=100)
    absent = next(q for q in absent_qa(held, 20, seed=2) if q.task is Task.READ_DIGIT)
    assert is_refusal(_ask(absent.task.question, absent.image, tmp_path, fm.Resolution.RAPID))
