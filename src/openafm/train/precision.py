"""Where a training step's matmuls run in bfloat16: one autocast context for the trainer, RL and the reward model,
which says once per process when bfloat16 will be far slower than float32 on this machine.

    with autocast(Precision.BF16_AUTOCAST, device):      # or a null context for Precision.FLOAT32
        loss = objective(model, batch)

PyTorch runs CPU bfloat16 matmuls through oneDNN where the CPU has native bfloat16 (AVX512-BF16, AMX); elsewhere
(AVX2 machines, most AMD EPYC and older Intel parts) they go through its reference GEMM. On this project's 2-core AVX2
machine (benchmarks/bf16_autocast.py) a [512, 576] x [576, 1536] matmul took 69x as long in bfloat16 as in float32,
and one decoder layer of the 135M model forward and backward over an SFT step's 4 x 768 tokens 23x; a whole SFT step
of the default recipe had not finished after 6 minutes (float32: ~25 s). Nothing changes silently: the run keeps the
precision it was given, and a RuntimeWarning names the CPU, the cost and the setting to use.
"""

from __future__ import annotations

import contextlib
import functools
import warnings

import torch

from openafm.train.config import Precision


def slow_bf16(device: torch.device) -> bool:
    """Whether bfloat16 matmuls on `device` take the reference path: a CPU that oneDNN reports without bfloat16."""
    return device.type == "cpu" and not torch.ops.mkldnn._is_mkldnn_bf16_supported()


@functools.cache
def _warn_once(device_type: str) -> None:
    warnings.warn(f"precision=bfloat16-autocast on this {device_type} (PyTorch CPU capability "
                  f"{torch.backends.cpu.get_cpu_capability()}, no native bfloat16): its matmuls run through PyTorch's "
                  f"reference GEMM, measured 23-69x slower than float32 on an AVX2 machine; set precision: float32 "
                  f"(recipes, TrainConfig) or --precision float32 to train at float32 speed",
                  RuntimeWarning, stacklevel=3)


def autocast(precision: Precision, device: torch.device | str = "cpu"):
    """The context a step's forward runs under: bfloat16 autocast for BF16_AUTOCAST, nothing for FLOAT32."""
    precision, device = Precision(precision), torch.device(device)
    if precision is not Precision.BF16_AUTOCAST:
        return contextlib.nullcontext()
    if slow_bf16(device):
        _warn_once(device.type)
    return torch.autocast(device.type, dtype=torch.bfloat16)
