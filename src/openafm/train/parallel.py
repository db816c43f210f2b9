"""Data parallelism with torch.distributed, launched by torchrun (gloo on CPU, NCCL on CUDA), as a kind:

    ddp    DistributedDataParallel: every rank holds all weights; gradients are all-reduced (averaged)
    fsdp2  torch.distributed.fsdp.fully_shard on each block and the root: weights, gradients and optimizer
           state sharded over ranks; all-gathered per block for compute, gradients reduce-scattered

Both average gradients over ranks; the trainer scales each rank's loss so the step's gradient is that of
the mean over every labelled token of the global batch (see Trainer.step). Checkpoints are written from
full (gathered) state dicts, so a run may resume under another kind or world size.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from openafm.distributed.collectives import backend_for
from openafm.errors import ConfigError
from openafm.models.decoder import Block
from openafm.train.config import ParallelKind


def init_distributed(kind: ParallelKind, device: str = "cpu") -> tuple[int, int]:
    """-> (rank, world size). Joins torchrun's process group for ddp / fsdp2."""
    env_world = int(os.environ.get("WORLD_SIZE", "1"))
    if kind is ParallelKind.NONE:
        if env_world != 1:
            raise ConfigError(f"launched with WORLD_SIZE={env_world} but parallel: none; set parallel: ddp or fsdp2")
        return 0, 1
    if not dist.is_initialized():
        if "RANK" not in os.environ or "MASTER_ADDR" not in os.environ:
            raise ConfigError(f"parallel: {kind.value} needs a torchrun launch (RANK, WORLD_SIZE, MASTER_ADDR set), "
                              f"e.g. torchrun --nproc_per_node 2 -m openafm.cli train CONFIG.yaml")
        dist.init_process_group(backend_for(device))
    return dist.get_rank(), dist.get_world_size()


def wrap(model: torch.nn.Module, kind: ParallelKind) -> torch.nn.Module:
    if kind is ParallelKind.NONE:
        return model
    if kind is ParallelKind.DDP:
        # An MoE layer's unrouted experts get no gradient in a step.
        has_moe = any(hasattr(m, "last_stats") for m in model.modules())
        return DistributedDataParallel(model, find_unused_parameters=has_moe)
    if kind is ParallelKind.FSDP2:
        from torch.distributed.fsdp import fully_shard  # on use: importing FSDP costs ~0.6 s on this CPU
        for block in [m for m in model.modules() if isinstance(m, Block)]:
            fully_shard(block)
        fully_shard(model)
        return model
    raise ConfigError(f"unknown parallel kind {kind!r}; accepted: {[k.value for k in ParallelKind]}")


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    return model.module if hasattr(model, "module") and isinstance(model.module, torch.nn.Module) else model


def full_state(model: torch.nn.Module, optimizer) -> tuple[dict, dict]:
    """(model, optimizer) state dicts, gathered in full on every rank; parameter names as in the bare model."""
    # on use: torch.distributed.checkpoint costs ~0.6 s to import, which `openafm --help` would otherwise pay
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, get_optimizer_state_dict
    full = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_model_state_dict(model, options=full), get_optimizer_state_dict(model, optimizer, options=full)


def load_full_state(model: torch.nn.Module, optimizer, model_state: dict, optimizer_state: dict) -> None:
    from torch.distributed.checkpoint.state_dict import (  # on use, as in full_state
        StateDictOptions, set_model_state_dict, set_optimizer_state_dict)
    full = StateDictOptions(full_state_dict=True, cpu_offload=True)
    set_model_state_dict(model, model_state, options=full)
    set_optimizer_state_dict(model, optimizer, optimizer_state, options=full)


def all_reduce_sum(values: torch.Tensor) -> torch.Tensor:
    if dist.is_initialized():
        dist.all_reduce(values, op=dist.ReduceOp.SUM)
    return values


def barrier() -> None:
    if dist.is_initialized():
        dist.barrier()
