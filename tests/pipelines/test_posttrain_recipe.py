"""The post-training stage kinds of a recipe on a tiny model with the real tokenizer: synth -> sft -> rl -> tasks
end to end (each model stage a loadable checkpoint, the SFT merge equal to the adapter it came from), skipped on a
rerun, and bad post-training stages named before anything runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from openafm.checkpoint.adapter import read_adapter
from openafm.checkpoint.bundled import sidecar
from openafm.checkpoint.load import load_model
from openafm.checkpoint.packaged import BUNDLED
from openafm.checkpoint.native import save_checkpoint
from openafm.data.chat import read_chat_jsonl
from openafm.errors import ConfigError
from openafm.pipelines.package import history
from openafm.pipelines.recipe import load_recipe, recipe_from_dict, stage_spec
from openafm.pipelines.run import run_recipe
from openafm.rl.rewards.registry import REWARDS, UnknownRewardError
from tiny import make_tiny

ROOT = Path(__file__).resolve().parents[2]
INSTRUCTIONS = {"source": "instructions", "options": {"most": 1}}


@pytest.fixture
def base(tmp_path, tokenizer):
    model = make_tiny("smollm2-tiny", vocab_size=tokenizer.vocab_size, max_seq_len=512)
    save_checkpoint(tmp_path / "base", model.config, model.state_dict(), tokenizer)
    return str(tmp_path / "base")


def recipe(tmp_path, base) -> dict:
    rl = {"steps": 2, "prompts_per_step": 2, "max_new_tokens": 4, "temperature": 5.0, "micro_batch": 4,
          "progress": False, "rloo": {"k": 2}, "heldout": {"every": 1, "size": 2},
          "prompt_sets": [{"name": "ifeval", "source": "instructions", "weight": 1.0, "reward": "instructions",
                           "pool": 4, "options": {"most": 1}}]}
    return {"run_dir": str(tmp_path / "run"), "seed": 0, "stages": [
        {"name": "synth", "kind": "synth", "model": base, "prompts": INSTRUCTIONS, "reward": "instructions",
         "threshold": 0.0, "n": 3, "k": 2, "max_tokens": 4, "temperature": 5.0, "top_p": 1.0},
        {"name": "sft", "kind": "sft", "model": base, "data": ["synth"], "rank": 2,
         "sft": {"steps": 2, "batch_size": 2, "seq_len": 256, "progress": False, "peak_flops": 1e12,
                 "schedule": {"kind": "constant"}}},
        {"name": "rl", "kind": "rl", "from": "sft", "trains": "adapter", "rl": rl},
        {"name": "eval", "kind": "tasks", "models": [f"base:{base}", "rl"], "tasks": ["ifeval"], "limit": 1},
    ]}


def test_posttrain_stages_end_to_end(tmp_path, base, monkeypatch):
    # a dense reward (the share of letters), so a tiny random model's samples differ in reward and RL moves
    monkeypatch.setitem(REWARDS, "letters", lambda: lambda prompt, response, target:
                        sum(c.isalpha() for c in response) / max(1, len(response)))
    data = recipe(tmp_path, base)
    data["stages"][2]["rl"]["prompt_sets"][0]["reward"] = "letters"
    report = run_recipe(recipe_from_dict(data), log=lambda *a: None)
    out = {r["name"]: r["outputs"] for r in report["stages"]}
    kept = read_chat_jsonl(out["synth"]["data"])
    assert out["synth"]["samples"] == 6 and len(kept) == 6                 # threshold 0: every sample kept
    assert {x.meta["verifier"] for x in kept} == {"instructions"} and {x.meta["k"] for x in kept} == {2}
    assert out["sft"]["examples"] == 6 and out["sft"]["steps"] == 2 and out["sft"]["merged_layers"] > 0
    sft = load_model(out["sft"]["model_dir"]).model
    start = load_model(base).model
    changed = [k for k, v in sft.state_dict().items() if not torch.equal(v, start.state_dict()[k])]
    assert changed and all(k.endswith("weight") for k in changed)          # LoRA merged into linear weights
    assert out["rl"]["steps"] == 2 and set(out["rl"]["heldout_after"]) == {"heldout/ifeval"}
    assert load_model(out["rl"]["model_dir"]).model is not None
    # rl continued sft's adapter on sft's base: an adapter of the same shape for the same weights
    sft_adapter, rl_adapter = read_adapter(out["sft"]["adapter"]), read_adapter(out["rl"]["adapter"])
    assert rl_adapter.base_fingerprint == sft_adapter.base_fingerprint == out["sft"]["base_fingerprint"]
    assert rl_adapter.rank == sft_adapter.rank == 2 and rl_adapter.targets == sft_adapter.targets
    assert any(not torch.equal(rl_adapter.tensors[k], t) for k, t in sft_adapter.tensors.items())
    assert set(out["eval"]["tasks"]) == {f"base:{base}", "rl"}
    assert out["eval"]["tasks"]["rl"]["ifeval"]["n"] == 1
    again = run_recipe(recipe_from_dict(data), log=lambda *a: None)
    assert [r["status"] for r in again["stages"]] == ["skipped"] * 4


@pytest.mark.parametrize("edit, message", [
    (lambda r: r["stages"][1].update(data=["nowhere"]), "'nowhere' names no stage"),
    (lambda r: r["stages"][2].update({"from": "eval"}), "'eval' names a later stage"),
    (lambda r: r["stages"][2]["rl"].update(run_dir="x"), "rl keys \\['run_dir'\\]"),
    (lambda r: r["stages"][2]["rl"]["prompt_sets"][0].update(weight=-1), "weight=-1"),
    (lambda r: r["stages"][3].update(tasks=["nope"]), "nope"),
    (lambda r: r["stages"][0].update({"from": "sft"}), "exactly one of model"),
    (lambda r: r["stages"][2]["rl"].update(adapter={"rank": 2}), "rl keys \\['adapter'\\] are set by the recipe"),
    (lambda r: r["stages"][2].update({"from": None, "model": "smollm2-135m-instruct"}),
     "model='smollm2-135m-instruct' has none \\(bundled models"),
    (lambda r: r["stages"].insert(3, {"name": "rl2", "kind": "rl", "from": "rl", "trains": "adapter",
                                      "rl": r["stages"][2]["rl"]}), "'rl' is a rl stage; from needs one of kind \\['sft'\\]"),
    (lambda r: r["stages"].append({"name": "pkg", "kind": "package", "from": "rl", "bundle": "toy"})
     or r["stages"][2].update(trains="weights"), "from='rl' trains every weight"),
])
def test_bad_posttrain_stages_are_named(tmp_path, base, edit, message):
    data = recipe(tmp_path, base)
    edit(data)
    with pytest.raises((ConfigError, KeyError), match=message):
        recipe_from_dict(data)


def test_the_shipped_posttrain_recipe_validates():
    recipe = load_recipe(ROOT / "recipes" / "posttrain-smollm2.yaml")
    assert [s.kind.value for s in recipe.stages] == ["synth", "sft", "rl", "tasks"]
    rl = recipe.stage("rl")
    assert rl.from_ == "sft" and rl.rl["prompt_sets"][0]["source"] == "reasoning-gym"


def default_like(tmp_path, base: str) -> dict:
    """recipes/default-model.yaml's stage kinds and data at toy sizes."""
    return {"run_dir": str(tmp_path / "run"), "seed": 0, "stages": [
        {"name": "synth", "kind": "synth", "model": base, "prompts": INSTRUCTIONS, "reward": "instructions",
         "threshold": 0.0, "n": 2, "k": 2, "max_tokens": 4, "temperature": 5.0, "top_p": 1.0},
        {"name": "sft", "kind": "sft", "model": base, "data": ["synth", "guided", "tool-rounds", "bfcl", "udhr"],
         "sizes": {"guided": 3, "tool-rounds": 3}, "rank": 2,
         "sft": {"steps": 1, "batch_size": 2, "seq_len": 512, "progress": False, "peak_flops": 1e12,
                 "schedule": {"kind": "constant"}}},
        {"name": "package", "kind": "package", "from": "sft", "bundle": "toy"}]}


def test_sft_draws_the_builtin_sets_and_the_package_stage_refuses_a_base_that_is_not_packaged(tmp_path, base):
    data = default_like(tmp_path, base)
    with pytest.raises(ConfigError, match="a bundle adapts a packaged GGUF base"):
        run_recipe(recipe_from_dict(data), log=lambda *a: None)
    sft = json.loads((tmp_path / "run" / "stages" / "sft" / "done.json").read_text())["outputs"]
    counts = sft["examples_per_source"]
    assert counts["synth"] == 4 and counts["guided"] == 3 and counts["tool-rounds"] == 3
    assert counts["bfcl"] > 500 and counts["udhr"] > 400
    assert Path(sft["adapter"]).is_file() and sft["base_fingerprint"].startswith("sha256:")


@pytest.mark.parametrize("edit, message", [
    (lambda r: r["stages"][1].update(sizes={"bfcl": 3}), "sizes.bfcl: only .*'math-steps'.* drawn by count"),
    (lambda r: r["stages"][1].update(sizes={"guided": 0}), "sizes.guided=0 must be an integer >= 1"),
    (lambda r: r["stages"][1].update(data=["synth"], sizes={"guided": 2}), "data does not use 'guided'"),
    (lambda r: r["stages"][2].update({"from": "synth"}), "'synth' is a synth stage"),
    (lambda r: r["stages"][2].update(bundle="a/b"), "bundle='a/b'"),
    (lambda r: r["stages"][0].update(reward="nope"), "unknown reward 'nope'; known rewards: chrf"),
    (lambda r: r["stages"][2].update(kind="bogus"), "unknown kind 'bogus'"),
    (lambda r: r["stages"][1].update(adapter="continue"), "model=.*/base' must name one"),
    (lambda r: r["stages"][1].update(adapter="continue", model="openafm-135m-sft"), r"rank / alpha \(got 2 / None\)"),
    (lambda r: r["stages"][1].update(adapter="resume"), "'resume'"),
])
def test_bad_default_recipe_stages_are_named(tmp_path, base, edit, message):
    data = default_like(tmp_path, base)
    edit(data)
    with pytest.raises((ConfigError, UnknownRewardError), match=message):
        recipe_from_dict(data)


def test_the_shipped_default_model_recipes_validate():
    recipe = load_recipe(ROOT / "recipes" / "default-model.yaml")
    assert [s.kind.value for s in recipe.stages] == ["synth", "sft", "package"]
    sft = recipe.stage("sft")
    assert sft.rank == 32 and {"guided", "tool-rounds", "bfcl", "udhr", "math-steps"} <= set(sft.data)
    assert recipe.stage("package").bundle == "openafm-135m" and recipe.stage("package").from_ == "sft"
    # the RL recipe continues the SFT adapter that recipe shipped, and packages a candidate it does not install
    for name in ("default-model-rl.yaml", "default-model-rl-tools.yaml"):
        rl_recipe = load_recipe(ROOT / "recipes" / name)
        assert [s.kind.value for s in rl_recipe.stages] == ["rl", "package"]
        rl, package = rl_recipe.stage("rl"), rl_recipe.stage("package")
        assert rl.model == "openafm-135m-sft" and rl.trains.value == "adapter"
        assert package.from_ == "rl" and package.bundle not in BUNDLED and package.install_dir is None
    shipped_sft = sidecar(BUNDLED["openafm-135m-sft"])
    assert [s["name"] for s in shipped_sft["recipe"]] == ["synth-instructions", "sft"]
    # the adapter kind came after the shipped adapter was made: its record lacks the field, whose default it used
    assert sft.adapter.value == "new"
    assert shipped_sft["recipe"][1] == {k: v for k, v in stage_spec(sft).items() if k != "adapter"}
    # the tools recipe continues that adapter with the made-up tools, the SFT mixture and plain text replayed
    tools = load_recipe(ROOT / "recipes" / "default-model-tools.yaml")
    more = tools.stage("sft")
    assert more.model == "openafm-135m-sft" and more.adapter.value == "continue" and more.rank is None
    assert {"made-tool-rounds", "guided", "tool-rounds", "bfcl", "udhr", "math-steps", "plain-text"} == set(more.data)
    assert tools.stage("package").install_dir is None                       # a candidate: running it ships nothing



def package_after_rl(rl_stage: dict, before: list[dict]) -> dict:
    rl = {"steps": 1, "prompt_sets": [{"name": "ifeval", "source": "instructions", "weight": 1.0,
                                       "reward": "instructions"}]}
    return {"run_dir": "run", "stages": [*before, {"name": "rl", "kind": "rl", "trains": "adapter", "rl": rl,
                                                   **rl_stage},
                                         {"name": "package", "kind": "package", "from": "rl", "bundle": "toy"}]}


RL_OUT = {"steps": 3, "heldout_before": {"heldout/ifeval": 0.2}, "heldout_after": {"heldout/ifeval": 0.3},
          "heldout_gain": {"heldout/ifeval": 0.1}, "adapter": "run/adapter.safetensors"}


def test_a_package_after_rl_records_rl_and_what_the_adapter_came_from():
    # rl continues a bundled model's adapter: the bundle's data and SFT record come along under its name
    recipe = recipe_from_dict(package_after_rl({"model": "openafm-135m"}, []))
    base, record = history(recipe, recipe.stage("package"), {"rl": RL_OUT})
    shipped = sidecar(BUNDLED["openafm-135m"])
    assert base == "smollm2-135m-instruct"
    assert record["continues"]["name"] == "openafm-135m"
    assert record["continues"]["adapter_sha256"] == shipped["adapter_sha256"]
    assert record["data"] == shipped["data"] and record["sft"] == shipped["sft"]
    assert record["rl"]["heldout_gain"] == {"heldout/ifeval": 0.1} and record["rl"]["config"]["steps"] == 1
    # rl continues an sft stage's adapter: that stage's data and losses
    sft = {"name": "sft", "kind": "sft", "model": "smollm2-135m-instruct", "data": ["bfcl"], "rank": 2, "sft": {}}
    recipe = recipe_from_dict(package_after_rl({"from": "sft"}, [sft]))
    sft_out = {"examples_per_source": {"bfcl": 9}, "examples": 9, "skipped": 0, "steps": 4, "loss_first": 2.0,
               "loss_last": 1.0, "adapter": "run/sft.safetensors", "model_dir": "run/sft"}
    base, record = history(recipe, recipe.stage("package"), {"sft": sft_out, "rl": RL_OUT})
    assert base == "smollm2-135m-instruct" and "continues" not in record
    assert record["data"] == {"bfcl": 9} and record["sft"]["loss_last"] == 1.0 and record["rl"]["steps"] == 3


def test_a_package_after_sft_that_continued_a_bundle_names_it_and_adapts_its_base():
    sft = {"name": "sft", "kind": "sft", "model": "openafm-135m-sft", "adapter": "continue",
           "data": ["made-tool-rounds"], "sft": {}}
    recipe = recipe_from_dict({"run_dir": "run", "stages": [
        sft, {"name": "package", "kind": "package", "from": "sft", "bundle": "toy"}]})
    sft_out = {"examples_per_source": {"made-tool-rounds": 9}, "examples": 9, "skipped": 0, "steps": 4,
               "loss_first": 2.0, "loss_last": 1.0, "adapter": "run/sft.safetensors", "model_dir": "run/sft"}
    base, record = history(recipe, recipe.stage("package"), {"sft": sft_out})
    shipped = sidecar(BUNDLED["openafm-135m-sft"])
    assert base == "smollm2-135m-instruct"
    assert record["data"] == {"made-tool-rounds": 9} and record["sft"]["steps"] == 4
    assert record["continues"]["name"] == "openafm-135m-sft"
    assert record["continues"]["adapter_sha256"] == shipped["adapter_sha256"]
    assert record["continues"]["data"] == shipped["data"]
