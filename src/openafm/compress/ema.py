"""Exponential moving average of the trainable parameters (in a QAT model: the latent weights and the
f factors), used for evaluation (report §6):

    shadow <- decay · shadow + (1 - decay) · param        after every optimizer step (`update()`)

`with ema.swap_in(): evaluate(model)` puts the averages into the model and restores the trained values on
exit (also on an exception).
"""

from __future__ import annotations

import contextlib

import torch
from torch import nn


class EMA:
    def __init__(self, model: nn.Module, decay: float):
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"decay must be in [0, 1), got {decay}")
        self.decay = decay
        self.params = {name: p for name, p in model.named_parameters() if p.requires_grad}
        if not self.params:
            raise ValueError("model has no trainable parameters to average (prepare_qat makes the QAT ones trainable)")
        self.shadow = {name: p.detach().clone() for name, p in self.params.items()}
        self.updates = 0

    @torch.no_grad()
    def update(self) -> None:
        for name, p in self.params.items():
            self.shadow[name].lerp_(p.detach(), 1.0 - self.decay)   # s + (1-d)(p - s) = d·s + (1-d)·p
        self.updates += 1

    @contextlib.contextmanager
    def swap_in(self):
        """Model parameters hold the averages inside the block; the trained values come back after it."""
        saved = {name: p.detach().clone() for name, p in self.params.items()}
        with torch.no_grad():
            for name, p in self.params.items():
                p.copy_(self.shadow[name])
        try:
            yield self
        finally:
            with torch.no_grad():
                for name, p in self.params.items():
                    p.copy_(saved[name])

    def state_dict(self) -> dict:
        return {"decay": self.decay, "updates": self.updates, "shadow": {k: v.clone() for k, v in self.shadow.items()}}

    def load_state_dict(self, state: dict) -> None:
        missing = sorted(set(self.shadow) - set(state["shadow"]))
        extra = sorted(set(state["shadow"]) - set(self.shadow))
        if missing or extra:
            raise ValueError(f"EMA state does not match the model: missing {missing}, unexpected {extra}")
        self.decay, self.updates = state["decay"], state["updates"]
        with torch.no_grad():
            for k, v in state["shadow"].items():
                self.shadow[k].copy_(v)
