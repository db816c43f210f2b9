"""benchmarks/_decode_measures.py, the non-timing pieces of benchmarks/decode.py: resident memory parsed from
/proc/self/status (checked against getrusage's peak), greedy-token agreement (against a naive loop), weight bytes per
decode step (against summing a tiny model's tensors by hand), which weight format a model holds, loading by
format when openafm.load does not take weights= yet, and the competing CPU-bound process."""

from __future__ import annotations

import resource
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from bench_modules import load_benchmark
from tiny import make_tiny

M = load_benchmark("_decode_measures")

STATUS = """Name:\tpython
Umask:\t0022
State:\tR (running)
VmPeak:\t 2000000 kB
VmHWM:\t  812344 kB
VmRSS:\t  700001 kB
Threads:\t3
voluntary_ctxt_switches:\t12
"""


def test_proc_status_lines_in_kB_become_bytes_and_others_are_left_out():
    status = M.parse_proc_status(STATUS)
    assert status == {"VmPeak": 2000000 * 1024, "VmHWM": 812344 * 1024, "VmRSS": 700001 * 1024}


def test_resident_peak_matches_getrusage():
    held = torch.ones(64 * 2**20 // 4)                       # 64 MiB touched, so the peak is not tiny
    now = M.resident_bytes()
    peak_rusage = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024     # Linux: kB
    assert held.sum().item() == held.numel()
    assert abs(now["hwm"] - peak_rusage) <= 0.02 * peak_rusage
    assert 64 * 2**20 < now["rss"] <= now["hwm"]
    assert now["anon"] > 64 * 2**20 and now["anon"] + now["file"] <= now["rss"]     # RssShmem is the rest


def _naive_agreement(a, b):
    n = max(len(a), len(b))
    same, first = 0, None
    for i in range(n):
        x = a[i] if i < len(a) else None
        y = b[i] if i < len(b) else None
        if x is not None and x == y:
            same += 1
        elif first is None:
            first = i
    return (same / n if n else 1.0), first


@pytest.mark.parametrize("a, b", [
    ([1, 2, 3], [1, 2, 3]), ([1, 2, 3], [1, 9, 3]), ([1, 2, 3], [4, 5, 6]), ([1, 2], [1, 2, 3]),
    ([], []), ([5], []), ([1, 2, 3, 4], [1, 2, 7, 4]),
])
def test_agreement_matches_a_naive_loop(a, b):
    got = M.agreement(a, b)
    assert (got.identical_fraction, got.first_divergence) == _naive_agreement(a, b)


def test_agreement_counts_same_tokens_after_a_divergence():
    got = M.agreement([1, 2, 3, 4], [1, 9, 3, 4])
    assert got.identical_fraction == 0.75 and got.first_divergence == 1


def test_bytes_per_token_reads_one_row_of_an_untied_embedding_and_all_of_a_tied_one():
    sizes = [M.TensorSize("embed.weight", 1000 * 64 * 4, 1000), M.TensorSize("layers.0.w", 64 * 64 * 4, 64),
             M.TensorSize("norm.weight", 64 * 4, 64)]
    assert M.bytes_per_token(sizes, tied_embedding=True) == 1000 * 64 * 4 + 64 * 64 * 4 + 64 * 4
    assert M.bytes_per_token(sizes, tied_embedding=False) == 64 * 4 + 64 * 64 * 4 + 64 * 4


def test_model_bytes_per_token_of_a_tiny_tied_model_is_every_parameter_once():
    model = make_tiny("smollm2-tiny")
    assert model.lm_head is None                               # SmolLM2 ties its head to the embedding
    by_hand = sum(p.numel() * p.element_size() for p in model.parameters())
    assert M.model_bytes_per_token(model) == by_hand
    assert M.weight_format(model) == "float32"
    assert M.weight_format(model.to(torch.bfloat16)) == "bfloat16"


class _Blocks(torch.nn.Module):
    """A stand-in for a native layer: one uint8 block buffer (18 bytes per 32 values, as Q8_0) and a norm."""

    def __init__(self):
        super().__init__()
        self.register_buffer("blocks", torch.zeros(64, 2 * 18, dtype=torch.uint8))
        self.norm = torch.nn.Parameter(torch.ones(64))
        self.lm_head = None


def test_a_native_model_counts_its_uint8_blocks_at_their_own_size():
    model = _Blocks()
    assert M.weight_format(model) == "native"
    assert M.model_bytes_per_token(model) == 64 * 36 + 64 * 4


def _load_without_weights(name, *, dtype="float32"):
    """An openafm.load that has no weights= (Python raises the TypeError itself), returning a tiny model."""
    return SimpleNamespace(model=make_tiny("smollm2-tiny").to(getattr(torch, dtype)))


def test_native_without_weights_keyword_raises_and_float_formats_go_through_dtype(monkeypatch):
    monkeypatch.setattr(M.openafm, "load", _load_without_weights)
    with pytest.raises(M.WeightsUnavailable, match="weights="):
        M.load(M.Weights.NATIVE)
    lm, how = M.load(M.Weights.BFLOAT16)
    assert M.weight_format(lm.model) == "bfloat16" and "dtype='bfloat16'" in how


def test_a_loader_typeerror_not_about_weights_is_not_swallowed(monkeypatch):
    def load(name, **kw):
        raise TypeError("unsupported operand type(s) for +: 'int' and 'str'")
    monkeypatch.setattr(M.openafm, "load", load)
    with pytest.raises(TypeError, match="unsupported operand"):
        M.load(M.Weights.FLOAT32)


def test_a_model_holding_another_format_than_asked_raises(monkeypatch):
    monkeypatch.setattr(M.openafm, "load", lambda name, *, weights: SimpleNamespace(model=make_tiny("smollm2-tiny")))
    with pytest.raises(RuntimeError, match="holds float32 weights, not the bfloat16"):
        M.load(M.Weights.BFLOAT16)


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()       # from the state field on


def _cpu_seconds(pid: int) -> float:
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / 100        # utime + stime, clock ticks (100 Hz on Linux)


@pytest.mark.parametrize("kind", list(M.Competitor))
def test_the_competing_process_burns_cpu_while_held_and_is_gone_after(kind):
    with M.competing_process(kind, settle_s=0.2) as pid:
        # However loaded the machine, a CPU-bound process is always R (on a core or waiting for one), never asleep,
        # and its CPU time keeps growing; how fast it grows depends on the load, so nothing here is timed.
        states = []
        for _ in range(20):
            states.append(_stat(pid)[0])
            time.sleep(0.01)
        assert set(states) == {"R"}, states
        before = _cpu_seconds(pid)
        while _cpu_seconds(pid) == before:
            time.sleep(0.01)
    assert not Path(f"/proc/{pid}").exists()


def test_both_native_kinds_expect_blocks_and_a_float_request_answered_with_blocks_raises(monkeypatch):
    monkeypatch.setattr(M.openafm, "load", lambda name, *, weights: SimpleNamespace(model=_Blocks()))
    for kind in (M.Weights.NATIVE, M.Weights.NATIVE_INT8):
        lm, how = M.load(kind)
        assert M.weight_format(lm.model) == "native" and f"weights={kind.value!r}" in how
    with pytest.raises(RuntimeError, match="holds native weights, not the float32"):
        M.load(M.Weights.FLOAT32)
