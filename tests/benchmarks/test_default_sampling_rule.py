"""benchmarks/default_sampling.py's choice, which was written before its first run: the most instructions + language
hits among sampled settings, the least looping within 4 hits of the best; the sidecar gets it only when its held-out
hits are not below OpenAI's defaults. No model runs here."""

from __future__ import annotations

import dataclasses
import json

import pytest

from bench_modules import load_benchmark


def variant(ins: int, lang: int, looping: float) -> dict:
    return {"instructions": {"hits": ins}, "language": {"hits": lang}, "looping": {"rate": looping}}


def test_the_rule_takes_the_least_looping_of_those_near_the_best_and_never_greedy():
    bench = load_benchmark("default_sampling")
    looks = {"variants": {"greedy": variant(90, 60, 0.0), "openai": variant(30, 120, 0.03),
                          "warm": variant(45, 120, 0.44), "llama": variant(41, 120, 0.40)}}
    assert bench.chosen(looks) == "llama"                    # 161 is within 4 of 165, and loops less
    looks["variants"]["llama"] = variant(40, 120, 0.40)        # 160: 5 behind
    assert bench.chosen(looks) == "warm"


@pytest.mark.parametrize("text, loops", [("a b c d a b c d a b c d", True), ("a b c d a b c d", False), ("", False)])
def test_a_loop_is_a_word_4gram_three_times(text, loops):
    assert load_benchmark("default_sampling").loops(text) is loops


def test_the_sidecar_gets_the_choice_only_when_held_out_does_not_fall_below_openai(tmp_path, monkeypatch):
    bench = load_benchmark("default_sampling")
    sidecar = tmp_path / "m.json"
    sidecar.write_text(json.dumps({"format": "x", "name": "m"}))
    bundle = dataclasses.replace(bench.BUNDLED["openafm-135m"], name="m")
    monkeypatch.setattr(type(bundle), "sidecar_path", property(lambda self: sidecar))
    monkeypatch.setitem(bench.BUNDLED, "m", bundle)
    results = tmp_path / "default_sampling.json"
    monkeypatch.setattr(bench, "RESULTS", results)
    validation = {"model": "m", "variants": {"openai": variant(30, 120, 0.03), "warm": variant(45, 120, 0.44)}}
    for held_warm, ok in ((variant(31, 118, 0.4), True), (variant(29, 118, 0.4), False)):
        heldout = {"model": "m", "variants": {"openai": variant(30, 118, 0.02), "warm": held_warm}}
        results.write_text(json.dumps({"validation": validation, "heldout": heldout}))
        if ok:
            entry = bench.write_sidecar("m")
            assert entry["settings"] == {"temperature": 0.7, "top_p": 0.9}
            assert json.loads(sidecar.read_text())["sampling"] == entry
        else:
            with pytest.raises(SystemExit, match="keeps OpenAI's defaults"):
                bench.write_sidecar("m")
