"""benchmarks/decode_depth.py's summary: medians per depth and engine, openafm over llama-bench, the slowdown from the
shallowest depth to the deepest; and its worker is run from the tree it names. No model runs here."""

from __future__ import annotations

import pytest

from bench_modules import load_benchmark


def test_summary_medians_ratios_and_slowdown():
    bench = load_benchmark("decode_depth")
    runs = {"llama_bench": [{"0": 100.0, "1024": 80.0}, {"0": 110.0, "1024": 70.0}, {"0": 90.0, "1024": 75.0}],
            "openafm": [{"0": 120.0, "1024": 60.0}, {"0": 100.0, "1024": 40.0}, {"0": 110.0, "1024": 50.0}]}
    out = bench.summarise(runs, [0, 1024])
    assert out["llama_bench"]["decode_tok_s"] == {"0": 100.0, "1024": 75.0}
    assert out["openafm"]["decode_tok_s"] == {"0": 110.0, "1024": 50.0}
    assert out["openafm"]["depth_slowdown"] == 2.2 and out["llama_bench"]["depth_slowdown"] == 1.33
    assert out["openafm_over_llama_bench"] == {"0": 1.1, "1024": 0.667}
    assert out["openafm"]["decode_tok_s_runs"]["1024"] == [60.0, 40.0, 50.0]


def test_a_worker_that_imported_another_tree_is_refused(monkeypatch, tmp_path):
    bench = load_benchmark("decode_depth")

    class Done:
        returncode, stderr = 0, ""
        stdout = '{"decode_tok_s": {"0": 1.0}, "step": "fused", "openafm": "/elsewhere/openafm"}'

    monkeypatch.setattr(bench.subprocess, "run", lambda *a, **k: Done())
    with pytest.raises(RuntimeError, match="not from"):
        bench.run_worker(tmp_path / "src", tmp_path / "m.gguf", [0], 4)
