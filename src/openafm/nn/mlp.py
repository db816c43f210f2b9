"""The gated feed-forward: down(act(gate(x)) * up(x)), with gate and up fused into one matmul.

SiLU makes it SwiGLU (Llama, Qwen, Mistral, Phi-3, AFM); GELU with the tanh approximation makes it GeGLU (Gemma).
"""

from __future__ import annotations

import enum

import torch
from torch import nn
from torch.nn import functional as F

from openafm.nn.linear import Linear


class Activation(str, enum.Enum):
    SILU = "silu"                  # SwiGLU
    GELU_TANH = "gelu-tanh"        # GeGLU, gelu(x, approximate="tanh") (Hugging Face's gelu_pytorch_tanh)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(x) if self is Activation.SILU else F.gelu(x, approximate="tanh")


class SwiGLU(nn.Module):
    """The gated FFN (named for its default activation)."""

    def __init__(self, dim: int, hidden: int, device=None, activation: Activation = Activation.SILU):
        super().__init__()
        self.hidden, self.activation = hidden, Activation(activation)
        self.gate_up = Linear(dim, 2 * hidden, bias=False, device=device)  # rows [0, H): gate, [H, 2H): up
        self.down = Linear(hidden, dim, bias=False, device=device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [B, T, D] -> [B, T, D]
        gate, up = self.gate_up(x).split(self.hidden, dim=-1)
        return self.down(self.activation(gate) * up)
