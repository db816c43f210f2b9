"""benchmarks/matvec.py's summary of interleaved runs: medians per version, Gw/s from the weight count, the speedup as
the earlier revision's median seconds over this tree's, and same_output only when the checksums are equal."""

from __future__ import annotations

from bench_modules import load_benchmark


def run(seconds: float, checksum: float) -> dict:
    return {"Q4_1/float32/rows1": {"s": seconds, "weights": 2_000_000, "checksum": checksum}}


def test_speedup_is_against_over_this_and_same_output_compares_checksums():
    matvec = load_benchmark("matvec")
    table = matvec.summarize({"this": [run(0.001, 1.5), run(0.003, 1.5), run(0.002, 1.5)],
                              "against": [run(0.003, 1.5), run(0.004, 1.5), run(0.002, 1.5)]})
    row = table["Q4_1/float32/rows1"]
    assert row["this"] == {"ms": 2.0, "gw_s": 1.0}                 # median 0.002 s; 2e6 weights / 0.002 s
    assert row["against"] == {"ms": 3.0, "gw_s": 0.67}
    assert row["speedup"] == 1.5 and row["same_output"] is True
    changed = matvec.summarize({"this": [run(0.001, 1.5)], "against": [run(0.001, 1.5000001)]})
    assert changed["Q4_1/float32/rows1"]["same_output"] is False


def test_without_a_revision_there_is_no_speedup_column():
    row = load_benchmark("matvec").summarize({"this": [run(0.004, 2.0)]})["Q4_1/float32/rows1"]
    assert set(row) == {"this"} and row["this"]["gw_s"] == 0.5
