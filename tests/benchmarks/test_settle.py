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


@pytest.mark.parametrize("loads, wait_s, started_at, slept, said", [
    ([1.6, 1.3, 1.05, 0.8], 150, 0.8, [5, 5, 5], "waiting up to 150 s"),           # it falls below one: start
    ([2.0], 12, 2.0, [5, 5, 2], "WARNING: starting at load average 2.00"),          # it does not: start, warned
], ids=["waits-until-quiet", "gives-up-and-warns"])
def test_waits_for_the_load_to_fall_below_one_at_most_the_given_seconds(monkeypatch, capsys, loads, wait_s,
                                                                         started_at, slept, said):
    common = load_benchmark("_common")
    asked = fake_clock(monkeypatch, common, loads)
    assert common.settle(wait_s, poll_s=5) == started_at
    assert asked == slept
    assert said in capsys.readouterr().err


def test_a_quiet_machine_or_no_wait_starts_at_once(monkeypatch, capsys):
    common = load_benchmark("_common")
    slept = fake_clock(monkeypatch, common, [0.4])
    assert common.settle(150) == 0.4 and slept == []
    slept = fake_clock(monkeypatch, common, [3.0])
    assert common.settle(0) == 3.0 and slept == []
    with pytest.raises(ValueError, match="--settle -1"):
        common.settle(-1)
