"""Mixture-of-experts feed-forward (report §2.2, server model): a top-k softmax router over SwiGLU experts,
dropless (no capacity factor: every token reaches all k of its experts, however unbalanced the load).

Grouped computation: the T*k (token, expert) assignments are sorted by expert, so each expert's tokens form
one contiguous slice, and each expert runs one matmul over its slice. Two kernels do that:

- `grouped_mm`: one call to torch's grouped matmul (`F.grouped_mm` / `torch._grouped_mm`) with the slice
  ends as offsets; used only where `grouped_mm_unsupported` finds this build supports it (see there);
- `segment_loop`: a Python loop over the experts that have tokens, one `F.linear` per slice.

Both give the same numbers (same per-slice matmuls); `MoE.kernel` says which one runs.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from openafm.errors import ConfigError
from openafm.nn.linear import Linear
from openafm.nn.mlp import SwiGLU


class Routing(str, enum.Enum):
    """How the router's softmax over all experts becomes the weights of the top k."""

    RENORMALIZED = "renormalized"   # the k probabilities rescaled to sum to 1 (AFM, Mixtral, Qwen3-MoE)
    RAW = "raw"                     # the k probabilities as they are (Qwen1.5/Qwen2-MoE: norm_topk_prob false)


class MoEKernel(enum.StrEnum):
    GROUPED_MM = "grouped_mm"
    SEGMENT_LOOP = "segment_loop"


# Where this torch's grouped matmul runs, established from torch 2.13's source and a probe on this build:
# - CPU: `_grouped_mm` is registered CompositeExplicitAutograd (`torch._C._dispatch_dump("aten::_grouped_mm")`);
#   its body (ATen/native/Blas.cpp -> GroupedMMUtils.h `_grouped_mm_fallback`) is a C++ loop of `mm_out` per
#   group, accepting float32, bfloat16 and float16 (float64 is rejected: "Expected mat_a to be Float32,
#   BFloat16 or Float16"). Forward and backward were checked against per-slice matmuls, empty groups included.
# - CUDA: documented (F.grouped_mm's docstring) for bfloat16 on compute capability >= 8.0.
# - Every operand must have 16-byte aligned strides ("strides should be multiple of 16 bytes"): the backward
#   feeds [rows, dim] and [rows, 2*hidden] gradients back in, so dim and hidden must be multiples of
#   16 / itemsize. The meta kernel (torch.compile, fake tensors) accepts bfloat16 only: meta is not listed.
GROUPED_MM_DTYPES: dict[str, tuple[torch.dtype, ...]] = {
    "cpu": (torch.float32, torch.bfloat16, torch.float16),
    "cuda": (torch.bfloat16,),
}
GROUPED_MM_MIN_CUDA_CAPABILITY = (8, 0)


def _grouped_mm_op():
    """The public F.grouped_mm where this torch has it, else torch._grouped_mm, else None."""
    return getattr(F, "grouped_mm", None) or getattr(torch, "_grouped_mm", None)


def grouped_mm_unsupported(device: torch.device, dtype: torch.dtype, dim: int, hidden: int) -> str | None:
    """Why the grouped_mm kernel cannot run experts of this shape on this device and dtype; None if it can."""
    if _grouped_mm_op() is None:
        return f"torch {torch.__version__} has no grouped_mm op"
    supported = GROUPED_MM_DTYPES.get(device.type)
    if supported is None:
        return f"grouped_mm is not supported on device {device.type!r} (supported: {', '.join(GROUPED_MM_DTYPES)})"
    if dtype not in supported:
        return (f"grouped_mm on {device.type} does not support dtype={dtype} "
                f"(supported: {', '.join(str(d) for d in supported)})")
    if device.type == "cuda":
        capability = torch.cuda.get_device_capability(device)
        if capability < GROUPED_MM_MIN_CUDA_CAPABILITY:
            return f"grouped_mm needs CUDA compute capability >= 8.0, device has {capability[0]}.{capability[1]}"
    align = 16 // dtype.itemsize
    if dim % align or hidden % align:
        return f"grouped_mm needs dim and hidden to be multiples of {align} for {dtype}, got dim={dim} hidden={hidden}"
    return None


class StoredExpert(nn.Module):
    """One expert whose matrices are held in another form (a GGUF file's blocks: nn.block_linear), as modules
    computing x W^T: `gate_up` [2H rows] and `down` [D rows]."""

    def __init__(self, gate_up: nn.Module, down: nn.Module):
        super().__init__()
        self.gate_up, self.down = gate_up, down


@dataclass(frozen=True)
class MoEStats:
    """Routing statistics of the last forward. The losses are differentiable (they reach the router)."""

    tokens_per_expert: torch.Tensor  # [E] int64: assignments per expert (sums to T*k)
    aux_loss: torch.Tensor  # []: load-balancing loss, E * sum_e f_e * P_e
    z_loss: torch.Tensor  # []: mean_t logsumexp(logits_t)^2


class MoE(nn.Module):
    """Top-k routed SwiGLU experts. `router` holds [E, D]; `gate_up` [E, 2H, D] (rows [0, H) gate, [H, 2H) up,
    per expert the layout of SwiGLU.gate_up.weight); `down` [E, D, H] (per expert SwiGLU.down.weight).

    Routing: p = softmax(router(x)) in float32, the k largest p_e taken and renormalised to sum to 1, so that
    experts that are copies of one SwiGLU compute exactly that SwiGLU (sparse upcycling).

    After each forward `last_stats` holds, over the N = B*T tokens:
      aux_loss = E * sum_e f_e * P_e   (Switch Transformer load balancing; 1.0 when perfectly balanced)
        f_e = (assignments to expert e) / (N * k)   counts, no gradient
        P_e = mean over tokens of p_e                 gradient flows to the router
      z_loss = mean over tokens of logsumexp_e(logits)^2   (ST-MoE router z-loss)
    Neither is added to the output; the trainer reads and weights them.

    kernel: None picks grouped_mm where supported (for the parameters' device and dtype) else segment_loop;
    naming one forces it, and a forced kernel that cannot run raises ConfigError.
    """

    def __init__(self, dim: int, hidden: int, n_experts: int, top_k: int, *, device=None,
                 kernel: MoEKernel | str | None = None, routing: Routing = Routing.RENORMALIZED,
                 shared_hidden: int | None = None):
        super().__init__()
        if dim <= 0 or hidden <= 0:
            raise ConfigError(f"MoE needs dim > 0 and hidden > 0, got dim={dim} hidden={hidden}")
        if n_experts < 1:
            raise ConfigError(f"MoE needs n_experts >= 1, got n_experts={n_experts}")
        if not 1 <= top_k <= n_experts:
            raise ConfigError(f"MoE needs 1 <= top_k <= n_experts, got top_k={top_k} n_experts={n_experts}")
        self.dim, self.hidden, self.n_experts, self.top_k = dim, hidden, n_experts, top_k
        self.routing = Routing(routing)
        self.router = Linear(dim, n_experts, bias=False, device=device)
        # Qwen2-MoE's shared expert: every token also goes through one SwiGLU, weighted by sigmoid(gate(x)).
        self.shared = None if shared_hidden is None else SwiGLU(dim, shared_hidden, device=device)
        self.shared_gate = None if shared_hidden is None else Linear(dim, 1, bias=False, device=device)
        self.gate_up = nn.Parameter(torch.empty(n_experts, 2 * hidden, dim, device=device))  # [E, 2H, D]
        self.down = nn.Parameter(torch.empty(n_experts, dim, hidden, device=device))  # [E, D, H]
        self.reset_parameters()
        self.stored: nn.ModuleList | None = None      # store_experts: the experts as modules
        self._forced: MoEKernel | None = None
        self.kernel = kernel
        self.last_stats: MoEStats | None = None

    def reset_parameters(self) -> None:
        """nn.Linear's init per expert: kaiming_uniform(a=sqrt(5)) is uniform(+-1/sqrt(fan_in))."""
        with torch.no_grad():
            self.gate_up.uniform_(-1 / math.sqrt(self.dim), 1 / math.sqrt(self.dim))
            self.down.uniform_(-1 / math.sqrt(self.hidden), 1 / math.sqrt(self.hidden))

    # ---- kernel choice ---------------------------------------------------------------------------------

    @property
    def kernel(self) -> MoEKernel:
        """The kernel a forward runs now, for the parameters' current device and dtype."""
        if self._forced is not None:
            return self._forced
        if self._grouped_mm_unsupported() is None:
            return MoEKernel.GROUPED_MM
        return MoEKernel.SEGMENT_LOOP

    @kernel.setter
    def kernel(self, kernel: MoEKernel | str | None) -> None:
        if kernel is None:
            self._forced = None
            return
        try:
            forced = MoEKernel(kernel)
        except ValueError:
            raise ConfigError(f"unknown MoE kernel={kernel!r}; accepted: "
                              f"{', '.join(k.value for k in MoEKernel)} or None (automatic)") from None
        self._forced = forced
        self._check_kernel(forced)

    def _grouped_mm_unsupported(self) -> str | None:
        if self.stored is not None:
            return "the experts are held as stored modules (GGUF blocks): one matmul per expert"
        return grouped_mm_unsupported(self.gate_up.device, self.gate_up.dtype, self.dim, self.hidden)

    def store_experts(self, experts: list[StoredExpert]) -> None:
        """Hold the experts as `experts` (e.g. GGUF blocks kept as stored) instead of the [E, 2H, D] and
        [E, D, H] parameters, which are removed; the segment loop runs them (inference only)."""
        if len(experts) != self.n_experts:
            raise ConfigError(f"store_experts got {len(experts)} experts for n_experts={self.n_experts}")
        for e, ex in enumerate(experts):
            if (ex.gate_up.out_features, ex.down.out_features) != (2 * self.hidden, self.dim):
                raise ConfigError(f"expert {e}: gate_up/down give {ex.gate_up.out_features}/{ex.down.out_features} "
                                  f"rows; this MoE needs {2 * self.hidden}/{self.dim}")
        del self.gate_up, self.down
        self.stored = nn.ModuleList(experts)

    def _check_kernel(self, kernel: MoEKernel) -> None:
        if kernel is MoEKernel.GROUPED_MM and (why := self._grouped_mm_unsupported()) is not None:
            raise ConfigError(f"MoE kernel='grouped_mm' was forced but cannot run: {why}")

    # ---- forward ---------------------------------------------------------------------------------------

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [B, T, D] -> [B, T, D]
        kernel = self.kernel
        self._check_kernel(kernel)
        shape = x.shape
        x = x.reshape(-1, self.dim)  # [N, D]
        n_tokens, k = x.shape[0], self.top_k

        logits = self.router(x).float()  # [N, E]
        probs = logits.softmax(dim=-1)  # [N, E]
        top_p, top_e = probs.topk(k, dim=-1)  # [N, k], [N, k]
        if self.routing is Routing.RENORMALIZED:
            weights = top_p / top_p.sum(dim=-1, keepdim=True)  # [N, k], rows sum to 1
        else:
            weights = top_p

        flat_expert = top_e.reshape(-1)  # [N*k], assignment a = token * k + slot
        order = flat_expert.argsort(stable=True)  # [N*k] assignments grouped by expert
        token_of = order // k  # [N*k] token of each sorted assignment
        counts = torch.bincount(flat_expert, minlength=self.n_experts)  # [E]

        xs = x.index_select(0, token_of)  # [N*k, D]
        if self.stored is not None:
            ys = self._experts_stored(xs, counts)
        elif kernel is MoEKernel.GROUPED_MM:
            ys = self._experts_grouped_mm(xs, counts)
        else:
            ys = self._experts_segment_loop(xs, counts)  # [N*k, D]
        ys = ys * weights.reshape(-1)[order].unsqueeze(-1).to(ys.dtype)  # [N*k, D]
        out = x.new_zeros(n_tokens, self.dim).index_add(0, token_of, ys)  # [N, D]
        if self.shared is not None:
            out = out + torch.sigmoid(self.shared_gate(x)) * self.shared(x)

        self.last_stats = self._stats(logits, probs, counts, n_tokens)
        return out.view(shape)

    def _experts_grouped_mm(self, xs: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        # [N*k, D] (rows sorted by expert) -> [N*k, D]
        grouped_mm = _grouped_mm_op()
        offs = counts.cumsum(0).to(torch.int32)  # [E] end row of each expert's slice
        h = grouped_mm(xs, self.gate_up.transpose(1, 2), offs=offs)  # [N*k, 2H]
        gate, up = h.split(self.hidden, dim=-1)
        return grouped_mm(F.silu(gate) * up, self.down.transpose(1, 2), offs=offs)  # [N*k, D]

    def _experts_segment_loop(self, xs: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        # [N*k, D] (rows sorted by expert) -> [N*k, D]
        # split/unbind, not xs[a:b] / gate_up[e]: the backward of each slice or index would allocate a
        # full-size zero gradient per expert (O(E^2) work); split's backward is one cat, unbind's one stack.
        pieces = []
        for xe, gate_up, down in zip(xs.split(counts.tolist()), self.gate_up.unbind(0), self.down.unbind(0)):
            if xe.shape[0] == 0:
                continue
            gate, up = F.linear(xe, gate_up).split(self.hidden, dim=-1)  # [n_e, H] each
            pieces.append(F.linear(F.silu(gate) * up, down))  # [n_e, D]
        return torch.cat(pieces) if pieces else xs.new_zeros(0, self.dim)

    def _experts_stored(self, xs: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        # [N*k, D] (rows sorted by expert) -> [N*k, D], through the stored experts' modules
        pieces = []
        for xe, expert in zip(xs.split(counts.tolist()), self.stored, strict=True):
            if xe.shape[0] == 0:
                continue
            gate, up = expert.gate_up(xe).split(self.hidden, dim=-1)  # [n_e, H] each
            pieces.append(expert.down(F.silu(gate) * up))  # [n_e, D]
        return torch.cat(pieces) if pieces else xs.new_zeros(0, self.dim)

    def _stats(self, logits: torch.Tensor, probs: torch.Tensor, counts: torch.Tensor, n_tokens: int) -> MoEStats:
        # logits, probs: [N, E] float32; counts: [E]
        if n_tokens == 0:
            zero = logits.sum()  # 0.0, still attached to the router
            return MoEStats(tokens_per_expert=counts, aux_loss=zero, z_loss=zero)
        f = counts.float() / (n_tokens * self.top_k)  # [E] share of assignments
        p_mean = probs.mean(dim=0)  # [E] mean router probability
        aux = self.n_experts * (f * p_mean).sum()
        z = torch.logsumexp(logits, dim=-1).square().mean()
        return MoEStats(tokens_per_expert=counts, aux_loss=aux, z_loss=z)

    def extra_repr(self) -> str:
        return (f"dim={self.dim}, hidden={self.hidden}, n_experts={self.n_experts}, top_k={self.top_k}, "
                f"routing={self.routing.value}, kernel={self.kernel.value}")
