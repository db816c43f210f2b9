"""The recipe runner: every stage kind end to end on a tiny corpus, skip on rerun, resume, loud errors."""

from __future__ import annotations

import copy
import json
import math
import random

import numpy as np
import pytest
import torch

from openafm.errors import ConfigError
from openafm.train import checkpoint as ckpt
from openafm.pipelines.recipe import Subset, recipe_from_dict
from openafm.pipelines.run import run_recipe, stage_table
from openafm.pipelines.stages import heldout_bucket, heldout_streams, split_documents

WORDS = {"general": "the king said unto them go forth and see the land which is good".split(),
         "code": "def return self if else for in range print import class None True".split(),
         "math": "one two three plus minus equals times answer is 4 7 12 19".split(),
         "multilingual": "der die das und ist nicht ein eine mit auf für von".split()}


def write_corpus(root, docs_per_domain: int = 24) -> None:
    rng = random.Random(0)
    (root / "work" / "extract").mkdir(parents=True)         # what `openafm data build` leaves beside the domains
    (root / "report.json").write_text("{}")
    for domain, words in WORDS.items():
        (root / domain).mkdir(parents=True)
        with open(root / domain / "shard-00000.jsonl", "w") as f:
            for i in range(docs_per_domain):
                text = " ".join(rng.choice(words) for _ in range(rng.randint(30, 60)))
                doc = {"id": f"{domain}-{i}", "text": text, "source": "test", "licence": "CC0", "domain": domain,
                       "lang": "de" if domain == "multilingual" else "en", "meta": {"quality_score": rng.random()}}
                f.write(json.dumps(doc) + "\n")


TRAIN = {"batch_size": 4, "seq_len": 32, "peak_flops": 1.0e10, "progress": False, "checkpoint": {"every": 2, "keep": 2},
         "optimizer": {"lr": 3.0e-3}, "schedule": {"kind": "constant"}}
MIX = {"weights": {"general": 0.4, "code": 0.2, "math": 0.2, "multilingual": 0.2}}


def tiny_recipe(tmp_path) -> dict:
    corpus = tmp_path / "corpus"
    if not corpus.exists():
        write_corpus(corpus)
    data = {"shards": "shards", "mixture": MIX}
    return {"run_dir": str(tmp_path / "run"), "seed": 0, "stages": [
        {"name": "corpus", "kind": "corpus", "jsonl_dir": str(corpus)},
        {"name": "tok", "kind": "tokenizer", "corpus": "corpus", "vocab_size": 300},
        {"name": "shards", "kind": "shards", "corpus": "corpus", "tokenizer": "tok", "heldout_fraction": 0.2},
        {"name": "dense", "kind": "train", "data": data, "train": {**TRAIN, "steps": 4},
         "model": {"preset": "afm-ondevice-tiny", "changes": {"dim": 32, "n_layers": 8, "ffn_hidden": 64}}},
        {"name": "moe", "kind": "upcycle", "from": "dense", "n_experts": 4, "every": 2, "top_k": 2},
        {"name": "teacher", "kind": "train", "from": "moe", "train": {**TRAIN, "steps": 2},
         "data": {**data, "subset": "hq"}},
        {"name": "kd", "kind": "distill", "from": "dense", "teacher": "teacher", "train": {**TRAIN, "steps": 2},
         "data": {**data, "skip_steps": 4}, "kd": {"kd_kind": "top-k", "top_k": 8, "kd_weight": 0.5}},
        {"name": "long", "kind": "train", "from": "kd", "model_changes": {"rope_theta": 40000.0},
         "train": {**TRAIN, "steps": 2, "seq_len": 64},
         "data": {**data, "mixture": {**MIX, "curriculum": {"domain": "multilingual", "start": 0.2, "end": 0.5}}}},
        {"name": "eval", "kind": "eval", "shards": "shards", "models": ["dense", "teacher", "kd", "long"],
         "context": 32},
    ]}


def naive_ppl(model, ids: np.ndarray, context: int) -> float:
    """exp(mean NLL) over non-overlapping windows, one token at a time from the full-window logits."""
    nll, n = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(ids) - context + 1, context):
            window = torch.as_tensor(ids[start:start + context]).view(1, -1)
            logp = torch.log_softmax(model(window)[0].double(), -1)
            for t in range(context - 1):
                nll -= float(logp[t, window[0, t + 1]])
                n += 1
    return math.exp(nll / n)


def test_recipe_runs_every_stage_kind_then_skips_them(tmp_path):
    import openafm
    recipe = recipe_from_dict(tiny_recipe(tmp_path))
    report = run_recipe(recipe, log=lambda *_: None)
    by_name = {r["name"]: r for r in report["stages"]}
    assert [r["status"] for r in report["stages"]] == ["ran"] * 9
    assert json.loads((tmp_path / "run" / "report.json").read_text())["stages"][3]["name"] == "dense"

    # the shards split: held out by id hash, hq = top half per domain by score, all counted
    shards = by_name["shards"]["outputs"]
    assert shards["train"]["documents"] + shards["heldout"]["documents"] == 4 * 24
    held = sum(heldout_bucket(f"{d}-{i}") < 0.2 for d in WORDS for i in range(24))
    assert shards["heldout"]["documents"] == held
    assert shards["hq"]["documents"] == sum(round(0.5 * n) for n in _train_counts(tmp_path))

    # the models: trained for the asked steps, upcycled MoE has 4x the FFN weights in layers 1, 3, 5, 7
    dense = openafm.load(by_name["dense"]["outputs"]["model_dir"])
    assert dense.model.kv_plan.vocab_size == 300 and dense.tokenizer is not None
    assert by_name["dense"]["outputs"]["steps"] == 4 and by_name["dense"]["outputs"]["tokens"] == 4 * 4 * 32
    moe_cfg = openafm.load(by_name["moe"]["outputs"]["model_dir"]).model.config
    assert [s.ffn.value for s in moe_cfg.layers][:2] == ["dense", "moe"] and moe_cfg.moe.n_experts == 4
    long = openafm.load(by_name["long"]["outputs"]["model_dir"]).model
    assert long.config.rope_theta == 40000.0
    kd_metrics = [json.loads(x) for x in (recipe.stage_dir("kd") / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(kd_metrics) == 2 and all("kl" in m and m["kl"] > 0 for m in kd_metrics)

    # eval equals a naive per-token perplexity over the same held-out windows
    streams = heldout_streams(shards["heldout"]["dir"])
    ids = streams["general"][: 32 * (len(streams["general"]) // 32)]
    got = by_name["eval"]["outputs"]["perplexity"]["dense"]["per_domain"]["general"]["ppl"]
    assert got == pytest.approx(naive_ppl(dense.model, ids, 32), rel=1e-4)

    # rerun: every stage skipped, same outputs, the table names each stage
    again = run_recipe(recipe_from_dict(tiny_recipe(tmp_path)), log=lambda *_: None)
    assert [r["status"] for r in again["stages"]] == ["skipped"] * 9
    assert again["stages"][-1]["outputs"] == by_name["eval"]["outputs"]
    assert all(r["name"] in stage_table(again) for r in again["stages"])

    # a changed definition of a finished stage is refused, naming it
    changed = tiny_recipe(tmp_path)
    changed["stages"][3]["train"]["steps"] = 5
    with pytest.raises(ConfigError, match="'dense' is done with a different definition"):
        run_recipe(recipe_from_dict(changed), log=lambda *_: None)


def _train_counts(tmp_path) -> list[int]:
    return [sum(heldout_bucket(f"{d}-{i}") >= 0.2 for i in range(24)) for d in WORDS]


def test_killed_train_stage_resumes_from_its_checkpoint(tmp_path):
    spec = tiny_recipe(tmp_path)
    spec["stages"] = spec["stages"][:4]
    spec["stages"][3]["train"]["steps"] = 6
    recipe = recipe_from_dict(spec)
    uninterrupted = run_recipe(recipe, log=lambda *_: None)["stages"][3]["outputs"]

    # the same recipe elsewhere, with the train stage cut short after 4 of 6 steps (as a kill would leave it)
    spec2 = copy.deepcopy(spec)
    spec2["run_dir"] = str(tmp_path / "run2")
    recipe2 = recipe_from_dict(spec2)
    from openafm.train.loop import Trainer
    original = Trainer.run
    Trainer.run = lambda self, resume=False, stop_after=None: original(self, resume=resume, stop_after=4)
    try:
        with pytest.raises(RuntimeError, match="'dense' stopped at step 4 of 6"):
            run_recipe(recipe2, log=lambda *_: None)
    finally:
        Trainer.run = original
    assert not (recipe2.stage_dir("dense") / "done.json").exists()
    assert [s for s, _ in ckpt.list_checkpoints(recipe2.stage_dir("dense") / "run")] == [2, 4]
    resumed = run_recipe(recipe2, log=lambda *_: None)["stages"][3]
    assert resumed["status"] == "ran" and resumed["outputs"]["resumed_from_step"] == 4
    assert resumed["outputs"]["trained_steps_this_run"] == 2
    a = json.loads((recipe.stage_dir("dense") / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    b = json.loads((recipe2.stage_dir("dense") / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    assert a["step"] == b["step"] == 6 and a["loss"] == b["loss"]


@pytest.mark.parametrize("edit, message", [
    (lambda s: s["stages"][3].update(kind="pretrain"), "unknown kind 'pretrain'"),
    (lambda s: s["stages"][4].update({"from": "densse"}), "from='densse' names no stage"),
    (lambda s: s["stages"][6].update(teacher="eval"), "teacher='eval' names a later stage"),
    (lambda s: s["stages"][5].update({"from": "shards"}), "from='shards' is a shards stage"),
    (lambda s: s["stages"][3]["data"].update(mixture={"weights": {"general": 0.5, "code": 0.3}}), "sum to 0.8, not 1"),
    (lambda s: s["stages"][3]["train"].update(model="x"), "train keys \\['model'\\] are set by the recipe"),
    (lambda s: s["stages"][3]["train"].update(stepz=3), "unknown keys \\['stepz'\\]"),
])
def test_bad_recipes_raise_naming_the_value(tmp_path, edit, message):
    spec = copy.deepcopy(tiny_recipe(tmp_path))
    edit(spec)
    with pytest.raises(ConfigError, match=message):
        recipe_from_dict(spec)


def test_hq_split_takes_top_scores_per_domain():
    from openafm.data.document import Document
    docs = [Document(id=f"{d}-{i}", text="x", source="t", licence="CC0", domain=d, meta={"quality_score": i / 10})
            for d in ("general", "code") for i in range(10)]
    split = split_documents(docs, 1e-9, 0.3)
    assert not split[Subset.HELDOUT] and len(split[Subset.TRAIN]) == 20
    hq = {d.id for d in split[Subset.HQ]}
    assert hq == {f"{d}-{i}" for d in ("general", "code") for i in (7, 8, 9)}
    whole = {d.id for d in split_documents(docs, 1e-9, 0.3, ("code",))[Subset.HQ]}
    assert whole == {f"general-{i}" for i in (7, 8, 9)} | {f"code-{i}" for i in range(10)}
    del docs[9].meta["quality_score"]          # unscored (e.g. langid said non-English): never in hq
    unscored = {d.id for d in split_documents(docs, 1e-9, 0.3, ("code",))[Subset.HQ]}
    assert unscored == {f"general-{i}" for i in (6, 7, 8)} | {f"code-{i}" for i in range(10)}


def test_a_run_dir_given_relative_is_reused_from_another_directory(tmp_path, monkeypatch):
    spec = tiny_recipe(tmp_path)
    spec["stages"] = spec["stages"][:2]                                # corpus, tok
    spec["run_dir"] = "run"
    monkeypatch.chdir(tmp_path)
    first = run_recipe(recipe_from_dict(spec), log=lambda *_: None)
    assert first["run_dir"] == str(tmp_path / "run")

    # the next stage, started from elsewhere against the same run dir, reads the tokenizer the first run wrote
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    spec = tiny_recipe(tmp_path)
    spec["stages"] = spec["stages"][:3]                                # + shards
    spec["run_dir"] = "../run"
    report = run_recipe(recipe_from_dict(spec), log=lambda *_: None)
    assert [r["status"] for r in report["stages"]] == ["skipped", "skipped", "ran"]
    assert report["stages"][2]["outputs"]["train"]["documents"] > 0
