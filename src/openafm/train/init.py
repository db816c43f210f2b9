"""Weight initialisation for training from scratch (the modules' own defaults — N(0, 1) embeddings tied to the
output head — give initial losses of ~50 nats).

    scaled-normal   every matrix N(0, std); the matrices that write into the residual stream (attention `out`,
                    FFN / expert `down`) N(0, std / sqrt(2 * n_layers)) (GPT-2); norm weights 1
    keep            the weights as loaded (a checkpoint, a GGUF file)
    auto            scaled-normal for a preset name, keep for a path
"""

from __future__ import annotations

import enum
import math

import torch

from openafm.models.presets import PRESETS


class InitKind(str, enum.Enum):
    AUTO = "auto"
    KEEP = "keep"
    SCALED_NORMAL = "scaled-normal"


RESIDUAL_WRITERS = ("attn.out.weight", "ffn.down.weight", "ffn.down")


@torch.no_grad()
def scaled_normal_(model: torch.nn.Module, std: float = 0.02) -> None:
    n_layers = model.kv_plan.n_layers
    for name, p in model.named_parameters():
        if p.ndim < 2:
            p.fill_(1.0)
        elif name.endswith(RESIDUAL_WRITERS):
            p.normal_(0.0, std / math.sqrt(2 * n_layers))
        else:
            p.normal_(0.0, std)


def resolve(kind: InitKind, model_name: str) -> InitKind:
    if kind is InitKind.AUTO:
        return InitKind.SCALED_NORMAL if model_name in PRESETS else InitKind.KEEP
    return kind
