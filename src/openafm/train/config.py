"""The trainer's config: one kw_only dataclass tree, loadable from YAML (`load_train_config`).

    model: afm-ondevice-tiny        # a preset name or a checkpoint path (anything openafm.load accepts)
    run_dir: runs/tiny
    steps: 200
    batch_size: 8                   # sequences per optimizer step, over all ranks and micro-batches
    grad_accum: 2                   # micro-batches per step (each rank runs batch_size / (world * grad_accum) rows)
    seq_len: 128
    optimizer: {lr: 3.0e-4, weight_decay: 0.1, grad_clip: 1.0}
    schedule: {kind: wsd, warmup_steps: 20, decay_steps: 40}
    checkpoint: {every: 50, keep: 3}
"""

from __future__ import annotations

import dataclasses
import enum
from pathlib import Path
from typing import Any

import yaml

from openafm import config as cfg
from openafm.errors import ConfigError
from openafm.io import read_yaml
from openafm.train.init import InitKind


class DataKind(str, enum.Enum):
    SYNTHETIC = "synthetic"    # openafm.train.synthetic.SyntheticLoader (options: branching, min_doc_len, max_doc_len)
    CALLABLE = "callable"      # `target: "module:function"`, called as function(config, rank=, world_size=, **options)


class ObjectiveKind(str, enum.Enum):
    LM = "lm"                  # cross-entropy on the labels
    KD = "kd"                  # distillation from `teacher` (KL, full or top-k) mixed with cross-entropy


class ScheduleKind(str, enum.Enum):
    WARMUP_COSINE = "warmup-cosine"   # linear warmup, cosine decay to min_lr_ratio at the last step
    WSD = "wsd"                       # linear warmup, constant, linear decay over the last decay_steps
    CONSTANT = "constant"             # linear warmup, then constant


class Precision(str, enum.Enum):
    FLOAT32 = "float32"                      # fp32 weights and compute
    BF16_AUTOCAST = "bfloat16-autocast"      # fp32 weights and optimizer, matmuls under bf16 autocast


class ActivationCheckpointing(str, enum.Enum):
    NONE = "none"
    PER_BLOCK = "per-block"    # keep only each block's input; recompute the block in the backward pass


class ParallelKind(str, enum.Enum):
    NONE = "none"              # one process
    DDP = "ddp"                # torch DistributedDataParallel: replicated weights, all-reduced gradients
    FSDP2 = "fsdp2"            # torch.distributed.fsdp.fully_shard per block and at the root


@dataclasses.dataclass(kw_only=True)
class DataConfig:
    kind: DataKind = DataKind.SYNTHETIC
    target: str | None = None
    options: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(kw_only=True)
class ObjectiveConfig:
    kind: ObjectiveKind = ObjectiveKind.LM
    teacher: str | None = None         # kd: a preset name or checkpoint path
    kd_kind: str = "full"              # kd: "full" or "top-k"
    top_k: int | None = None           # kd with kd_kind top-k
    temperature: float = 1.0
    kd_weight: float = 1.0             # loss = kd_weight * KL + (1 - kd_weight) * CE


@dataclasses.dataclass(kw_only=True)
class OptimizerConfig:
    lr: float = 3e-4
    betas: list[float] = dataclasses.field(default_factory=lambda: [0.9, 0.95])
    eps: float = 1e-8
    weight_decay: float = 0.1
    # Parameters whose name contains one of these, or with fewer than 2 dimensions, get no weight decay.
    no_decay: list[str] = dataclasses.field(default_factory=lambda: ["norm", "embed", "bias"])
    grad_clip: float | None = 1.0      # max global gradient L2 norm; null = measure the norm, clip nothing


@dataclasses.dataclass(kw_only=True)
class ScheduleConfig:
    kind: ScheduleKind = ScheduleKind.WARMUP_COSINE
    warmup_steps: int = 0
    decay_steps: int = 0               # wsd: length of the final decay
    min_lr_ratio: float = 0.1          # lr at the end of the decay, as a fraction of optimizer.lr


@dataclasses.dataclass(kw_only=True)
class CheckpointConfig:
    every: int = 100                   # save after every `every` steps (and after the last step)
    keep: int = 3                      # keep the newest `keep` checkpoints


@dataclasses.dataclass(kw_only=True)
class TrainConfig:
    model: str
    run_dir: str
    steps: int
    batch_size: int
    seq_len: int
    grad_accum: int = 1
    seed: int = 0
    init: InitKind = InitKind.AUTO      # auto: scaled-normal for a preset, keep for a checkpoint (see train/init.py)
    init_std: float = 0.02
    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    objective: ObjectiveConfig = dataclasses.field(default_factory=ObjectiveConfig)
    optimizer: OptimizerConfig = dataclasses.field(default_factory=OptimizerConfig)
    schedule: ScheduleConfig = dataclasses.field(default_factory=ScheduleConfig)
    checkpoint: CheckpointConfig = dataclasses.field(default_factory=CheckpointConfig)
    precision: Precision = Precision.FLOAT32
    activation_checkpointing: ActivationCheckpointing = ActivationCheckpointing.NONE
    parallel: ParallelKind = ParallelKind.NONE
    device: str = "cpu"                # where the model and batches live: cpu, cuda, cuda:N
    log_every: int = 1                 # metrics JSONL line every n steps
    peak_flops: float | None = None    # FLOP/s for MFU; null = measure this machine's fp32 matmul peak at start
    progress: bool = True              # tqdm bar on rank 0

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "seq_len", "grad_accum", "log_every"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be >= 1")
        if self.checkpoint.every < 1 or self.checkpoint.keep < 1:
            raise ConfigError(f"checkpoint.every={self.checkpoint.every} and checkpoint.keep="
                              f"{self.checkpoint.keep} must be >= 1")
        s = self.schedule
        if s.warmup_steps < 0 or s.decay_steps < 0 or not 0 <= s.min_lr_ratio <= 1:
            raise ConfigError(f"schedule: warmup_steps={s.warmup_steps}, decay_steps={s.decay_steps} must be >= 0 "
                              f"and min_lr_ratio={s.min_lr_ratio} in [0, 1]")
        if self.data.kind is DataKind.CALLABLE and not self.data.target:
            raise ConfigError("data.kind=callable needs data.target: 'module:function'")
        if self.data.kind is DataKind.SYNTHETIC and self.data.target:
            raise ConfigError(f"data.target={self.data.target!r} is only used with data.kind=callable")
        if self.objective.kind is ObjectiveKind.KD and not self.objective.teacher:
            raise ConfigError("objective.kind=kd needs objective.teacher (a preset name or checkpoint path)")
        if not self.device.split(":")[0] in ("cpu", "cuda", "mps", "xpu"):
            raise ConfigError(f"device={self.device!r}; accepted: cpu, cuda, cuda:N, mps, xpu")
        if len(self.optimizer.betas) != 2:
            raise ConfigError(f"optimizer.betas={self.optimizer.betas} must be two numbers")

    def rows_per_rank(self, world_size: int) -> int:
        """Rows of one micro-batch on one rank."""
        split = world_size * self.grad_accum
        if self.batch_size % split:
            raise ConfigError(f"batch_size={self.batch_size} does not split into world_size={world_size} x "
                              f"grad_accum={self.grad_accum} equal micro-batches; use a multiple of {split}")
        return self.batch_size // split

    def to_dict(self) -> dict:
        return cfg.to_dict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "TrainConfig":
        return cfg.from_dict(cls, data)


# Keys a resumed run may change: they do not alter the numbers the run computes. (steps is not one: the
# schedule depends on it.)
RESUMABLE_CHANGES = ("run_dir", "checkpoint.every", "checkpoint.keep", "log_every", "peak_flops",
                     "progress", "activation_checkpointing", "parallel", "device")


def incompatible_keys(saved: dict, current: dict, resumable: tuple[str, ...] = RESUMABLE_CHANGES) -> list[str]:
    """Flat keys whose values differ between a checkpoint's config and this one (the `resumable` keys aside)."""
    a, b = cfg.flatten(saved), cfg.flatten(current)
    keys = sorted(k for k in set(a) | set(b)
                  if a.get(k, "<absent>") != b.get(k, "<absent>")
                  and not any(k == r or k.startswith(r + ".") for r in resumable))
    return [f"{k}: checkpoint {a.get(k, '<absent>')!r} vs config {b.get(k, '<absent>')!r}" for k in keys]


def load_train_config(path: str | Path) -> TrainConfig:
    data = read_yaml(path, "config")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a train config is a mapping of keys, got {type(data).__name__}")
    return TrainConfig.from_dict(data)


def dump_yaml(config: TrainConfig) -> str:
    return yaml.safe_dump(config.to_dict(), sort_keys=False)
