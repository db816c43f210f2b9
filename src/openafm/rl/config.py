"""The config of a synchronous RLOO run (`openafm rl CONFIG.yaml`): the policy, the prompt-set mixture with one
reward per set, the sampling and RLOO settings, held-out evaluation and checkpoints. One kw_only dataclass tree,
loaded from YAML like the trainer's.

    model: smollm2-135m-instruct          # what openafm.load accepts (a packaged model, a checkpoint directory)
    run_dir: runs/rl-math
    steps: 40
    prompts_per_step: 8                   # P; the step samples P * k responses
    rloo: {k: 4, clip: 0.2, kl_coef: 0.05}
    max_new_tokens: 48
    prompt_sets:
      - {name: math, source: reasoning-gym, weight: 0.7, reward: reasoning-gym, reward_options: {marker: "="},
         options: {dataset: chain_sum, config: {max_terms: 2, max_digits: 2}, hint: ""}}
      - {name: ifeval, source: instructions, weight: 0.3, reward: instructions}
    heldout: {every: 10, size: 64}
    adapter: {init: openafm-135m-sft}     # a LoRA adapter on the frozen model (rl/adapter_policy.py), not every weight
    asynchronous: {generators: 1, max_staleness: 1}     # `openafm rl --async` only (AsyncSettings)

A set may give its own max_new_tokens (a short math answer beside a 200-token instruction-following reply); its
rows are then sampled as their own batch. Each step draws its P prompts from the sets in proportion to their weights (a seeded multinomial per step), each
set walking a seeded permutation of its train pool, epoch after epoch.
"""

from __future__ import annotations

import dataclasses
import enum
from pathlib import Path
from typing import Any

from openafm import config as cfg
from openafm.errors import ConfigError
from openafm.io import read_yaml
from openafm.rl.prompts import PromptSource, check_options
from openafm.rl.rewards.registry import REWARDS, UnknownRewardError
from openafm.rl.rloo import Normalisation, check_k
from openafm.train.config import CheckpointConfig, OptimizerConfig, Precision


class Sampling(str, enum.Enum):
    """The order in which asynchronous RL's replay buffer (rl/system/buffer.py) hands out groups."""
    FIFO = "fifo"                # arrival order
    FRESHEST = "freshest"        # newest policy version first, ties by arrival


@dataclasses.dataclass(kw_only=True)
class PromptSetConfig:
    name: str
    source: PromptSource
    weight: float
    reward: str                                        # a name in rl/rewards.REWARDS
    reward_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    pool: int = 1000                                   # train prompts drawn for the set
    max_new_tokens: int | None = None                  # the set's response budget (default: the run's)


@dataclasses.dataclass(kw_only=True)
class RLOOSettings:
    k: int = 4
    clip: float = 0.2
    kl_coef: float = 0.05
    normalisation: Normalisation = Normalisation.TOKEN_MEAN


@dataclasses.dataclass(kw_only=True)
class HeldoutConfig:
    every: int = 10                    # greedy accuracy on each set's held-out slice every n steps (and at 0, end)
    size: int = 64                     # held-out prompts per set
    max_new_tokens: int | None = None  # default: each set's budget


@dataclasses.dataclass(kw_only=True)
class AdapterSettings:
    """The policy as a LoRA adapter on the frozen `model` (rl/adapter_policy.py): `init` continues an adapter made for
    that model's weights (an adapter file, or a bundled model's name: its adapter on its base), keeping its rank,
    alpha and targets; without it a fresh adapter of `rank` (alpha: default 2 * rank) starts at zero."""
    init: str | None = None
    rank: int | None = None
    alpha: float | None = None

    def check(self) -> None:
        if (self.init is None) == (self.rank is None):
            raise ConfigError(f"rl config: adapter takes exactly one of init (an adapter to continue) or rank (a fresh "
                              f"one), got init={self.init!r}, rank={self.rank}")
        if self.init is not None and self.alpha is not None:
            raise ConfigError(f"rl config: adapter.alpha={self.alpha} is the continued adapter's own; leave it out with "
                              f"init={self.init!r}")
        if self.rank is not None and self.rank < 1:
            raise ConfigError(f"rl config: adapter.rank={self.rank} must be >= 1")
        if self.alpha is not None and not self.alpha > 0:
            raise ConfigError(f"rl config: adapter.alpha={self.alpha} must be > 0")


@dataclasses.dataclass(kw_only=True)
class AsyncSettings:
    """`openafm rl --async`: the Ray actors (rl/system/actors.py) and how far generation may run ahead of the updates."""
    generators: int = 1                # trajectory generator replicas
    max_staleness: int = 1             # a batch is sampled at most this many policy versions behind its update
    sync_every: int = 1                # the updater publishes its weights every n updates
    buffer_capacity: int = 64          # groups (one prompt's k samples) the replay buffer holds
    sampling: Sampling = Sampling.FIFO
    generator_cpus: float = 1.0        # Ray CPUs reserved per actor (so two actors don't share a core)
    updater_cpus: float = 1.0
    generator_threads: int = 1         # torch intra-op threads per actor
    updater_threads: int = 1
    max_restarts: int = 3              # a killed generator is restarted by Ray this many times
    address: str | None = None         # a Ray cluster (ray.init(address=...)); None: start an embedded local Ray
    object_store_mb: int = 1024        # the embedded Ray's object store (published weights live there)


@dataclasses.dataclass(kw_only=True)
class RLConfig:
    model: str
    run_dir: str
    steps: int
    prompt_sets: list[PromptSetConfig]
    prompts_per_step: int = 8
    rloo: RLOOSettings = dataclasses.field(default_factory=RLOOSettings)
    max_new_tokens: int = 64
    temperature: float = 1.0
    micro_batch: int = 16              # rows per forward/backward; the step's gradient is accumulated over them
    optimizer: OptimizerConfig = dataclasses.field(
        default_factory=lambda: OptimizerConfig(lr=1e-5, weight_decay=0.0, grad_clip=1.0))
    ema: float | None = None           # decay of an EMA of the policy weights, evaluated and exported when set
    adapter: AdapterSettings | None = None    # train a LoRA adapter on the frozen model; None: every weight trains
    heldout: HeldoutConfig = dataclasses.field(default_factory=HeldoutConfig)
    checkpoint: CheckpointConfig = dataclasses.field(default_factory=lambda: CheckpointConfig(every=10, keep=2))
    precision: Precision = Precision.FLOAT32
    device: str = "cpu"
    seed: int = 0
    progress: bool = True
    asynchronous: AsyncSettings = dataclasses.field(default_factory=AsyncSettings)

    def __post_init__(self) -> None:
        for name in ("steps", "prompts_per_step", "max_new_tokens", "micro_batch"):
            if getattr(self, name) < 1:
                raise ConfigError(f"rl config: {name}={getattr(self, name)} must be >= 1")
        check_k(self.rloo.k)
        if not self.temperature > 0:
            raise ConfigError(f"rl config: temperature={self.temperature} must be > 0 (RLOO needs k distinct samples)")
        if not self.prompt_sets:
            raise ConfigError("rl config: prompt_sets is empty; give at least one {name, source, weight, reward}")
        names = [s.name for s in self.prompt_sets]
        if len(set(names)) != len(names):
            raise ConfigError(f"rl config: prompt set names repeat: {names}")
        for s in self.prompt_sets:
            where = f"rl config: prompt set {s.name!r}"
            if not s.weight > 0:
                raise ConfigError(f"{where}: weight={s.weight} must be > 0 (leave the set out to not use it)")
            if s.reward not in REWARDS:
                raise UnknownRewardError(s.reward, sorted(REWARDS))
            check_options(s.source, s.options, where)
            if s.pool < 1:
                raise ConfigError(f"{where}: pool={s.pool} must be >= 1")
            if s.max_new_tokens is not None and s.max_new_tokens < 1:
                raise ConfigError(f"{where}: max_new_tokens={s.max_new_tokens} must be >= 1 (or left out)")
        if self.adapter is not None:
            self.adapter.check()
        if self.ema is not None and not 0 < self.ema < 1:
            raise ConfigError(f"rl config: ema={self.ema} must be in (0, 1), or null for no EMA")
        if self.heldout.every < 1 or self.heldout.size < 0:
            raise ConfigError(f"rl config: heldout.every={self.heldout.every} must be >= 1 and heldout.size="
                              f"{self.heldout.size} >= 0")
        a = self.asynchronous
        for name in ("generators", "sync_every", "buffer_capacity", "generator_threads", "updater_threads",
                     "object_store_mb"):
            if getattr(a, name) < 1:
                raise ConfigError(f"rl config: asynchronous.{name}={getattr(a, name)} must be >= 1")
        if a.max_staleness < a.sync_every - 1:
            raise ConfigError(f"rl config: asynchronous.max_staleness={a.max_staleness} must be >= sync_every - 1 = "
                              f"{a.sync_every - 1} (generators only see every sync_every-th version)")
        if a.buffer_capacity < self.prompts_per_step:
            raise ConfigError(f"rl config: asynchronous.buffer_capacity={a.buffer_capacity} groups must hold one "
                              f"update's prompts_per_step={self.prompts_per_step}")
        if a.generator_cpus < 0 or a.updater_cpus < 0 or a.max_restarts < 0:
            raise ConfigError(f"rl config: asynchronous generator_cpus={a.generator_cpus}, updater_cpus="
                              f"{a.updater_cpus} and max_restarts={a.max_restarts} must be >= 0")
        if self.checkpoint.every < 1 or self.checkpoint.keep < 1:
            raise ConfigError(f"rl config: checkpoint.every={self.checkpoint.every} and checkpoint.keep="
                              f"{self.checkpoint.keep} must be >= 1")

    def to_dict(self) -> dict:
        return cfg.to_dict(self)

    @classmethod
    def from_dict(cls, data: dict) -> RLConfig:
        return cfg.from_dict(cls, data)


# Keys a resumed run may change without changing the numbers it computes.
RESUMABLE_CHANGES = ("run_dir", "checkpoint.every", "checkpoint.keep", "progress", "device", "steps",
                     "heldout.every", "asynchronous.generators", "asynchronous.generator_cpus",
                     "asynchronous.updater_cpus", "asynchronous.generator_threads", "asynchronous.updater_threads",
                     "asynchronous.max_restarts", "asynchronous.address", "asynchronous.object_store_mb")


def load_rl_config(path: str | Path, **overrides: Any) -> RLConfig:
    data = read_yaml(path, "RL config")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: an RL config is a mapping of keys, got {type(data).__name__}")
    data.update({k: v for k, v in overrides.items() if v is not None})
    return RLConfig.from_dict(data)
