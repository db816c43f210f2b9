"""SVD pull-out before compression (report §6, PiSSA-like): the top-r singular directions of W go into a
LoRA adapter, only the residual is block-compressed, and the adapter is later trained to recover quality.

    W = U S V^T,   B = U_r sqrt(S_r)  [out, r],   A = sqrt(S_r) V_r^T  [r, in]
    R = W - B A    (compressed),      W~ = B A + decode(R)

The adapter is stored in fp16 (its bits count in `CompressedSize.adapter_bits`); `pull_out` rounds B and A
to fp16 before forming R, so the residual is taken against exactly the adapter that is stored.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

ADAPTER_BITS = 16   # fp16 factors


@dataclass
class LoraFactors:
    b: torch.Tensor   # [out, r]  (fp16 values, held as float32)
    a: torch.Tensor   # [r, in]

    @property
    def rank(self) -> int:
        return self.b.shape[1]

    def product(self) -> torch.Tensor:
        """B A [out, in] float32."""
        return self.b @ self.a

    def bits(self) -> int:
        return ADAPTER_BITS * (self.b.numel() + self.a.numel())


@dataclass
class PullOut:
    adapter: LoraFactors
    residual: torch.Tensor        # [out, in] = W - B A
    singular_values: torch.Tensor  # [min(out, in)] all of W's, descending


def pull_out(weight: torch.Tensor, rank: int) -> PullOut:
    """Top-``rank`` singular triplets of W [out, in] into LoRA factors; the rest is the residual."""
    if weight.ndim != 2:
        raise ValueError(f"pull_out takes a 2-D weight [out, in], got shape {tuple(weight.shape)}")
    full = min(weight.shape)
    if not 1 <= rank <= full:
        raise ValueError(f"rank must be in [1, {full}] for a weight of shape {tuple(weight.shape)}, got {rank}")
    w = weight.detach().to(torch.float64)
    u, s, vh = torch.linalg.svd(w, full_matrices=False)          # [out, k], [k], [k, in]
    root = s[:rank].sqrt()
    b = (u[:, :rank] * root).to(torch.float16).float()            # [out, r]
    a = (root[:, None] * vh[:rank]).to(torch.float16).float()     # [r, in]
    residual = (w - b.double() @ a.double()).float()
    return PullOut(adapter=LoraFactors(b=b, a=a), residual=residual, singular_values=s.float())
