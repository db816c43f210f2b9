"""Shared set-up of the QAT-training and recovery tests: a tiny model with O(1) logits, tiny configs."""

from __future__ import annotations

import torch
from tiny import make_tiny

from openafm.train.config import TrainConfig

PRESET = "afm-ondevice-tiny"


def small_logit_model(seed: int = 0):
    """make_tiny with the (tied) embedding scaled down: its logits are O(1), so the fp32 teacher's softmax is
    not one-hot and 2-bit quantization moves it measurably (KL well above 0)."""
    model = make_tiny(PRESET, seed=seed)
    with torch.no_grad():
        model.embed.weight.mul_(0.15)
    return model.train()


def qat_config(run_dir, **changes) -> TrainConfig:
    data = dict(model=PRESET, run_dir=str(run_dir), steps=12, batch_size=4, seq_len=32, peak_flops=1e10,
                progress=False, objective=dict(kind="kd", teacher=PRESET), checkpoint=dict(every=4, keep=3),
                optimizer=dict(lr=3e-4, weight_decay=0.1), schedule=dict(kind="constant"))
    data.update(changes)
    return TrainConfig.from_dict(data)
