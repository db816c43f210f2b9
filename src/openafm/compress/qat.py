"""Quantization-aware training set-up (report §6): fake-quantized weights with learnable clipping.

`prepare_qat(model, spec)` registers a `FakeQuantize` parametrization (torch.nn.utils.parametrize) on
every target tensor (compress.targets): the module keeps its class and forward, `module.weight` now
returns W̃ computed from the fp32 latent weight (`module.parametrizations.weight.original`) and the
factor f (`module.parametrizations.weight[0].f`). A parametrization rather than a swapped module because
it also covers the MoE expert stacks and the embedding table, and keeps tied embeddings tied: the tied
head reads `embed.weight`, which is then the quantized table itself.

Choices (QATSpec defaults):
* weights: `bits`=2 on the BALANCED grid, one f per tensor (the report; fused qkv and gate_up are one
  tensor each, so one f each), f initialised by Newton-Raphson clipping (compress.clip_init);
* embedding table (and an untied lm_head): `embed_bits`=4, per-row max|W| and per-row f (rows of an
  embedding are looked up independently, and their norms vary widely); None leaves it in fp32;
* the f gradient: LSQ estimator with LSQ gradient scaling (compress.fake_quant documents the options);
* `kernel`=COMPILED: the fused torch.compile fake quant (same forward values as EAGER, several times faster).

Train with AdamW and weight decay 0 on the QAT parameters: `qat_param_groups(model, weight_decay=...)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn.utils import parametrize

from openafm.compress.clip_init import ClipInit, init_factor
from openafm.compress.fake_quant import FakeQuantize, FQKernel, GradScale, Granularity, ScaleGradient
from openafm.compress.levels import Levels, check_bits, level_set
from openafm.compress.quantized import QuantizedWeight
from openafm.compress.targets import Role, quant_targets


@dataclass(kw_only=True)
class QATSpec:
    bits: int = 2
    levels: Levels = Levels.BALANCED
    granularity: Granularity = Granularity.TENSOR
    embed_bits: int | None = 4
    embed_levels: Levels = Levels.BALANCED
    embed_granularity: Granularity = Granularity.CHANNEL
    init: ClipInit = ClipInit.NEWTON_RAPHSON
    scale_gradient: ScaleGradient = ScaleGradient.LSQ
    grad_scale: GradScale = GradScale.LSQ
    kernel: FQKernel = FQKernel.COMPILED
    skip: list[str] = field(default_factory=list)   # globs over tensor names, e.g. "layers.0.*"

    def __post_init__(self):
        check_bits(self.bits, "bits")
        if self.embed_bits is not None:
            check_bits(self.embed_bits, "embed_bits")
        self.levels, self.embed_levels = Levels(self.levels), Levels(self.embed_levels)
        self.granularity, self.embed_granularity = Granularity(self.granularity), Granularity(self.embed_granularity)
        self.init = ClipInit(self.init)
        self.scale_gradient, self.grad_scale = ScaleGradient(self.scale_gradient), GradScale(self.grad_scale)
        self.kernel = FQKernel(self.kernel)


def prepare_qat(model: nn.Module, spec: QATSpec | None = None) -> nn.Module:
    """Fake-quantize the model's weights in place (see the module docstring); returns the model.
    The latent weights and the f factors require grad; nothing else changes."""
    spec = spec or QATSpec()
    for t in quant_targets(model, spec.skip):
        if t.role is Role.EMBEDDING:
            if spec.embed_bits is None:
                continue
            levels, granularity = level_set(spec.embed_levels, spec.embed_bits), spec.embed_granularity
        else:
            levels, granularity = level_set(spec.levels, spec.bits), spec.granularity
        weight = getattr(t.module, t.attr)
        if weight.dtype != torch.float32:
            raise ValueError(f"{t.name} is {weight.dtype}; QAT keeps fp32 latent weights (load the model in fp32)")
        f0 = init_factor(weight, levels, granularity, spec.init)
        fq = FakeQuantize(levels, granularity, f0, scale_gradient=spec.scale_gradient, grad_scale=spec.grad_scale,
                          kernel=spec.kernel)
        parametrize.register_parametrization(t.module, t.attr, fq.to(weight.device))
        getattr(t.module.parametrizations, t.attr).original.requires_grad_(True)
    return model


def qat_parametrizations(model: nn.Module) -> list[tuple[str, nn.Module, str, FakeQuantize]]:
    """[(name, module, attr, FakeQuantize)] of a prepared model, in module order."""
    found = []
    for module_name, module in model.named_modules():
        if not parametrize.is_parametrized(module):
            continue
        for attr, plist in module.parametrizations.items():
            fqs = [p for p in plist if isinstance(p, FakeQuantize)]
            if len(fqs) != 1 or len(plist) != 1:
                raise ValueError(f"{module_name}.{attr} has parametrizations {[type(p).__name__ for p in plist]}; "
                                 f"expected exactly one FakeQuantize")
            found.append((f"{module_name}.{attr}" if module_name else attr, module, attr, fqs[0]))
    return found


def export_model(model: nn.Module) -> dict[str, QuantizedWeight]:
    """{tensor name: QuantizedWeight} of a prepared model; a MoE expert stack gives "name.e" per expert.
    dequantize() of each equals the fake-quantized forward weight bit for bit."""
    out = {}
    found = qat_parametrizations(model)
    if not found:
        raise ValueError("model has no fake-quantized weights; call prepare_qat first")
    for name, module, attr, fq in found:
        latent = getattr(module.parametrizations, attr).original
        exported = fq.export(latent)
        if latent.ndim == 2:
            out[name] = exported[0]
        else:
            out.update({f"{name}.{e}": q for e, q in enumerate(exported)})
    return out


def qat_param_groups(model: nn.Module, *, weight_decay: float) -> list[dict]:
    """AdamW parameter groups: the latent weights and f factors with weight decay 0 (decay would pull the
    latent weights and the clipping towards zero), every other trainable parameter with `weight_decay` (that group is left out when empty)."""
    found = qat_parametrizations(model)
    if not found:
        raise ValueError("model has no fake-quantized weights; call prepare_qat first")
    qat_ids = set()
    for _, module, attr, fq in found:
        qat_ids.add(id(getattr(module.parametrizations, attr).original))
        qat_ids.add(id(fq.f))
    params = [p for p in model.parameters() if p.requires_grad]
    qat = [p for p in params if id(p) in qat_ids]
    rest = [p for p in params if id(p) not in qat_ids]
    groups = [{"name": "qat", "params": qat, "weight_decay": 0.0},
              {"name": "other", "params": rest, "weight_decay": weight_decay}]
    return [g for g in groups if g["params"]]          # a frozen rest gives no "other" group
