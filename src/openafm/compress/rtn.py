"""Round-to-nearest (RTN) baselines on the same level sets as QAT: no training, one rounding.

`rtn_quantize` quantizes one matrix with f = 1 (ClipInit.NONE: the top level at max|W|) or the
Newton-Raphson clip (ClipInit.NEWTON_RAPHSON), per tensor or per output channel.
`quantize_model_rtn` replaces the target weights of a model (compress.targets) in place by their
dequantized values, for perplexity comparisons against the fp32 model and QAT.
"""

from __future__ import annotations

import torch
from torch import nn

from openafm.compress.clip_init import ClipInit, init_factor
from openafm.compress.fake_quant import Granularity, quantize
from openafm.compress.levels import Levels, check_bits, level_set
from openafm.compress.quantized import QuantizedWeight
from openafm.compress.targets import Role, quant_targets


def rtn_quantize(weight: torch.Tensor, *, bits: int, levels: Levels = Levels.BALANCED,
                 granularity: Granularity = Granularity.TENSOR, clip: ClipInit = ClipInit.NONE) -> QuantizedWeight:
    """weight [out, in] -> QuantizedWeight by round-to-nearest."""
    ls = level_set(levels, bits)
    granularity = Granularity(granularity)
    return quantize(weight, init_factor(weight, ls, granularity, clip), ls, granularity)


@torch.no_grad()
def quantize_model_rtn(model: nn.Module, *, bits: int, levels: Levels = Levels.BALANCED,
                       granularity: Granularity = Granularity.TENSOR, clip: ClipInit = ClipInit.NONE,
                       embed_bits: int | None = None, embed_granularity: Granularity = Granularity.CHANNEL,
                       skip: list[str] = ()) -> dict[str, QuantizedWeight]:
    """Overwrite every WEIGHT-role tensor with its `bits` RTN dequantization, and the EMBEDDING-role ones with
    their `embed_bits` one (None: left as they are). -> {name: QuantizedWeight} (MoE experts as "name.e")."""
    check_bits(bits)
    if embed_bits is not None:
        check_bits(embed_bits, "embed_bits")
    out = {}
    for t in quant_targets(model, list(skip)):
        b, g = (bits, granularity) if t.role is Role.WEIGHT else (embed_bits, embed_granularity)
        if b is None:
            continue
        weight = getattr(t.module, t.attr)                                    # [out, in] or [E, out, in]
        mats = weight.reshape(-1, *weight.shape[-2:])
        qws = [rtn_quantize(w, bits=b, levels=levels, granularity=g, clip=clip) for w in mats]
        weight.copy_(torch.stack([q.dequantize() for q in qws]).reshape(weight.shape).to(weight.dtype))
        if weight.ndim == 2:
            out[t.name] = qws[0]
        else:
            out.update({f"{t.name}.{e}": q for e, q in enumerate(qws)})
    return out
