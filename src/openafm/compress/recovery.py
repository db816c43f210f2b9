"""LoRA quality recovery (report §6): rank-r LoRA adapters on every linear layer of a frozen compressed base,
trained on the project's trainer (train/lora.py's LoRAHooks) with the base model's data recipe (the same text,
distilled from the unquantized model), saved as an adapter file tied to the compressed base's weights fingerprint.

    trainer, fingerprint = build_recovery_trainer(config, rank=16)     # config.model: the compressed base
    trainer.run()                                                        # (a native checkpoint: QAT's
    save_recovery_adapter(trainer, "recovery.safetensors", fingerprint)  #  OUT/model or an RTN model)

The compressed base is a plain model whose weights are the quantized values (compress.qat_train.bake /
an RTN-rounded model): its fake-quant is frozen, so only the adapter's A and B train. The adapter then runs
through `fm.SystemLanguageModel(adapter=fm.SystemLanguageModel.Adapter(path), model=BASE)`.
"""

from __future__ import annotations


from torch import nn

from openafm.checkpoint.fingerprint import weights_fingerprint
from openafm.checkpoint.load import load_model
from openafm.errors import ConfigError
from openafm.train.config import ObjectiveKind, TrainConfig
from openafm.train.hooks import TrainHooks
from openafm.train.kd import KDKind, KDObjective
from openafm.train.loop import Trainer
from openafm.train.lora import LoRAHooks, save_lora_adapter


def build_recovery_trainer(config: TrainConfig, *, rank: int, alpha: float | None = None, loader=None,
                           hooks: list[TrainHooks] | None = None, base: nn.Module | None = None,
                           init_factors: dict | None = None):
    """-> (Trainer, the base's weights fingerprint before LoRA). config.model is the compressed base
    (loaded unless `base` is given); config.objective must be kd from the unquantized teacher."""
    o = config.objective
    if o.kind is not ObjectiveKind.KD or not o.teacher or o.teacher == config.model:
        raise ConfigError(f"recovery distils the compressed base {config.model!r} from the unquantized model: "
                          f"objective.kind must be kd with another teacher, got kind={o.kind.value} "
                          f"teacher={o.teacher!r}")
    if base is None:
        base = load_model(config.model, seed=config.seed).model
    fingerprint = weights_fingerprint(base)
    teacher = load_model(o.teacher, seed=config.seed).model.to(config.device)
    objective = KDObjective(teacher, kind=KDKind(o.kd_kind), top_k=o.top_k, temperature=o.temperature,
                            kd_weight=o.kd_weight)
    trainer = Trainer(config, model=base, objective=objective, loader=loader,
                      hooks=[LoRAHooks(rank=rank, alpha=alpha, init_factors=init_factors), *(hooks or [])])
    return trainer, fingerprint

# A recovery adapter is a LoRA adapter for the compressed base: the trainer-agnostic writer serves both.
save_recovery_adapter = save_lora_adapter
