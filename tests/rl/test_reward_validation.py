"""The reward model's settings are chosen on a validation slice of the training pairs: the slice, the rest of the
training pairs and the held-out pairs have no prompt in common; a validation run never touches a held-out pair;
the frozen-layer cache gives the features prefix_features computes (also when advanced from an earlier split);
every judged accuracy carries n and its Wilson interval."""

from __future__ import annotations

import pytest
import torch

import openafm
from openafm.rl.preference.fit import advance_features, prefix_features
from openafm.rl.preference.model import Level, PreferencePair, RewardModel
from openafm.rl.preference.pairs import (
    VALIDATION_PERCENT,
    GradedPair,
    Source,
    all_pairs,
    by_split,
    carve_validation,
    is_validation,
)
from openafm.rl.preference.sources import build_groups
from openafm.rl.preference.training import Judge, cached_features, evaluate, prepare, with_interval
from openafm.splits import Split
from openafm.train.config import Precision


def test_validation_train_and_heldout_prompts_are_disjoint():
    groups, _ = build_groups(["math", "instructions", "tool-call"], 40, heldout=10, seed=0)
    pairs = all_pairs(groups)
    fit_pairs, validation = carve_validation(by_split(pairs, Split.TRAIN))
    prompts = {name: {p.pair.prompt for p in ps} for name, ps in
               (("fit", fit_pairs), ("validation", validation), ("heldout", by_split(pairs, Split.HELDOUT)))}
    assert not prompts["fit"] & prompts["validation"]
    assert not prompts["fit"] & prompts["heldout"] and not prompts["validation"] & prompts["heldout"]
    for source in Source:                                   # every source has a slice, and pairs stay with their prompt
        assert any(p.source is source for p in validation) and any(p.source is source for p in fit_pairs)
    assert len(fit_pairs) + len(validation) == len(by_split(pairs, Split.TRAIN))
    assert all(len([p for p in validation if p.group == g]) == 3 for g in {p.group for p in validation})


def test_the_slice_is_a_stable_fifth_of_prompts():
    share = sum(is_validation(f"Calculate {i} + {i + 1}.") for i in range(4000)) / 4000
    assert VALIDATION_PERCENT == 20 and share == pytest.approx(0.20, abs=0.02)
    assert [is_validation(f"prompt {i}") for i in range(12)] == [is_validation(f"prompt {i}") for i in range(12)]
    with pytest.raises(ValueError, match="training pairs only; 1 are heldout"):
        carve_validation([_pair("Calculate 1 + 2.", Split.HELDOUT)])


def test_wilson_interval_of_a_judged_accuracy():
    # 36 of 48: p = 0.75, z = 1.96, z^2/n = 0.08003: centre (p + z^2/2n) / (1 + z^2/n) = 0.73148, half-width
    # z sqrt(p(1-p)/n + z^2/4n^2) / (1 + z^2/n) = 0.11932 -> [0.6122, 0.8508]
    assert with_interval(36, 48) == {"value": 0.75, "hits": 36, "n": 48, "ci95": [0.6122, 0.8508]}
    assert with_interval(0, 0)["value"] is None


def _pair(prompt: str, split: Split, right: int = 5) -> GradedPair:
    return GradedPair(Source.MATH, prompt, split, PreferencePair(prompt, f"Answer: {right}", f"Answer: {right + 1}",
                                                                 Level.BETTER, 2, 0), "test", 1.0, 0.0)


@pytest.fixture(scope="module")
def base(tiny_checkpoint):
    return tiny_checkpoint


def _math_pairs(n: int) -> list[GradedPair]:
    out = []
    for i in range(n):
        split = Split.HELDOUT if i % 4 == 0 else Split.TRAIN
        out.append(_pair(f"Calculate {i} + {i + 3}.", split, 2 * i + 3))
    return out


def test_a_validation_run_fits_and_judges_on_training_prompts_only(base, tokenizer):
    model = RewardModel(openafm.load(base).model, 3)
    pairs = _math_pairs(40)
    heldout = {p.pair.prompt for p in pairs if p.split is Split.HELDOUT}
    prepared = prepare(model, tokenizer, pairs, train_layers=1, precision=Precision.FLOAT32, judge=Judge.VALIDATION)
    seen = {p for p, _ in prepared.train.texts} | {p for p, _ in prepared.judged.texts}
    assert seen and not seen & heldout
    assert {p.pair.prompt for p in prepared.judged_pairs} == {p for p, _ in prepared.judged.texts}
    assert all(is_validation(p) for p, _ in prepared.judged.texts)
    assert not any(is_validation(p) for p, _ in prepared.train.texts)
    report = evaluate(model, prepared)
    n = len(prepared.judged_pairs)
    assert report["judged_on"] == "validation" and report["pair_accuracy_interval"]["all"]["n"] == n
    assert report["pair_accuracy_interval"]["math"]["value"] == pytest.approx(report["pair_accuracy"]["math"])
    assert list(report["pair_accuracy_by_grades"]) == ["math 2>0"]                   # every pair here is 2 > 0
    assert report["pair_accuracy_by_grades"]["math 2>0"] == report["pair_accuracy_interval"]["math"]
    on_heldout = prepare(model, tokenizer, pairs, train_layers=1, precision=Precision.FLOAT32)
    assert {p for p, _ in on_heldout.judged.texts} == heldout
    assert len(on_heldout.train.tags) == len([p for p in pairs if p.split is Split.TRAIN])


def test_cached_features_equal_the_computed_ones_also_when_advanced(tmp_path, base, tokenizer):
    model = RewardModel(openafm.load(base).model, 3)
    layers = len(model.trunk.layers)
    assert layers >= 2
    texts = [(f"Calculate {i} + 1.", f"{i} + 1 = {i + 1}.\nAnswer: {i + 1}") for i in range(5)]
    direct = prefix_features(model, tokenizer, texts, layers - 1, precision="float32")
    low = cached_features(model, tokenizer, texts[:3], 0, tmp_path, precision="float32")       # written at split 0
    assert [f.shape for f in low] == [f.shape for f in direct[:3]]
    advanced = advance_features(model, low, 0, layers - 1, precision="float32")
    for a, b in zip(advanced, direct[:3], strict=True):
        assert torch.allclose(a, b, atol=1e-5)
    # split layers - 1: three states advanced from the split-0 cache, two computed from the tokens
    got = cached_features(model, tokenizer, texts, layers - 1, tmp_path, precision="float32")
    for a, b in zip(got, direct, strict=True):
        assert torch.allclose(a, b, atol=1e-5)
    assert sorted(f.name.rsplit("-", 1)[1] for f in tmp_path.glob("features-*.pt")) == ["split0.pt",
                                                                                       f"split{layers - 1}.pt"]
    again = cached_features(model, tokenizer, texts, layers - 1, tmp_path, precision="float32")  # read back
    assert all(torch.equal(a, b) for a, b in zip(again, got, strict=True))
