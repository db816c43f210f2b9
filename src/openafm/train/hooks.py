"""Trainer hooks: what a training job that is not plain pretraining changes about the trainer's loop, without a
private loop of its own (QAT, LoRA recovery).

    prepare_model(model) -> model       before wrapping for data parallelism and building the optimizer
                                        (e.g. prepare_qat: fake-quantize every weight; apply_lora)
    param_groups(model, optimizer cfg)  AdamW groups, or None for the trainer's default grouping
    after_step(trainer) -> metrics      after each optimizer step (e.g. an EMA update, a held-out eval);
                                        the dict is merged into that step's metrics line
    eval_weights(model)                 a context in which the model holds the weights to evaluate and
                                        export (e.g. the EMA averages); the trained values come back after
    state_dict() / load_state_dict()    saved in every training checkpoint, restored on resume

`TrainHooks` does nothing in each; subclass it and override what the job needs. A Trainer takes a list of
hooks: every hook prepares the model in order, at most one may give param groups, eval_weights nest.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch


class TrainHooks:
    name = "hooks"       # key of this hook's state in a checkpoint; unique among one trainer's hooks

    def prepare_model(self, model: torch.nn.Module) -> torch.nn.Module:
        return model

    def param_groups(self, model: torch.nn.Module, config) -> list[dict] | None:
        return None

    def after_step(self, trainer) -> dict[str, float]:
        return {}

    def eval_weights(self, model: torch.nn.Module):
        return contextlib.nullcontext()

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            raise ValueError(f"hook {self.name!r} keeps no state but the checkpoint holds {sorted(state)}")
