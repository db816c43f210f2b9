"""One autocast for every training step: float32 runs as it is, bfloat16-autocast runs matmuls in bfloat16, and on a
CPU without native bfloat16 (this project's AVX2 machine) the run is told once, with the setting to use."""

from __future__ import annotations

import warnings

import pytest
import torch

from openafm.train import precision
from openafm.train.config import Precision


def _matmul_dtype(kind) -> torch.dtype:
    a, b = torch.ones(4, 8), torch.ones(8, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with precision.autocast(kind, "cpu"):
            return (a @ b).dtype


def test_float32_runs_as_it_is_and_bf16_autocast_runs_matmuls_in_bfloat16():
    assert _matmul_dtype(Precision.FLOAT32) == torch.float32
    assert _matmul_dtype("bfloat16-autocast") == torch.bfloat16
    with pytest.raises(ValueError, match="'half'"):
        precision.autocast("half", "cpu")


def test_slow_bf16_follows_what_onednn_reports_and_never_flags_another_device():
    assert precision.slow_bf16(torch.device("cpu")) is (not torch.ops.mkldnn._is_mkldnn_bf16_supported())
    assert not precision.slow_bf16(torch.device("meta"))


def test_a_cpu_without_native_bfloat16_is_named_once_with_the_setting_to_use(monkeypatch):
    monkeypatch.setattr(precision, "slow_bf16", lambda device: True)
    precision._warn_once.cache_clear()
    with pytest.warns(RuntimeWarning, match=r"reference GEMM.*precision: float32") as caught:
        for _ in range(3):
            with precision.autocast(Precision.BF16_AUTOCAST, "cpu"):
                pass
    assert len([w for w in caught if issubclass(w.category, RuntimeWarning)]) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with precision.autocast(Precision.FLOAT32, "cpu"):       # float32 never warns
            pass
    precision._warn_once.cache_clear()
