"""Learning-rate schedules as kinds. factor(step) multiplies optimizer.lr; `step` counts completed optimizer
steps, so the first step uses factor(0). Warmup is linear: (step + 1) / warmup_steps.

    warmup-cosine: after warmup, min + (1 - min) * (1 + cos(pi * p)) / 2, p = progress 0..1 to the last step
    wsd:           after warmup, 1 until the last decay_steps, then linear from 1 to min at the last step
    constant:      after warmup, 1
"""

from __future__ import annotations

import math

from openafm.errors import ConfigError
from openafm.train.config import ScheduleConfig, ScheduleKind


class Schedule:
    def __init__(self, config: ScheduleConfig, total_steps: int, base_lr: float):
        if config.warmup_steps + config.decay_steps > total_steps:
            raise ConfigError(f"schedule: warmup_steps={config.warmup_steps} + decay_steps={config.decay_steps} "
                              f"exceed steps={total_steps}")
        if config.kind is not ScheduleKind.WSD and config.decay_steps:
            raise ConfigError(f"schedule.decay_steps={config.decay_steps} is only used by kind=wsd, "
                              f"not {config.kind.value}")
        self.config, self.total_steps, self.base_lr = config, total_steps, base_lr

    def factor(self, step: int) -> float:
        c, n = self.config, self.total_steps
        if step < c.warmup_steps:
            return (step + 1) / c.warmup_steps
        lo = c.min_lr_ratio
        if c.kind is ScheduleKind.CONSTANT:
            return 1.0
        if c.kind is ScheduleKind.WARMUP_COSINE:
            span = max(n - 1 - c.warmup_steps, 1)
            p = min((step - c.warmup_steps) / span, 1.0)
            return lo + (1 - lo) * (1 + math.cos(math.pi * p)) / 2
        if c.kind is ScheduleKind.WSD:
            decay_start = n - c.decay_steps
            if step < decay_start or c.decay_steps == 0:
                return 1.0
            p = (step - decay_start + 1) / c.decay_steps          # the last step reaches min
            return 1 - (1 - lo) * p
        raise ConfigError(f"unknown schedule kind {c.kind!r}; accepted: {[k.value for k in ScheduleKind]}")

    def lr(self, step: int) -> float:
        return self.base_lr * self.factor(step)

    def apply(self, optimizer, step: int) -> float:
        lr = self.lr(step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        return lr

    def state_dict(self) -> dict:
        """The schedule is a pure function of the step; its state is its definition (checked on resume)."""
        return {"kind": self.config.kind.value, "warmup_steps": self.config.warmup_steps,
                "decay_steps": self.config.decay_steps, "min_lr_ratio": self.config.min_lr_ratio,
                "total_steps": self.total_steps, "base_lr": self.base_lr}
