"""Config type -> model class, and the kind names native checkpoints record."""

from __future__ import annotations

from openafm.errors import CheckpointError
from openafm.models.decoder import CausalLM, Decoder
from openafm.models.plan import DecoderConfig
from openafm.models.pt_moe import PTMoE, PTMoEConfig

KINDS = {"decoder": (DecoderConfig, Decoder), "pt-moe": (PTMoEConfig, PTMoE)}
ModelConfig = DecoderConfig | PTMoEConfig


def build_model(config: ModelConfig, *, device=None) -> CausalLM:
    return KINDS[model_kind(config)][1](config, device=device)


def model_kind(config: ModelConfig) -> str:
    for kind, (config_cls, _) in KINDS.items():
        if type(config) is config_cls:
            return kind
    raise TypeError(f"not a model config: {type(config).__name__}; expected one of "
                    f"{[c.__name__ for c, _ in KINDS.values()]}")


def config_from_dict(kind: str, data: dict, source: str) -> ModelConfig:
    if kind not in KINDS:
        raise CheckpointError(f"{source}: model kind {kind!r} is unknown; known kinds: {sorted(KINDS)}")
    return KINDS[kind][0].from_dict(data)
