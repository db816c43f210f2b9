"""Plain per-output-channel round-to-nearest codes for the packed-runtime tests (the QAT worker's
quantizers produce the real ones; for packing, memory and speed any valid codes will do)."""

import torch


def rtn_codes(weight: torch.Tensor, bits: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """weight [out, in] -> (uint8 codes [out, in], scale [out], zero [out]) with W ~ scale * (codes - zero)."""
    levels = (1 << bits) - 1
    lo, hi = weight.min(1).values, weight.max(1).values                   # [out]
    scale = ((hi - lo) / levels).clamp_min(1e-8)
    zero = torch.round(-lo / scale)
    codes = torch.clamp(torch.round(weight / scale[:, None] + zero[:, None]), 0, levels).to(torch.uint8)
    return codes, scale.float(), zero.float()
