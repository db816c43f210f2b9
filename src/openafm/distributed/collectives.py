"""The two conjugate collectives of Megatron-style model parallelism, and a counter of what they send.

A model-parallel region starts from a hidden state every rank holds in full and ends with partial results
that must be summed across ranks:

    copy_to_parallel(x)      forward: identity           backward: all-reduce SUM of the gradient
    reduce_from_parallel(y)  forward: all-reduce SUM     backward: identity

Each is the other's adjoint. Entering the region, every rank's local computation reads the same x, so the
gradient of x is the sum of the ranks' partial gradients (all-reduced on the way back); leaving it, the
sum of partial outputs is what every rank goes on with, and the gradient of a sum is passed through as is.

`CollectiveCounter` records every all-reduce these functions issue (calls and payload bytes, forward and
backward apart), so benchmarks report counted collectives rather than computed ones. The backend follows
the tensors' device (gloo for CPU, NCCL for CUDA, see `backend_for`); a mismatch raises instead of letting
gloo quietly stage CUDA tensors through host memory.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.distributed as dist

from openafm.errors import ConfigError

BACKENDS = {"cpu": "gloo", "cuda": "nccl"}


def backend_for(device: torch.device | str) -> str:
    """The process-group backend for tensors on `device`: gloo on CPU, NCCL on CUDA."""
    kind = torch.device(device).type
    if kind not in BACKENDS:
        raise ConfigError(f"no torch.distributed backend for device {kind!r}; supported: "
                          f"{', '.join(f'{d} -> {b}' for d, b in BACKENDS.items())}")
    return BACKENDS[kind]


def group_rank_and_size(group=None) -> tuple[int, int]:
    """(this process's rank, world size) in `group` (None: the default group), which must be initialized."""
    if not dist.is_available() or not dist.is_initialized():
        raise ConfigError("model parallelism needs an initialized process group: call "
                          "torch.distributed.init_process_group(backend_for(device), ...) first (or run under torchrun)")
    return dist.get_rank(group), dist.get_world_size(group)


# --- counting -------------------------------------------------------------------------------------

@dataclasses.dataclass
class CollectiveCounter:
    """Counts the all-reduces issued by `copy_to_parallel` / `reduce_from_parallel` while it is open.

        with CollectiveCounter() as counted:
            loss = f(model(ids)); loss.backward()
        counted.forward_calls, counted.backward_bytes, ...

    Bytes are the all-reduced payload (numel x element size) per call; a ring all-reduce moves
    2 (W - 1) / W times that through each rank's link. Backward passes run on the thread that calls
    `backward()` on CPU but on autograd's device threads on CUDA, so open counters are process-wide.
    """

    forward_calls: int = 0
    forward_bytes: int = 0
    backward_calls: int = 0
    backward_bytes: int = 0

    def record(self, phase: str, nbytes: int) -> None:
        if phase == "forward":
            self.forward_calls += 1
            self.forward_bytes += nbytes
        else:
            self.backward_calls += 1
            self.backward_bytes += nbytes

    def __enter__(self) -> "CollectiveCounter":
        _OPEN_COUNTERS.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _OPEN_COUNTERS.remove(self)

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


_OPEN_COUNTERS: list[CollectiveCounter] = []


def _all_reduce_sum(x: torch.Tensor, group, phase: str) -> torch.Tensor:
    """A new contiguous tensor holding the sum of x over the group's ranks (x itself is not modified)."""
    expected = backend_for(x.device)
    actual = dist.get_backend(group)
    if expected not in actual:
        raise ConfigError(f"tensor on {x.device.type} needs the {expected} backend, but the process group uses "
                          f"{actual!r}; init the group with backend_for(device)")
    out = x.clone(memory_format=torch.contiguous_format)
    dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
    for counter in _OPEN_COUNTERS:
        counter.record(phase, out.numel() * out.element_size())
    return out


# --- the conjugate pair ---------------------------------------------------------------------------

class _CopyToParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return _all_reduce_sum(grad, ctx.group, "backward"), None


class _ReduceFromParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        return _all_reduce_sum(x, group, "forward")

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad, None


def copy_to_parallel(x: torch.Tensor, group=None) -> torch.Tensor:
    """Enter a model-parallel region: x unchanged; its gradient is all-reduced (summed) in backward."""
    return _CopyToParallel.apply(x, group)


def reduce_from_parallel(x: torch.Tensor, group=None) -> torch.Tensor:
    """Leave a model-parallel region: the sum of x over the group's ranks; the gradient passes through."""
    return _ReduceFromParallel.apply(x, group)
