"""benchmarks/_common.settle: speed benchmarks wait for the 1-minute load average to fall below 1 (it lags a
finished run by a minute), up to --settle seconds, then start and record the load, warning when it is still high."""

from __future__ import annotations

import pytest

from bench_modules import load_benchmark


def fake_clock(monkeypatch, common, loads: list[float]) -> list[float]:
    """getloadavg returns `loads` in turn (the last one forever); sleep only records how long it was asked."""
    slept: list[float] = []
    seq = iter(loads)
    last = [loads[-1]]

    def getloadavg():
        last[0] = next(seq, last[0])
        return (last[0], 0.0, 0.0)
    monkeypatch.setattr(common.os, "getloadavg", getloadavg)
    monkeypatch.setattr(common.time, "sleep", slept.append)
    return slept


def test_waits_until_the_load_falls_below_one_and_returns_it(monkeypatch, capsys):
    common = load_benchmark("_common")
    slept = fake_clock(monkeypatch, common, [1.6, 1.3, 1.05, 0.8])
    assert common.settle(150, poll_s=5) == 0.8
    assert slept == [5, 5, 5]
    assert "waiting up to 150 s" in capsys.readouterr().err


def test_gives_up_after_the_wait_and_says_the_figures_are_taken_under_load(monkeypatch, capsys):
    common = load_benchmark("_common")
    slept = fake_clock(monkeypatch, common, [2.0])
    assert common.settle(12, poll_s=5) == 2.0
    assert slept == [5, 5, 2]
    assert "WARNING: starting at load average 2.00" in capsys.readouterr().err


def test_a_quiet_machine_or_no_wait_starts_at_once(monkeypatch, capsys):
    common = load_benchmark("_common")
    slept = fake_clock(monkeypatch, common, [0.4])
    assert common.settle(150) == 0.4 and slept == []
    slept = fake_clock(monkeypatch, common, [3.0])
    assert common.settle(0) == 3.0 and slept == []
    with pytest.raises(ValueError, match="--settle -1"):
        common.settle(-1)
