"""Schedules against their formulas; AdamW parameter groups; gradient clipping against a manual norm."""

import math

import pytest
import torch

from openafm.errors import ConfigError
from openafm.train.config import OptimizerConfig, ScheduleConfig, ScheduleKind
from openafm.train.optimizer import build_optimizer, clip_gradients, param_groups
from openafm.train.schedule import Schedule
from tiny import make_tiny


def test_warmup_cosine_values():
    s = Schedule(ScheduleConfig(kind=ScheduleKind.WARMUP_COSINE, warmup_steps=4, min_lr_ratio=0.1), 24, 1e-3)
    assert [s.lr(i) for i in range(4)] == pytest.approx([2.5e-4, 5e-4, 7.5e-4, 1e-3])
    for step in (4, 10, 17, 23):
        p = (step - 4) / 19
        assert s.lr(step) == pytest.approx(1e-3 * (0.1 + 0.9 * (1 + math.cos(math.pi * p)) / 2))
    assert s.lr(23) == pytest.approx(1e-4)


def test_wsd_values():
    s = Schedule(ScheduleConfig(kind=ScheduleKind.WSD, warmup_steps=2, decay_steps=4, min_lr_ratio=0.0), 10, 2.0)
    assert [s.lr(i) for i in range(10)] == pytest.approx([1, 2, 2, 2, 2, 2, 1.5, 1.0, 0.5, 0.0])


def test_schedule_rejects_decay_on_the_wrong_kind_and_too_long_phases():
    with pytest.raises(ConfigError, match="decay_steps=3 is only used by kind=wsd"):
        Schedule(ScheduleConfig(kind=ScheduleKind.CONSTANT, decay_steps=3), 10, 1.0)
    with pytest.raises(ConfigError, match="exceed steps=10"):
        Schedule(ScheduleConfig(kind=ScheduleKind.WSD, warmup_steps=6, decay_steps=6), 10, 1.0)


def test_no_weight_decay_on_norms_and_embeddings():
    model = make_tiny("smollm2-tiny")
    names = {id(p): n for n, p in model.named_parameters()}
    decay, no_decay = param_groups(model, OptimizerConfig(weight_decay=0.1))
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert {names[id(p)] for p in no_decay["params"]} == {n for n, p in model.named_parameters()
                                                          if "norm" in n or "embed" in n}
    assert all(p.ndim == 2 for p in decay["params"])
    opt = build_optimizer(model, OptimizerConfig(lr=1e-3, betas=[0.8, 0.9]))
    assert opt.param_groups[0]["betas"] == (0.8, 0.9)


def test_clip_gradients_reports_the_global_norm_and_scales_to_max():
    params = [torch.nn.Parameter(torch.zeros(3)), torch.nn.Parameter(torch.zeros(2, 2))]
    params[0].grad = torch.tensor([3.0, 0.0, 0.0])
    params[1].grad = torch.tensor([[0.0, 4.0], [0.0, 0.0]])
    assert clip_gradients(params, 1.0) == pytest.approx(5.0)
    after = math.sqrt(sum(float((p.grad ** 2).sum()) for p in params))
    assert after == pytest.approx(1.0, rel=1e-5)
    assert clip_gradients(params, None) == pytest.approx(1.0, rel=1e-5)
