"""The trainer: build everything from a TrainConfig, run optimizer steps, log, checkpoint, resume.

One optimizer step:
    1. take grad_accum micro-batches from the loader (each rank its rows of each global micro-batch)
    2. W = labelled tokens of the whole step, summed over micro-batches and ranks (one all-reduce)
    3. per micro-batch: loss_m = objective mean over its w_m units; backward(loss_m * w_m / W * world)
       (DDP / FSDP2 average gradients over ranks, hence * world): the gradient of the mean over all W units
    4. clip to optimizer.grad_clip (global L2 norm), set the scheduled lr, AdamW step
    5. every hook's after_step (e.g. an EMA update), its metrics merged into the step's
    6. a metrics line; every checkpoint.every steps (and at the end) an atomic checkpoint

Hooks (openafm.train.hooks) let QAT and LoRA recovery run on this loop: they prepare the model, choose the
optimizer's parameter groups, act after each step, choose the weights used for eval, and keep checkpointed
state. The config's `device` (cpu, cuda, cuda:1) holds the model and every batch.

A run resumed from a checkpoint repeats the same computation: CPU fp32 losses are bit-identical to an
uninterrupted run's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import time
from pathlib import Path

import torch
from tqdm import tqdm

from openafm.checkpoint.load import load_model
from openafm.errors import CheckpointError, ConfigError
from openafm.train import checkpoint as ckpt
from openafm.train import init, parallel, rng
from openafm.train.activation import apply_activation_checkpointing
from openafm.train.batch_protocol import Loader
from openafm.train.config import (
    ActivationCheckpointing,
    DataKind,
    ObjectiveKind,
    ParallelKind,
    TrainConfig,
    dump_yaml,
)
from openafm.train.flops import flops_per_token, measure_peak_flops, mfu
from openafm.train.hooks import TrainHooks
from openafm.train.kd import KDKind, KDObjective
from openafm.train.metrics import MetricsLog
from openafm.train.objective import LMObjective, Objective
from openafm.train.optimizer import build_optimizer, clip_gradients
from openafm.train.precision import autocast
from openafm.train.schedule import Schedule
from openafm.train.synthetic import SyntheticLoader

METRICS_FILE = "metrics.jsonl"


class Trainer:
    def __init__(self, config: TrainConfig, *, model: torch.nn.Module | None = None,
                 objective: Objective | None = None, loader: Loader | None = None,
                 hooks: list[TrainHooks] | None = None):
        """model / objective / loader default to what the config names; pass them to train something the
        config cannot name (a LoRA-wrapped model, a QAT model, a custom objective). hooks: see train/hooks.py."""
        self.config = config
        self.hooks = list(hooks or [])
        names = [h.name for h in self.hooks]
        if len(set(names)) != len(names):
            raise ConfigError(f"hook names must be unique (they key checkpointed state), got {names}")
        self.device = torch.device(config.device)
        self.run_dir = Path(config.run_dir)
        self.rank, self.world = parallel.init_distributed(config.parallel, config.device)
        rng.seed_everything(config.seed)
        if model is None:
            model = load_model(config.model, seed=config.seed).model.requires_grad_(True)
            if init.resolve(config.init, config.model) is init.InitKind.SCALED_NORMAL:
                init.scaled_normal_(model, config.init_std)
        self.model_config = model.config
        self.vocab_size = model.kv_plan.vocab_size
        model.to(self.device)
        for hook in self.hooks:
            model = hook.prepare_model(model)
        model.train()
        if config.activation_checkpointing is ActivationCheckpointing.PER_BLOCK:
            apply_activation_checkpointing(model)
        self.model = parallel.wrap(model, config.parallel)
        self.optimizer = self._build_optimizer()
        self.schedule = Schedule(config.schedule, config.steps, config.optimizer.lr)
        self.rows = config.rows_per_rank(self.world)
        self.loader = loader if loader is not None else self._build_loader()
        if not isinstance(self.loader, Loader):
            raise TypeError(f"{type(self.loader).__name__} is not a Loader: it needs __iter__, state_dict and "
                            f"load_state_dict")
        self.objective = objective if objective is not None else self._build_objective()
        self.flops_per_token = flops_per_token(self.model_config, config.seq_len)
        self.peak_flops = config.peak_flops or measure_peak_flops()
        self.step = 0

    # --- building --------------------------------------------------------------------------------

    def _build_optimizer(self) -> torch.optim.Optimizer:
        given = [(h.name, g) for h in self.hooks if (g := h.param_groups(self.model, self.config.optimizer)) is not None]
        if len(given) > 1:
            raise ConfigError(f"hooks {[n for n, _ in given]} each give parameter groups; at most one may")
        if not given:
            return build_optimizer(self.model, self.config.optimizer)
        groups = given[0][1]
        trainable = {id(p) for p in self.model.parameters() if p.requires_grad}
        grouped = [id(p) for g in groups for p in g["params"]]
        if sorted(grouped) != sorted(trainable):
            raise ConfigError(f"hook {given[0][0]!r} gave parameter groups that do not hold every trainable "
                              f"parameter exactly once ({len(grouped)} grouped, {len(trainable)} trainable)")
        o = self.config.optimizer
        return torch.optim.AdamW(groups, lr=o.lr, betas=tuple(o.betas), eps=o.eps)

    def _build_loader(self) -> Loader:
        c = self.config
        if c.data.kind is DataKind.SYNTHETIC:
            return SyntheticLoader(vocab_size=self.vocab_size, seq_len=c.seq_len, global_batch=self.rows * self.world,
                                   seed=c.seed, rank=self.rank, world_size=self.world, **c.data.options)
        if c.data.kind is DataKind.CALLABLE:
            module, _, name = c.data.target.partition(":")
            if not name:
                raise ConfigError(f"data.target={c.data.target!r} must be 'module:function'")
            factory = getattr(importlib.import_module(module), name)
            return factory(c, rank=self.rank, world_size=self.world, **c.data.options)
        raise ConfigError(f"unknown data.kind {c.data.kind!r}; accepted: {[k.value for k in DataKind]}")

    def _build_objective(self) -> Objective:
        o = self.config.objective
        if o.kind is ObjectiveKind.LM:
            return LMObjective()
        if o.kind is ObjectiveKind.KD:
            try:
                kind = KDKind(o.kd_kind)
            except ValueError:
                raise ConfigError(f"objective.kd_kind={o.kd_kind!r}; accepted: {[k.value for k in KDKind]}") from None
            teacher = load_model(o.teacher, seed=self.config.seed).model
            return KDObjective(teacher, kind=kind, top_k=o.top_k, temperature=o.temperature, kd_weight=o.kd_weight)
        raise ConfigError(f"unknown objective.kind {o.kind!r}; accepted: {[k.value for k in ObjectiveKind]}")

    # --- running ---------------------------------------------------------------------------------

    def run(self, *, resume: bool = False, stop_after: int | None = None) -> list[dict]:
        """Train to config.steps (or stop after `stop_after` more steps). -> the metric records written."""
        c = self.config
        if resume:
            self.restore_latest()
        elif ckpt.list_checkpoints(self.run_dir):
            raise CheckpointError(f"{self.run_dir} already has checkpoints; pass --resume to continue the run "
                                  f"or choose a new run_dir")
        log = MetricsLog(self.run_dir / METRICS_FILE, keep_through_step=self.step if resume else None) \
            if self.rank == 0 else None
        if self.rank == 0:
            (self.run_dir / "config.yaml").write_text(dump_yaml(c))
        batches = iter(self.loader)
        records = []
        last = c.steps if stop_after is None else min(c.steps, self.step + stop_after)
        bar = tqdm(total=c.steps, initial=self.step, desc="train", unit="step",
                   disable=not (c.progress and self.rank == 0))
        start = time.perf_counter()
        try:
            while self.step < last:
                t = time.perf_counter()
                record = self.train_step(batches)
                step_s = time.perf_counter() - t
                tokens_per_s = record["tokens"] / step_s
                record |= {"step_s": step_s, "tokens_per_s": tokens_per_s,
                           "mfu": mfu(self.flops_per_token, tokens_per_s, self.peak_flops),
                           "elapsed_s": time.perf_counter() - start}
                if log is not None and (self.step % c.log_every == 0 or self.step == c.steps):
                    log.write(record)     # before the checkpoint: a kill between the two loses no line
                    records.append(record)
                if self.step % c.checkpoint.every == 0 or self.step == c.steps:
                    self.save()
                bar.update(1)
                bar.set_postfix(loss=f"{record['loss']:.4f}", lr=f"{record['lr']:.2e}",
                                tok_s=f"{tokens_per_s:.0f}")
        finally:
            bar.close()
            if log is not None:
                log.close()
        return records

    def train_step(self, batches) -> dict:
        c = self.config
        micro = [_to_device(next(batches), self.device) for _ in range(c.grad_accum)]
        for b in micro:
            if tuple(b.input_ids.shape) != (self.rows, c.seq_len):
                raise ValueError(f"the loader gave a batch of shape {tuple(b.input_ids.shape)}; this run needs "
                                 f"[{self.rows}, {c.seq_len}] (batch_size / (world x grad_accum), seq_len)")
        weights = [self.objective.weight(b) for b in micro]
        total = int(parallel.all_reduce_sum(torch.tensor([float(sum(weights))], dtype=torch.float64)).item())
        sums: dict[str, float] = {}
        for i, (batch, w) in enumerate(zip(micro, weights)):
            sync = i == len(micro) - 1
            with self._no_sync(sync), autocast(self.config.precision, self.device):
                loss, metrics = self.objective(self.model, batch)
            scale = (w / total if total else 0.0) * self.world
            (loss * scale).backward()
            for k, v in {"loss": float(loss.detach()), **metrics}.items():
                sums[k] = sums.get(k, 0.0) + v * w
        keys = sorted(sums)
        reduced = parallel.all_reduce_sum(torch.tensor([sums[k] for k in keys], dtype=torch.float64))
        means = {k: float(v) / total if total else 0.0 for k, v in zip(keys, reduced.tolist())}
        grad_norm = clip_gradients(self.model.parameters(), c.optimizer.grad_clip)
        lr = self.schedule.apply(self.optimizer, self.step)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        record = {"step": self.step, "loss": means.pop("loss"), "lr": lr, "grad_norm": grad_norm,
                  "tokens": c.batch_size * c.seq_len, "labelled_tokens": total, **means}
        for hook in self.hooks:
            record |= hook.after_step(self)
        return record

    @contextlib.contextmanager
    def eval_model(self):
        """The bare model in eval mode holding every hook's eval weights (e.g. EMA); restored after."""
        model = parallel.unwrap(self.model)
        was_training = model.training
        with contextlib.ExitStack() as stack:
            for hook in self.hooks:
                stack.enter_context(hook.eval_weights(model))
            model.eval()
            try:
                yield model
            finally:
                model.train(was_training)

    def _no_sync(self, sync: bool):
        if not sync and self.config.parallel is ParallelKind.DDP:
            return self.model.no_sync()
        if self.config.parallel is ParallelKind.FSDP2:
            self.model.set_requires_gradient_sync(sync)
        return contextlib.nullcontext()

    # --- checkpoints -----------------------------------------------------------------------------

    def save(self) -> Path | None:
        model_state, optim_state = parallel.full_state(self.model, self.optimizer)   # collective
        path = None
        if self.rank == 0:
            state = ckpt.TrainingState(
                step=self.step, model_config=self.model_config, model=model_state, optimizer=optim_state,
                schedule=self.schedule.state_dict(), rng=rng.capture(), loader=self.loader.state_dict(),
                config=self.config.to_dict(), path=None, hooks={h.name: h.state_dict() for h in self.hooks})
            path = ckpt.save_training_checkpoint(self.run_dir, state, keep=self.config.checkpoint.keep)
        parallel.barrier()
        return path

    def restore_latest(self) -> int:
        """Load the newest checkpoint of run_dir (none: start at step 0). -> the step resumed from."""
        ckpt.remove_partial(self.run_dir) if self.rank == 0 else None
        path = ckpt.latest_checkpoint(self.run_dir)
        if path is None:
            return 0
        state = ckpt.load_training_checkpoint(path, self.config.to_dict())
        if state.schedule != self.schedule.state_dict():
            raise CheckpointError(f"{path}: schedule {state.schedule} differs from this run's "
                                  f"{self.schedule.state_dict()}")
        parallel.load_full_state(self.model, self.optimizer, state.model, state.optimizer)
        self.loader.load_state_dict(state.loader)
        names = sorted(h.name for h in self.hooks)
        if sorted(state.hooks) != names:
            raise CheckpointError(f"{path}: holds state of hooks {sorted(state.hooks)}, this run has hooks {names}")
        for hook in self.hooks:
            hook.load_state_dict(state.hooks[hook.name])
        rng.restore(state.rng)
        self.step = state.step
        return self.step


def _to_device(batch, device: torch.device):
    """The batch with its tensors on `device` (the same object when they are already there)."""
    if batch.input_ids.device == device:
        return batch
    if not dataclasses.is_dataclass(batch):
        raise TypeError(f"cannot move a {type(batch).__name__} batch to {device}: batches are dataclasses of tensors")
    return dataclasses.replace(batch, **{f.name: getattr(batch, f.name).to(device)
                                         for f in dataclasses.fields(batch)
                                         if isinstance(getattr(batch, f.name), torch.Tensor)})
