"""QAT on the project's trainer (report §6): fake-quantized weights with learnable clipping factors, distilled
from the unquantized model, AdamW with weight decay 0 on the QAT parameters, and an EMA of the weights used
for evaluation and export.

    trainer = build_qat_trainer(config, spec=QATSpec(bits=2), ema_decay=0.99)   # config.model: the fp32 model
    trainer.run()
    save_qat_outputs(trainer, "out/")     # out/model/ (fake-quant baked in), out/quantized.safetensors,
                                          # out/packed/ (packed codes; openafm.load runs it)

`QATHooks` is the trainer hook: prepare_qat on the model, `qat_param_groups` for the optimizer, an EMA
update after each optimizer step, the EMA weights swapped in for eval (Trainer.eval_model) and export, and the
EMA state kept in every checkpoint (a resumed run continues it exactly).

EMA warm-up: the decay used at update n is min(ema_decay, (1 + n) / (10 + n)), so a short run's average is
not dominated by the initial weights (the num_updates rule of TensorFlow's ExponentialMovingAverage).
"""

from __future__ import annotations

import contextlib
import copy
from pathlib import Path

import torch
from torch import nn

from openafm.checkpoint.compressed import save_compressed_checkpoint
from openafm.checkpoint.fingerprint import weights_fingerprint
from openafm.checkpoint.load import build_with_weights, load_model
from openafm.checkpoint.native import save_checkpoint
from openafm.compress.ema import EMA
from openafm.compress.qat import QATSpec, export_model, prepare_qat, qat_param_groups, qat_parametrizations
from openafm.compress.quantized_io import save_quantized
from openafm.errors import ConfigError
from openafm.train.config import ObjectiveKind, TrainConfig
from openafm.train.hooks import TrainHooks
from openafm.train.kd import KDKind, KDObjective
from openafm.train.loop import Trainer

MODEL_DIR, QUANTIZED_FILE, PACKED_DIR = "model", "quantized.safetensors", "packed"


class QATHooks(TrainHooks):
    name = "qat"

    def __init__(self, spec: QATSpec, *, ema_decay: float | None):
        """ema_decay None: no EMA (eval and export use the trained weights)."""
        if ema_decay is not None and not 0.0 < ema_decay < 1.0:
            raise ConfigError(f"ema_decay={ema_decay} must be in (0, 1), or None for no EMA")
        self.spec, self.ema_decay = spec, ema_decay
        self.ema: EMA | None = None

    def prepare_model(self, model: nn.Module) -> nn.Module:
        if qat_parametrizations(model):
            raise ValueError("the model is already fake-quantized; QATHooks prepares a plain fp32 model")
        prepare_qat(model, self.spec)
        if self.ema_decay is not None:
            self.ema = EMA(model, self.ema_decay)
        return model

    def param_groups(self, model, config) -> list[dict]:
        return qat_param_groups(model, weight_decay=config.weight_decay)

    def after_step(self, trainer) -> dict[str, float]:
        metrics = {}
        if self.ema is not None:
            n = self.ema.updates
            self.ema.decay = min(self.ema_decay, (1 + n) / (10 + n))
            self.ema.update()
            metrics["ema_decay"] = self.ema.decay
        fs = [fq.f.detach() for _, _, _, fq in qat_parametrizations(trainer.model)]
        metrics["f_mean"] = float(torch.cat([f.flatten() for f in fs]).mean())
        return metrics

    def eval_weights(self, model):
        return self.ema.swap_in() if self.ema is not None else contextlib.nullcontext()

    def state_dict(self) -> dict:
        return self.ema.state_dict() if self.ema is not None else {}

    def load_state_dict(self, state: dict) -> None:
        if self.ema is None:
            if state:
                raise ValueError("the checkpoint holds EMA state but this run has no EMA (ema_decay None)")
            return
        self.ema.load_state_dict(state)


def build_qat_trainer(config: TrainConfig, *, spec: QATSpec, ema_decay: float | None, loader=None,
                      hooks: list[TrainHooks] | None = None, model: nn.Module | None = None):
    """A Trainer that QATs config.model (an fp32 model, loaded unless `model` is given) distilled from an
    unquantized copy of itself. config.objective must be kd (its teacher: the same model)."""
    o = config.objective
    if o.kind is not ObjectiveKind.KD or o.teacher != config.model:
        raise ConfigError(f"QAT distils from the unquantized model: objective.kind must be kd with teacher "
                          f"{config.model!r}, got kind={o.kind.value} teacher={o.teacher!r}")
    if model is None:
        model = load_model(config.model, seed=config.seed).model
    model = model.float().requires_grad_(True)
    teacher = copy.deepcopy(model).to(config.device).requires_grad_(False)
    objective = KDObjective(teacher, kind=KDKind(o.kd_kind), top_k=o.top_k, temperature=o.temperature,
                            kd_weight=o.kd_weight)
    return Trainer(config, model=model, objective=objective, loader=loader,
                   hooks=[QATHooks(spec, ema_decay=ema_decay), *(hooks or [])])


@torch.no_grad()
def baked_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The state dict of the plain model whose weights are the quantized values W̃ of a fake-quantized model
    (its forward equals the QAT forward): the frozen compressed base that LoRA recovery and the runtime read.
    (Not remove_parametrizations on a deepcopy: the copy shares the parametrized class, and removing the
    last parametrization deletes the property from that class, breaking the original.)"""
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}   # copies: eval weights get swapped back
    for name, module, attr, _ in qat_parametrizations(model):
        prefix = name[: -len(attr)]                          # "layers.0.attn.qkv." (or "" at the root)
        for key in [k for k in state if k.startswith(f"{prefix}parametrizations.{attr}.")]:
            del state[key]
        state[name] = getattr(module, attr).detach().clone()
    return state


def save_qat_outputs(trainer, out_dir: str | Path, *, tokenizer=None, info: dict | None = None) -> dict[str, Path]:
    """Write, from the eval weights (EMA if any): OUT/model/ — a native checkpoint of the baked model
    (openafm.load reads it), OUT/quantized.safetensors — export_model's QuantizedWeights (quantized_io), and
    OUT/packed/ — a compressed checkpoint (checkpoint.compressed: four 2-bit codes per byte, two 4-bit codes
    per byte) that openafm.load runs from the packed weights, its base hash that of the model QAT started
    from. A model with MoE expert stacks gets no packed/ (the packed runtime has Linear and Embedding
    layers only); the returned dict then has no "packed"."""
    out = Path(out_dir)
    info = {"source_model": trainer.config.model, "steps": trainer.step, **(info or {})}
    with trainer.eval_model() as model:
        quantized = export_model(model)
        plain = {k: v.cpu() for k, v in baked_state_dict(model).items()}
    save_checkpoint(out / MODEL_DIR, trainer.model_config, plain, tokenizer, extra={"qat": info})
    save_quantized(out / QUANTIZED_FILE, quantized, info)
    written = {"model": out / MODEL_DIR, "quantized": out / QUANTIZED_FILE}
    if all(name in plain for name in quantized):
        base_hash = weights_fingerprint(trainer.objective.teacher)     # the unquantized model QAT started from
        baked = build_with_weights(trainer.model_config, plain, str(out / MODEL_DIR))
        written["packed"] = save_compressed_checkpoint(out / PACKED_DIR, baked, quantized, tokenizer=tokenizer,
                                                       base_sha256=base_hash)
    return written
