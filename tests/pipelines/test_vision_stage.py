"""The vision stage on a tiny decoder and a tiny tower: the recipe runs end to end and installs a tower tied to its
decoder's weights; a killed training continues from its checkpoint to the same weights; bad stages raise naming
the value."""

import dataclasses
import json

import pytest
import torch
import yaml

from openafm.checkpoint.load import load_model
from openafm.checkpoint.vision import load_tower
from openafm.errors import CheckpointError, ConfigError
from openafm.models.vision import vision_tiny
from openafm.models.vl_adapter import AdapterConfig
from openafm.models.vlm import VisionTower, VisionTowerConfig
from openafm.pipelines.recipe import load_recipe
from openafm.pipelines.run import run_recipe
from openafm.pipelines.vision import VisionData, train_config, training_pools
from openafm.train.vision.mix import ResolutionMix
from openafm.train.vision.questions import FixedPools, FreshQuestions
from openafm.train.vision.tasks import Task
from openafm.train.vision.vlm import VLMTrainConfig, VLMTrainer

RAPID = {"low_rapid": 1.0}


def write_yaml(path, data) -> None:
    path.write_text(yaml.safe_dump(data))
TASKS = {"read-digit": 0.5, "count": 0.5}


def _recipe(tmp_path, decoder: str, **answer) -> dict:
    data = {"per_task": 4, "emoji_copies": 1, "absent": 0.2}
    return {"run_dir": str(tmp_path / "run"), "seed": 0, "stages": [
        {"name": "align", "kind": "vision", "model": decoder, "tower": {"vision": "vision-tiny", "hidden": 16},
         "data": data, "read": {"steps": 2, "batch": 4, "tasks": TASKS, "mix": RAPID},
         "train": {"align_steps": 3, "steps": 0, "align_batch": 4, "tasks": TASKS, "mix": RAPID}, "eval": 2},
        {"name": "answer", "kind": "vision", "from": "align", "data": {"pool": "fresh", "absent": 0.2}, "eval": 2,
         "train": {"align_steps": 0, "steps": 2, "batch": 2, "tasks": TASKS, "mix": RAPID}, **answer}]}


def test_the_recipe_runs_end_to_end_and_installs_a_tower_tied_to_its_decoder(tmp_path, tiny_checkpoint):
    write_yaml(tmp_path / "r.yaml", _recipe(tmp_path, tiny_checkpoint, install_dir=str(tmp_path / "ship")))
    report = run_recipe(load_recipe(tmp_path / "r.yaml"), log=lambda *_: None)
    assert [r["status"] for r in report["stages"]] == ["ran", "ran"]
    read = json.loads((tmp_path / "run/stages/align/tower.json").read_text())["read"]
    assert read["steps"] == 2 and set(read["held_out_heads_rapid"]) == {"read-digit", "count"}
    assert report["stages"][0]["outputs"]["read_held_out_heads"].keys() == {"read-digit", "count"}
    assert report["stages"][1]["outputs"]["read_held_out_heads"] is None           # the answer stage reads nothing
    out = report["stages"][1]["outputs"]
    assert out["steps"] == 2 and set(out["held_out_rapid"]) == {"read-digit", "count", "absent"}
    sidecar = json.loads((tmp_path / "run/stages/answer/tower.json").read_text())
    assert sidecar["command"].startswith("openafm pipeline") and sidecar["continues"] == "align"
    assert sidecar["questions"] == {"pool": "fresh", "absent": 0.2}
    first = json.loads((tmp_path / "run/stages/align/tower.json").read_text())["questions"]
    assert first["pool"] == "fixed" and first["sizes"].keys() == {"read-digit", "count"}
    assert min(first["sizes"].values()) >= 4                                       # per_task, absent ones beside
    decoder = load_model(tiny_checkpoint).model
    tower = load_tower(out["installed"], decoder_model=decoder)
    assert tower.config.vision == vision_tiny()
    other = load_model(tiny_checkpoint).model
    with torch.no_grad():
        other.embed.weight.add_(1e-3)
    with pytest.raises(CheckpointError, match="trained against a decoder whose token embeddings"):
        load_tower(out["installed"], decoder_model=other)
    again = run_recipe(load_recipe(tmp_path / "r.yaml"), log=lambda *_: None)
    assert [r["status"] for r in again["stages"]] == ["skipped", "skipped"]


def _trainer(lm, config):
    torch.manual_seed(0)
    tower = VisionTower(VisionTowerConfig(vision=vision_tiny(), adapter=AdapterConfig(
        in_dim=32, out_dim=lm.model.config.dim, hidden=16)))
    return VLMTrainer(lm.model, lm.tokenizer, tower, config)


@pytest.mark.parametrize("pool", ["fixed", "fresh"])
def test_a_killed_training_continues_from_its_checkpoint_to_the_same_weights(tmp_path, tiny_checkpoint, monkeypatch,
                                                                            pool):
    lm = load_model(tiny_checkpoint)
    config = VLMTrainConfig(align_steps=3, steps=3, batch=2, align_batch=4, mix=ResolutionMix(low_rapid=1.0),
                            task_weights=((Task.READ_DIGIT, 0.5), (Task.COUNT, 0.5)))
    pools = (FixedPools(training_pools([Task.READ_DIGIT, Task.COUNT], VisionData(per_task=4, emoji_copies=1), 0))
             if pool == "fixed" else FreshQuestions(absent=0.3))
    whole = _trainer(lm, config)
    whole.train(pools)
    calls = {"n": 0}
    real = VLMTrainer.loss

    def dies_on_the_second_answer_step(self, batch, mode):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt("killed")
        return real(self, batch, mode)
    monkeypatch.setattr(VLMTrainer, "loss", dies_on_the_second_answer_step)
    state = tmp_path / "state.pt"
    with pytest.raises(KeyboardInterrupt):
        _trainer(lm, config).train(pools, checkpoint=state, every=1)
    monkeypatch.setattr(VLMTrainer, "loss", real)
    resumed = _trainer(lm, config)
    history = resumed.train(pools, checkpoint=state, every=1)
    assert [r["step"] for r in history] == list(range(6))
    for (name, a), b in zip(whole.tower.state_dict().items(), resumed.tower.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, msg=name)
    with pytest.raises(ConfigError, match="another config"):
        _trainer(lm, dataclasses.replace(config, lr=1.0)).train(pools, checkpoint=state)


def test_a_frozen_encoder_keeps_its_weights_through_both_phases_while_the_adapter_learns(tiny_checkpoint):
    """encoder: frozen keeps what a reading phase taught the encoder (the alignment warm-up at lr 2e-3 otherwise
    overwrote it: on fresh training-font renderings its emoji head fell from 67% to 9%)."""
    lm = load_model(tiny_checkpoint)
    pools = FixedPools(training_pools([Task.READ_DIGIT, Task.COUNT], VisionData(per_task=4, emoji_copies=1), 0))
    for kind, encoder_moves in (("frozen", False), ("trained", True)):
        config = train_config({"align_steps": 2, "steps": 2, "batch": 2, "align_batch": 4, "encoder": kind,
                               "tasks": TASKS, "mix": RAPID}, 0, "test")
        trainer = _trainer(lm, config)
        before = {k: v.clone() for k, v in trainer.tower.state_dict().items()}
        trainer.train(pools)
        moved = {k for k, v in trainer.tower.state_dict().items() if not torch.equal(v, before[k])}
        assert any(k.startswith("adapter.") for k in moved)
        assert any(k.startswith("encoder.") for k in moved) is encoder_moves, kind


@pytest.mark.parametrize("change, message", [
    ({"train": {"encoder": "thawed"}}, "'thawed' is not one of"),
    ({"train": {"tasks": {"read-poems": 1.0}}}, "'read-poems' is not one of"),
    ({"train": {"mix": {"low_rapid": 2.0}}}, "low_rapid=2.0 must be a probability"),
    ({"train": {"bogus": 1}}, "unknown keys \\['bogus'\\]"),
    ({"tower": {"adapter": "lstm"}}, "tower.adapter='lstm' is not one of"),
    ({"data": {"absent": 1.0}}, "absent=1.0"),
    ({"data": {"pool": "lukewarm"}}, "'lukewarm' is not one of"),
    ({"data": {"pool": "fresh", "per_task": 4}}, "data \\{'per_task': 4\\} size fixed pools"),
])
def test_bad_vision_stages_raise_naming_the_value(tmp_path, change, message):
    recipe = _recipe(tmp_path, "smollm2-135m-instruct")
    recipe["stages"][0].update(change)
    write_yaml(tmp_path / "r.yaml", recipe)
    with pytest.raises(ConfigError, match=message):
        load_recipe(tmp_path / "r.yaml")


def test_a_stage_continuing_another_takes_no_tower_and_needs_a_vision_stage(tmp_path):
    recipe = _recipe(tmp_path, "smollm2-135m-instruct")
    recipe["stages"][1]["tower"] = {"vision": "vision-small"}
    write_yaml(tmp_path / "r.yaml", recipe)
    with pytest.raises(ConfigError, match="tower is set by the stage it continues"):
        load_recipe(tmp_path / "r.yaml")
    recipe = _recipe(tmp_path, "smollm2-135m-instruct")
    recipe["stages"].insert(0, {"name": "ev", "kind": "tasks", "models": ["base:smollm2-135m-instruct"],
                                "tasks": ["mmlu_wordnet"]})
    recipe["stages"][2]["from"] = "ev"
    write_yaml(tmp_path / "r.yaml", recipe)
    with pytest.raises(ConfigError, match="needs one of kind \\['vision'\\]"):
        load_recipe(tmp_path / "r.yaml")
    assert train_config({}, 0, "x").task_weights[0][0] is Task.NAME_EMOJI
