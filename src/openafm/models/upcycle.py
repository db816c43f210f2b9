"""Sparse upcycling (report §4.3): a dense decoder becomes an MoE decoder computing the same function.

Every `every`-th layer's dense SwiGLU becomes `n_experts` experts, each an exact copy of that SwiGLU.
The MoE weights each token's top-k experts by their router probabilities renormalized to sum to 1, so
with identical experts the layer outputs sum_k w_k * FFN(x) = FFN(x) whatever the router says: the
upcycled model is the dense model at step 0 (to rounding). The router starts from small random weights
(std `router_std`), so tokens spread over experts and the copies can diverge once training starts; a
zero router would send every token to the same top-k experts (ties) and never break the symmetry.
"""

from __future__ import annotations

import dataclasses

import torch

from openafm.errors import ConfigError
from openafm.models.plan import DecoderConfig, FFNKind, MoESpec


def upcycle_config(config: DecoderConfig, *, n_experts: int = 64, every: int = 2, top_k: int = 2) -> DecoderConfig:
    """Layers every-1, 2*every-1, ... (every=2: the 2nd, 4th, ... layer) get MoE FFNs of n_experts copies."""
    if not isinstance(config, DecoderConfig):
        raise ConfigError(f"upcycling takes a dense decoder config, got {type(config).__name__}")
    if every < 1:
        raise ConfigError(f"every={every} must be at least 1")
    already = [i for i, s in enumerate(config.layers) if s.ffn is FFNKind.MOE]
    if already:
        raise ConfigError(f"layers {already} already have MoE FFNs; upcycling takes a dense model")
    moe = MoESpec(n_experts=n_experts, top_k=top_k, hidden=config.ffn_hidden)
    layers = [dataclasses.replace(s, ffn=FFNKind.MOE) if i % every == every - 1 else s
              for i, s in enumerate(config.layers)]
    return dataclasses.replace(config, layers=layers, moe=moe)


def upcycle_state_dict(dense: dict[str, torch.Tensor], config: DecoderConfig, *, seed: int = 0,
                       router_std: float = 0.02) -> dict[str, torch.Tensor]:
    """The dense state dict -> the upcycled one for `config` (the output of upcycle_config)."""
    generator = torch.Generator().manual_seed(seed)
    out = dict(dense)
    for i, spec in enumerate(config.layers):
        if spec.ffn is not FFNKind.MOE:
            continue
        p = f"layers.{i}.ffn."
        gate_up, down = out.pop(p + "gate_up.weight"), out.pop(p + "down.weight")    # [2H, D], [D, H]
        e = config.moe.n_experts
        out[p + "gate_up"] = gate_up.unsqueeze(0).repeat(e, 1, 1).clone()           # [E, 2H, D]
        out[p + "down"] = down.unsqueeze(0).repeat(e, 1, 1).clone()                 # [E, D, H]
        router = torch.randn(e, config.dim, generator=generator) * router_std
        out[p + "router.weight"] = router.to(gate_up.dtype)
    return out
