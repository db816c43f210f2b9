"""Reading before talking: the tower's encoder learns the rendered tasks' labels from fresh images each step, before
the adapter learns to say them.

Through a frozen 135M decoder the answer loss reaches the encoder weakly (the shipped tower's answer loss
plateaus near 2 nats with held-out accuracy near chance). Every rendered task has a small closed set of answers
(tasks.labels: 10 digits, 32 words, 40 emoji, 8 chart values, 6 counts), so the encoder can be taught them
directly: a linear head per task on the patch features max-pooled over the image, cross-entropy on the label.
Images are rendered afresh for every step (a new seed per step and task), never drawn from a fixed pool: a
probe of vision-small as a 10-way digit reader (held-out fonts, n=300) reached 58% from a fixed pool of 3,000
images (it memorised them: train loss 0.08) and 73% from fresh ones after the same 1,200 steps, still rising.

    config = ReadConfig(steps=1500, batch=40)
    heads = ReadHeads(tower.config.vision.width, config.tasks)
    history = train_read(tower, heads, config, checkpoint=out / "read_state.pt", every=50, log=print)
    read_accuracy(tower, heads, config.tasks, Split.HELDOUT, n=100)     # {task: {"accuracy", "n", "chance"}}

Training seeds are READ_SEED + ... (far above the held-out renderings' HELD_OUT_SEED range, and the held-out
split's fonts, palettes and emoji style are disjoint from training's anyway: tasks.py).
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from openafm.errors import ConfigError
from openafm.io import atomic_write
from openafm.models.image_views import Resolution, image_views
from openafm.models.vlm import VisionTower
from openafm.splits import Split
from openafm.train.vision.mix import ResolutionMix
from openafm.train.vision.tasks import QA, RENDER, Task, chance, labels

READ_SEED = 1_000_000            # training renderings of this phase draw seeds from here up


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReadConfig:
    steps: int = 0                      # 0: no reading phase
    batch: int = 40                     # images per rapid-mode step, shared out over the tasks by weight
    lr: float = 1e-3
    warmup: int = 20
    weight_decay: float = 0.01
    tasks: tuple[tuple[Task, float], ...] = ((Task.NAME_EMOJI, 0.25), (Task.READ_WORD, 0.3),
                                             (Task.READ_DIGIT, 0.15), (Task.CHART_VALUE, 0.15), (Task.COUNT, 0.15))
    mix: ResolutionMix = ResolutionMix(low_rapid=0.75, balanced_of_rest=1.0)    # as the VLM stage draws modes
    seed: int = 0

    def __post_init__(self) -> None:
        if self.steps < 0 or self.batch < 1 or self.lr <= 0 or self.warmup < 1:
            raise ConfigError(f"read phase: steps={self.steps} must be >= 0, batch={self.batch} >= 1 (every task "
                              f"gets at least one image a step), lr={self.lr} > 0 and warmup={self.warmup} >= 1")
        if not self.tasks or any(w <= 0 for _, w in self.tasks):
            raise ConfigError(f"read phase: tasks must give each task a positive weight, got {self.tasks}")

    def per_task(self, mode: Resolution) -> dict[Task, int]:
        """Images of each task in a step of `mode`: the batch (a quarter of it, at least one per task, in the
        larger modes) shared out by weight, at least one each."""
        total = self.batch if mode is Resolution.RAPID else max(len(self.tasks), self.batch // 4)
        weight = sum(w for _, w in self.tasks)
        return {t: max(1, round(total * w / weight)) for t, w in self.tasks}


class ReadHeads(nn.Module):
    """One linear classifier per task over the max-pooled patch features: [N, D] -> [N, len(labels(task))]."""

    def __init__(self, width: int, tasks: tuple[tuple[Task, float], ...]):
        super().__init__()
        self.heads = nn.ModuleDict({t.value: nn.Linear(width, len(labels(t))) for t, _ in tasks})

    def forward(self, pooled: torch.Tensor, task: Task) -> torch.Tensor:
        return self.heads[task.value](pooled)


def pooled_features(tower: VisionTower, qas: list[QA], mode: Resolution) -> torch.Tensor:
    """Each image's patch features (every view of `mode`) max-pooled -> [N, D]."""
    views = torch.cat([image_views(q.image, mode, tower.config.sizes) for q in qas])     # [N * n, 3, S, S]
    patches = tower.patches(views)                                                       # [N * n, h, w, D]
    return patches.reshape(len(qas), -1, patches.shape[-1]).amax(1)                     # [N, D]


def _targets(task: Task, qas: list[QA]) -> torch.Tensor:
    index = {a: i for i, a in enumerate(labels(task))}
    return torch.tensor([index[q.answer] for q in qas])


def read_loss(tower: VisionTower, heads: ReadHeads, batch: dict[Task, list[QA]], mode: Resolution) -> torch.Tensor:
    """Mean over tasks of the heads' cross-entropy, all tasks' images through the encoder in one pass."""
    qas = [q for task_qas in batch.values() for q in task_qas]
    pooled = pooled_features(tower, qas, mode)                                           # [N, D]
    losses, start = [], 0
    for task, task_qas in batch.items():
        part = pooled[start:start + len(task_qas)]
        losses.append(F.cross_entropy(heads(part, task), _targets(task, task_qas)))
        start += len(task_qas)
    return torch.stack(losses).mean()


def fresh_batch(config: ReadConfig, step: int, mode: Resolution) -> dict[Task, list[QA]]:
    """Newly rendered training images for `step`: every task's own seed, never reused by another step."""
    order = {t: i for i, t in enumerate(Task)}
    return {t: RENDER[t](Split.TRAIN, n, READ_SEED + (config.seed * 10_000_000 + step) * len(Task) + order[t])
            for t, n in config.per_task(mode).items()}


def _lr_scale(config: ReadConfig, step: int) -> float:
    return min(1.0, (step + 1) / config.warmup) * 0.5 * (1 + math.cos(math.pi * step / config.steps))


def train_read(tower: VisionTower, heads: ReadHeads, config: ReadConfig, *, checkpoint: Path | None = None,
               every: int = 50, log=None, until: int | None = None) -> list[dict]:
    """config.steps steps of read_loss on fresh images, training the encoder and the heads (the adapter is not
    touched). With `checkpoint`, the state is written there every `every` steps (and where it stops) and a rerun
    continues from it; `until` stops after that many steps of the phase (its schedule still spans config.steps),
    so a run can be looked at part way and continued. Returns one record per step so far: step, mode, loss,
    seconds (rendering included), render_seconds."""
    params = [*tower.encoder.parameters(), *heads.parameters()]
    opt = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    rng = random.Random(config.seed)
    done, history = _resume(checkpoint, config, tower, heads, opt, rng)
    tower.train()
    heads.train()
    stop = config.steps if until is None else min(until, config.steps)
    bar = tqdm(range(done, stop), desc="read", disable=log is None, initial=done, total=config.steps)
    for step in bar:
        for g in opt.param_groups:
            g["lr"] = config.lr * _lr_scale(config, step)
        mode = config.mix.sample(224, rng)                    # the rendered tasks' images are 224 px
        t0 = time.perf_counter()
        batch = fresh_batch(config, step, mode)
        rendered = time.perf_counter() - t0
        loss = read_loss(tower, heads, batch, mode)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        history.append({"step": step, "mode": mode.value, "loss": loss.item(),
                        "seconds": time.perf_counter() - t0, "render_seconds": rendered})
        bar.set_postfix(loss=f"{loss.item():.3f}", mode=mode.value)
        if checkpoint is not None and ((step + 1) % every == 0 or step + 1 == stop):
            _save(checkpoint, config, tower, heads, opt, rng, step + 1, history)
    tower.eval()
    heads.eval()
    return history


@torch.no_grad()
def read_accuracy(tower: VisionTower, heads: ReadHeads, tasks: tuple[tuple[Task, float], ...], split: Split, n: int,
                  seed: int = 0, mode: Resolution = Resolution.RAPID) -> dict[str, dict]:
    """The heads' accuracy on n rendered questions per task of `split` (held-out: fonts, palettes and style never
    trained on) -> {task: {"accuracy", "n", "chance"}}: what the encoder can tell apart, before any decoder."""
    tower.eval()
    out = {}
    for task, _ in tasks:
        qas = RENDER[task](split, n, seed)
        hits = 0
        for i in range(0, n, 32):
            chunk = qas[i:i + 32]
            hits += int((heads(pooled_features(tower, chunk, mode), task).argmax(-1) == _targets(task, chunk)).sum())
        out[task.value] = {"accuracy": hits / n, "n": n, "chance": chance(task)}
    return out


def _save(path: Path, config: ReadConfig, tower: VisionTower, heads: ReadHeads, opt, rng: random.Random, done: int,
          history: list[dict]) -> None:
    state = {"done": done, "history": history, "encoder": tower.encoder.state_dict(), "heads": heads.state_dict(),
             "opt": opt.state_dict(), "rng": rng.getstate(), "torch_rng": torch.get_rng_state(),
             "config": repr(config)}
    atomic_write(path, lambda tmp: torch.save(state, tmp))     # a kill leaves the old checkpoint or this one


def _resume(path: Path | None, config: ReadConfig, tower: VisionTower, heads: ReadHeads, opt,
            rng: random.Random) -> tuple[int, list[dict]]:
    if path is None or not path.is_file():
        return 0, []
    state = torch.load(path, weights_only=False)
    if state["config"] != repr(config):
        raise ConfigError(f"{path} was written by a read phase with another config; delete it to start over\n"
                          f"  it: {state['config']}\n  now: {config!r}")
    tower.encoder.load_state_dict(state["encoder"])
    heads.load_state_dict(state["heads"])
    opt.load_state_dict(state["opt"])
    rng.setstate(state["rng"])
    torch.set_rng_state(state["torch_rng"])
    return state["done"], state["history"]
