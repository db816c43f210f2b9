"""The vision stage: a vision tower trained to answer about images against a frozen decoder (report §5.1, stage 3).

    - name: align                                   # a new tower, from a preset (or a CLIP checkpoint)
      kind: vision
      model: openafm-135m                           # the decoder it projects into (what openafm.load accepts)
      tower: {vision: vision-small, adapter: pixel-shuffle, hidden: 128}
      data: {per_task: 1500, emoji_copies: 8, absent: 0.15}
      read: {steps: 1500, batch: 40}                # first teach the encoder the labels (train/vision/read.py)
      train: {align_steps: 1500, steps: 0, encoder: frozen}   # VLMTrainConfig keys; tasks: {read-word: 0.3, ...}
    - {name: answer, kind: vision, from: align, train: {align_steps: 0, steps: 600},
       install_dir: src/openafm/checkpoint/vision_weights}

A stage continues the tower of an earlier vision stage (`from`, same decoder) or starts one (`model` + `tower`).
With `read` steps it first trains the encoder alone to tell the tasks' labels apart on freshly rendered images
(ReadConfig keys; tasks and mix spelled as in train), and records what its heads read on held-out images;
`encoder: frozen` then keeps those features through the stage (only the adapter learns). Its questions come from
pools rendered once (`data: {pool: fixed, per_task, emoji_copies, absent}`, the default) or are rendered afresh for
every batch (`data: {pool: fresh, absent}`; train/vision/questions.py).
Its training state is checkpointed inside the stage directory, so a killed run continues where it stopped. At the
end it scores `eval` held-out questions per task (rapid mode) and writes tower.safetensors with a sidecar (the
command, data, steps, seconds, figures); with install_dir it also installs them as the decoder's packaged tower.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from pathlib import Path
from typing import Any

import torch

from openafm import config as cfg
from openafm.checkpoint.clip import load_vision_encoder
from openafm.checkpoint.load import load_model
from openafm.checkpoint.vision import PACKAGED_TOWERS, load_tower, save_tower
from openafm.errors import ConfigError
from openafm.models.image_views import Resolution
from openafm.models.vision import get_vision_preset
from openafm.models.vl_adapter import AdapterConfig, AdapterKind
from openafm.models.vlm import PixelNorm, VisionTower, VisionTowerConfig
from openafm.pipelines.kinds import StageKind
from openafm.splits import Split
from openafm.train.vision.mix import ResolutionMix
from openafm.train.vision.questions import FixedPools, FreshQuestions, Pool, QuestionSource
from openafm.train.vision.read import ReadConfig, ReadHeads, read_accuracy, train_read
from openafm.train.vision.tasks import Task, absent_qa, chance, task_pools
from openafm.train.vision.vlm import VLMTrainConfig, VLMTrainer, answer_questions

STATE_FILE = "train_state.pt"
READ_STATE_FILE = "read_state.pt"
TOWER_FILE = "tower.safetensors"


@dataclasses.dataclass(kw_only=True)
class TowerSpec:
    vision: str = "vision-small"            # a vision preset (models/vision.py)
    adapter: str = AdapterKind.PIXEL_SHUFFLE.value
    hidden: int = 128
    encoder: str | None = None              # a CLIP checkpoint (`openafm vision pretrain`) to start the encoder from
    pixel_norm: PixelNorm = PixelNorm.PER_IMAGE   # see models/vlm.py: what makes a fresh encoder learn glyphs


@dataclasses.dataclass(kw_only=True)
class VisionData:
    pool: Pool = Pool.FIXED                 # questions rendered once (FIXED) or afresh for every batch (FRESH)
    per_task: int = 1000                    # FIXED: rendered training questions per task (emoji: every image, ...)
    emoji_copies: int = 8                   # ... each training emoji also placed this many - 1 times)
    absent: float = 0.15                    # absent-object questions, as a fraction of the questions


@dataclasses.dataclass(kw_only=True)
class VisionStage:
    name: str
    kind: StageKind = StageKind.VISION
    model: str | None = None
    from_: str | None = None
    tower: TowerSpec | None = None          # with model (default: TowerSpec()); a stage with from continues its tower
    data: VisionData = dataclasses.field(default_factory=VisionData)
    read: dict[str, Any] = dataclasses.field(default_factory=dict)      # ReadConfig keys; tasks / mix mappings
    train: dict[str, Any] = dataclasses.field(default_factory=dict)     # VLMTrainConfig keys; tasks / mix mappings
    eval: int = 40                          # held-out questions per task scored at the end (rapid mode)
    checkpoint_every: int = 50
    install_dir: str | None = None

    def __post_init__(self) -> None:
        if (self.model is None) == (self.from_ is None):
            raise ConfigError(f"stage {self.name!r}: a vision stage takes exactly one of model (the decoder) or from "
                              f"(an earlier vision stage), got model={self.model}, from={self.from_}")
        if self.from_ is not None and self.tower is not None:
            raise ConfigError(f"stage {self.name!r}: tower is set by the stage it continues ({self.from_!r}); remove it")
        if self.model is not None and self.tower is None:
            self.tower = TowerSpec()
        if self.data.per_task < 1 or self.data.emoji_copies < 1 or not 0.0 <= self.data.absent < 1.0:
            raise ConfigError(f"stage {self.name!r}: data per_task={self.data.per_task} and emoji_copies="
                              f"{self.data.emoji_copies} must be >= 1 and absent={self.data.absent} in [0, 1)")
        fixed_only = {k: getattr(self.data, k) for k in ("per_task", "emoji_copies")
                      if getattr(self.data, k) != getattr(VisionData(), k)}
        if self.data.pool is Pool.FRESH and fixed_only:
            raise ConfigError(f"stage {self.name!r}: data {fixed_only} size fixed pools; pool: fresh renders every "
                              f"question when it is drawn, so remove them (or use pool: fixed)")
        if self.tower is not None and self.tower.adapter not in {k.value for k in AdapterKind}:
            raise ConfigError(f"stage {self.name!r}: tower.adapter={self.tower.adapter!r} is not one of "
                              f"{[k.value for k in AdapterKind]}")
        if self.tower is not None:
            get_vision_preset(self.tower.vision)
        train_config(self.train, 0, f"stage {self.name!r}")
        read_config(self.read, 0, f"stage {self.name!r}")


def train_config(train: dict[str, Any], seed: int, where: str) -> VLMTrainConfig:
    """VLMTrainConfig from a recipe's mapping: `tasks` {task: weight} and `mix` {ResolutionMix keys} spelled out."""
    return _phase_config(VLMTrainConfig, "train", "task_weights", train, seed, where)


def read_config(read: dict[str, Any], seed: int, where: str) -> ReadConfig:
    """ReadConfig from a recipe's mapping, spelled as train's."""
    return _phase_config(ReadConfig, "read", "tasks", read, seed, where)


def _phase_config(kind, key: str, tasks_field: str, mapping: dict[str, Any], seed: int, where: str):
    data = dict(mapping)
    tasks = data.pop("tasks", None)
    mix = data.pop("mix", None)
    config = cfg.from_dict(kind, {"seed": seed, **data}, f"{where}: {key}")
    if tasks is not None:
        if not isinstance(tasks, dict) or not tasks:
            raise ConfigError(f"{where}: {key}.tasks must map task names to weights, got {tasks!r}")
        config = dataclasses.replace(config, **{tasks_field: tuple(
            (cfg.from_dict(Task, k, f"{where}: {key}.tasks"), float(w)) for k, w in tasks.items())})
    if mix is not None:
        config = dataclasses.replace(config, mix=cfg.from_dict(ResolutionMix, mix, f"{where}: {key}.mix"))
    return config


def _decoder(recipe, stage: VisionStage) -> str:
    while stage.from_ is not None:
        stage = recipe.stage(stage.from_)
    return stage.model


def new_tower(spec: TowerSpec, dim: int) -> VisionTower:
    """A fresh tower for a decoder of width `dim`: the preset's encoder (or the CLIP checkpoint's), random adapter."""
    encoder = load_vision_encoder(spec.encoder) if spec.encoder else None
    vision = encoder.config if encoder is not None else get_vision_preset(spec.vision)
    tower = VisionTower(VisionTowerConfig(vision=vision, adapter=AdapterConfig(
        in_dim=vision.width, out_dim=dim, kind=AdapterKind(spec.adapter), hidden=spec.hidden),
        pixel_norm=spec.pixel_norm))
    if encoder is not None:
        tower.encoder.load_state_dict(encoder.state_dict(), strict=True)
    return tower


def _tower(stage: VisionStage, outputs: dict, dim: int) -> VisionTower:
    if stage.from_ is not None:
        return load_tower(outputs[stage.from_]["tower"]).requires_grad_(True)
    return new_tower(stage.tower, dim)


def training_questions(tasks: list[Task], data: VisionData, seed: int) -> QuestionSource:
    """The stage's question source (train/vision/questions.py)."""
    if data.pool is Pool.FRESH:
        return FreshQuestions(data.absent)
    return FixedPools(training_pools(tasks, data, seed))


def training_pools(tasks: list[Task], data: VisionData, seed: int) -> dict:
    """Each task's training questions, with absent-object questions asked in its words mixed in."""
    pools = task_pools(Split.TRAIN, data.per_task, seed, data.emoji_copies)
    pools = {t: pools[t] for t in tasks}
    for task in tasks:
        n = round(len(pools[task]) * data.absent / (1 - data.absent))
        others = {k: v for k, v in pools.items() if k is not task}
        pools[task] = pools[task] + [q for q in absent_qa(others, 4 * n + 8, seed + 1) if q.task is task][:n]
    return pools


def held_out_figures(lm, tower: VisionTower, tasks: list[Task], n: int, seed: int,
                     split: Split = Split.HELDOUT, mode: Resolution = Resolution.RAPID) -> dict:
    """Greedy answers through the decoder, in `mode` (rapid by default), to n questions per task of `split` (and n
    absent-object questions): accuracy (refusal rate for absent), n, refusals and the first examples. TRAIN with a
    seed no training pool draws is a validation look."""
    held = task_pools(split, n, seed)
    figures = {}
    for task in tasks:
        a = answer_questions(lm.model, lm.tokenizer, tower, held[task][:n], mode)
        figures[task.value] = {"accuracy": a.accuracy, "chance": chance(task), "n": a.total, "refused": a.refused,
                               "examples": [list(x) for x in a.replies[:3]]}
    absent = absent_qa({t: held[t] for t in tasks}, n, seed + 2)
    a = answer_questions(lm.model, lm.tokenizer, tower, absent, mode)
    figures["absent"] = {"refusal_rate": a.accuracy, "n": a.total, "examples": [list(x) for x in a.replies[:3]]}
    return figures


def headline_rates(figures: dict) -> dict[str, float]:
    """held_out_figures' one number per task: its accuracy, or for absent questions the refusal rate."""
    return {k: v["refusal_rate"] if k == "absent" else v["accuracy"] for k, v in figures.items()}


def answerable_refusal_rate(figures: dict) -> float:
    """held_out_figures' refusals over every answerable question (absent-object ones excluded)."""
    tasks = [v for k, v in figures.items() if k != "absent"]
    return sum(v["refused"] for v in tasks) / max(1, sum(v["n"] for v in tasks))


def read_phase(stage: VisionStage, tower: VisionTower, out: Path, seed: int) -> dict | None:
    """The stage's reading phase (train/vision/read.py) on the tower's encoder, if it has steps: its record for
    the sidecar (steps, seconds, the last losses, the heads' held-out accuracy per task)."""
    config = read_config(stage.read, seed, f"stage {stage.name!r}")
    if config.steps == 0:
        return None
    heads = ReadHeads(tower.config.vision.width, config.tasks)
    history = train_read(tower, heads, config, checkpoint=out / READ_STATE_FILE, every=stage.checkpoint_every,
                         log=print)
    last = [r["loss"] for r in history[-50:]]
    return {"config": dict(stage.read), "steps": len(history),
            "step_seconds_sum": round(sum(r["seconds"] for r in history), 1),
            "render_seconds_sum": round(sum(r["render_seconds"] for r in history), 1),
            "loss_mean_last_50": sum(last) / len(last),
            "held_out_heads_rapid": read_accuracy(tower, heads, config.tasks, Split.HELDOUT, max(stage.eval, 1), seed)}


def run_vision(recipe, stage: VisionStage, out: Path, outputs: dict) -> dict:
    torch.manual_seed(recipe.seed)
    decoder = _decoder(recipe, stage)
    lm = load_model(decoder, seed=recipe.seed)
    tower = _tower(stage, outputs, lm.model.config.dim)
    config = train_config(stage.train, recipe.seed, f"stage {stage.name!r}")
    tasks = [t for t, _ in config.task_weights]
    start = time.perf_counter()
    read = read_phase(stage, tower, out, recipe.seed)
    source = training_questions(tasks, stage.data, recipe.seed)
    trainer = VLMTrainer(lm.model, lm.tokenizer, tower, config)
    history = trainer.train(source, log=print, checkpoint=out / STATE_FILE, every=stage.checkpoint_every)
    seconds = time.perf_counter() - start
    figures = held_out_figures(lm, tower, tasks, stage.eval, recipe.seed)
    last = [r["loss"] for r in history[-50:]]
    sidecar = {"command": f"openafm pipeline {recipe.source}", "stage": stage.name,
               "continues": stage.from_, "encoder_init": (stage.tower.encoder or "random") if stage.tower else f"stage {stage.from_}",
               "decoder_frozen": True, "data": dataclasses.asdict(stage.data), "tower_config": tower.config.to_dict(),
               "questions": source.describe(),
               "read": read, "train": dict(stage.train), "resolution_mix": config.resolution_note,
               "steps": len(history), "stage_seconds": round(seconds, 1),
               "step_seconds_sum": round(sum(r["seconds"] for r in history), 1),
               "loss_mean_last_50": sum(last) / max(1, len(last)), "held_out_rapid": figures,
               "parameters": sum(p.numel() for p in tower.parameters())}
    path = save_tower(tower, out / TOWER_FILE, decoder=decoder, sidecar=sidecar, fingerprint_of=lm.model)
    installed = None
    if stage.install_dir is not None:
        dest = Path(stage.install_dir)
        dest.mkdir(parents=True, exist_ok=True)
        name = PACKAGED_TOWERS.get(decoder, f"{decoder}.safetensors")
        for src, suffix in ((path, ".safetensors"), (path.with_suffix(".json"), ".json")):
            shutil.copyfile(src, dest / Path(name).with_suffix(suffix))
        installed = str(dest / name)
    return {"tower": str(path), "decoder": decoder, "steps": len(history), "seconds": round(seconds, 1),
            "held_out_rapid": headline_rates(figures),
            "read_held_out_heads": None if read is None else {k: v["accuracy"]
                                                              for k, v in read["held_out_heads_rapid"].items()},
            "installed": installed}
