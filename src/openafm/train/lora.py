"""LoRAHooks: train rank-r LoRA adapters on a frozen base with the trainer (report §5 task adapters, §6 quality
recovery). The hook wraps the target linear layers in LoRA (openafm.nn.lora: everything else frozen) and gives
the LoRA factors one AdamW group with weight decay 0.

    trainer = Trainer(config, model=base, loader=loader, hooks=[LoRAHooks(rank=16)])

It is used by guided-generation SFT (train/sft.py, `openafm sft`) and by quality recovery (compress/recovery.py).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from openafm.checkpoint.adapter import save_adapter
from openafm.errors import ConfigError
from openafm.nn.lora import DEFAULT_TARGETS, apply_lora, load_lora_state_dict, lora_layers
from openafm.train.hooks import TrainHooks
from openafm.train.parallel import unwrap


class LoRAHooks(TrainHooks):
    """Wrap the targets in LoRA (freezing everything else); the LoRA factors get weight decay 0."""
    name = "lora"

    def __init__(self, *, rank: int, alpha: float | None = None, targets=DEFAULT_TARGETS, init_factors=None,
                 init_state: dict[str, torch.Tensor] | None = None):
        """init_factors: {layer name: factors with .rank, .a [r, in], .b [out, r]} to start those adapters from
        (compress.svd_pullout's LoraFactors: the base then holds only the residual, and scale · B A starts equal
        to the pulled-out B A). init_state: an adapter's tensors ({"<layer>.lora_A", "<layer>.lora_B"}, every
        adapted layer) to continue training from, as written by save_lora_adapter."""
        if rank < 1:
            raise ConfigError(f"LoRA rank={rank} must be >= 1")
        if init_factors and init_state:
            raise ConfigError("LoRAHooks starts from init_factors or from init_state, not both")
        self.rank, self.alpha, self.targets = rank, float(alpha if alpha is not None else 2 * rank), tuple(targets)
        self.init_factors = dict(init_factors or {})
        self.init_state = init_state
        self.wrapped: list[str] = []

    def prepare_model(self, model: nn.Module) -> nn.Module:
        self.wrapped = apply_lora(model, rank=self.rank, alpha=self.alpha, targets=self.targets)
        if self.init_state is not None:
            load_lora_state_dict(model, self.init_state)
        layers = lora_layers(model)
        unknown = sorted(set(self.init_factors) - set(layers))
        if unknown:
            raise ConfigError(f"init_factors name layers without an adapter: {unknown[:4]} "
                              f"(adapted layers: {sorted(layers)[:4]}...)")
        with torch.no_grad():
            for name, f in self.init_factors.items():
                layer = layers[name]
                if f.rank != self.rank:
                    raise ConfigError(f"init_factors[{name!r}] has rank {f.rank}; the adapters have rank {self.rank}")
                layer.lora_A.copy_(f.a)
                layer.lora_B.copy_(f.b / layer.scale)          # scale · B A = the pulled-out product
        return model

    def param_groups(self, model, config) -> list[dict]:
        params = [p for p in model.parameters() if p.requires_grad]
        return [{"name": "lora", "params": params, "weight_decay": 0.0}]


def save_lora_adapter(trainer, path: str | Path, base_fingerprint: str) -> Path:
    """Write a LoRAHooks trainer's adapters (its eval weights) as an adapter file for its base
    (checkpoint/adapter.py), recording the base's fingerprint taken before LoRA was applied."""
    with trainer.eval_model() as model:
        return save_adapter(path, unwrap(model), base_name=trainer.config.model, base_fingerprint=base_fingerprint)
