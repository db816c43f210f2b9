"""CLIP contrastive pretraining of the vision encoder with FLIP masking (report §5.1), and zero-shot scoring.

One step: a batch of images of distinct classes (so no caption is a false negative for another image of the
batch), each with one of its captions (its English name with probability `english_share`, else one of its
names in 13 other languages or its short names); FLIP keeps a share of each image's patches
(train/vision/flip.py); both towers embed; the loss is the symmetric InfoNCE of CLIP,

    logits = exp(t) * I @ T^T          (I, T: unit vectors, t: the learned log inverse temperature)
    loss   = (CE(logits, diag) + CE(logits^T, diag)) / 2

Zero-shot accuracy: each image's class is the caption (among every class name of the set) closest to it,
the whole image seen, unmasked (FLIP evaluates unmasked too).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

import torch
from torch.nn import functional as F
from tqdm import tqdm

from openafm.data.images.image_set import ImageSet
from openafm.errors import ConfigError
from openafm.models.clip import ClipModel
from openafm.tokenizer import Tokenizer
from openafm.train.config import OptimizerConfig, ScheduleConfig, ScheduleKind
from openafm.train.optimizer import build_optimizer, clip_gradients
from openafm.train.schedule import Schedule
from openafm.train.vision.flip import keep_for


def contrastive_loss(images: torch.Tensor, texts: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Symmetric InfoNCE over a batch of matching pairs: images [B, E], texts [B, E] unit vectors, scale = 1/T."""
    logits = scale * images @ texts.T                                        # [B, B]
    target = torch.arange(images.shape[0], device=images.device)
    return (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)) / 2


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClipTrainConfig:
    steps: int = 300
    batch_size: int = 128
    image_size: int = 224             # training resolution (the small preset's 8x8 grid at patch 28)
    mask_ratio: float = 0.0           # FLIP: the share of patches dropped (0, 0.5, 0.75)
    lr: float = 1e-3
    weight_decay: float = 0.1
    warmup_steps: int = 20
    english_share: float = 0.5        # captions: the English name this often, else another name or language
    schedule: ScheduleKind = ScheduleKind.WARMUP_COSINE   # CONSTANT for runs cut by a time budget
    seed: int = 0

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch_size < 2:
            raise ConfigError(f"clip: steps={self.steps} must be >= 1 and batch_size={self.batch_size} >= 2")
        if not 0 <= self.english_share <= 1:
            raise ConfigError(f"clip: english_share={self.english_share} must lie in [0, 1]")
        if self.warmup_steps > self.steps:
            raise ConfigError(f"clip: warmup_steps={self.warmup_steps} exceed steps={self.steps}")


class CaptionTokens:
    """Captions tokenized once: the SmolLM2 BPE ids of each distinct text, cut to max_tokens."""

    def __init__(self, tokenizer: Tokenizer, max_tokens: int):
        self.tokenizer, self.max_tokens = tokenizer, max_tokens
        self.cache: dict[str, list[int]] = {}

    def batch(self, texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """-> ids [B, T] (padded with 0), valid [B, T] bool; T = the longest caption (<= max_tokens)."""
        new = [t for t in dict.fromkeys(texts) if t not in self.cache]
        for text, ids in zip(new, self.tokenizer.encode_batch(new) if new else []):
            if not ids:
                raise ConfigError(f"clip: the caption {text!r} has no tokens")
            self.cache[text] = ids[: self.max_tokens]
        rows = [self.cache[t] for t in texts]
        width = max(len(r) for r in rows)
        ids = torch.zeros(len(rows), width, dtype=torch.long)
        valid = torch.zeros(len(rows), width, dtype=torch.bool)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(r)
            valid[i, : len(r)] = True
        return ids, valid


class PairSampler:
    """Batches of images of distinct classes (keys), a random image of each class, a random caption each."""

    def __init__(self, images: ImageSet, *, english_share: float, seed: int):
        self.images, self.english_share = images, english_share
        by_key: dict[str, list[int]] = {}
        for i, key in enumerate(images.keys):
            by_key.setdefault(key, []).append(i)
        self.groups = list(by_key.values())
        self.generator = torch.Generator().manual_seed(seed)
        self.order: list[int] = []

    def sample(self, batch: int) -> tuple[list[int], list[str]]:
        if batch > len(self.groups):
            raise ConfigError(f"clip: batch_size={batch} exceeds the {len(self.groups)} distinct classes")
        if len(self.order) < batch:                                          # a new pass over the classes
            self.order += torch.randperm(len(self.groups), generator=self.generator).tolist()
        classes, self.order = self.order[:batch], self.order[batch:]
        if len(set(classes)) < batch:                                        # a pass boundary repeated a class
            classes = list(dict.fromkeys(classes))
            spare = [c for c in range(len(self.groups)) if c not in set(classes)]
            pick = torch.randperm(len(spare), generator=self.generator)[: batch - len(classes)].tolist()
            classes += [spare[p] for p in pick]
        index, texts = [], []
        for c in classes:
            members = self.groups[c]
            i = members[int(torch.randint(len(members), (1,), generator=self.generator))]
            captions = self.images.captions[i]
            if len(captions) == 1 or float(torch.rand(1, generator=self.generator)) < self.english_share:
                text = captions[0]
            else:
                text = captions[1 + int(torch.randint(len(captions) - 1, (1,), generator=self.generator))]
            index.append(i)
            texts.append(text)
        return index, texts


@dataclasses.dataclass
class StepRecord:
    step: int
    loss: float
    temperature: float
    seconds: float                    # wall time of this step (data, forward, backward, update)


class ClipTrainer:
    """The pretraining run, one step at a time (benchmarks interleave several runs step by step)."""

    def __init__(self, model: ClipModel, images: ImageSet, tokenizer: Tokenizer, config: ClipTrainConfig):
        torch.manual_seed(config.seed)
        self.model, self.images, self.config = model, images, config
        no_decay = ["norm", "bias", "pos", "embed", "register", "logit_scale"]
        self.optimizer = build_optimizer(model, OptimizerConfig(lr=config.lr, weight_decay=config.weight_decay,
                                                                betas=[0.9, 0.98], no_decay=no_decay))
        self.schedule = Schedule(ScheduleConfig(kind=config.schedule, warmup_steps=config.warmup_steps,
                                                min_lr_ratio=0.05), config.steps, config.lr)
        self.sampler = PairSampler(images, english_share=config.english_share, seed=config.seed)
        self.tokens = CaptionTokens(tokenizer, model.config.text.max_tokens)
        self.mask_generator = torch.Generator().manual_seed(config.seed + 1)
        self.records: list[StepRecord] = []

    @property
    def done(self) -> bool:
        return len(self.records) >= self.config.steps

    def step(self) -> StepRecord:
        c, model, step = self.config, self.model, len(self.records)
        if self.done:
            raise ConfigError(f"clip: the run already took its {c.steps} steps")
        model.train()
        start = time.perf_counter()
        index, texts = self.sampler.sample(c.batch_size)
        pixels = self.images.pixels(index, size=c.image_size)                # [B, 3, S, S]
        ids, valid = self.tokens.batch(texts)
        keep = keep_for(model.config.vision, batch=len(index), image_size=c.image_size, mask_ratio=c.mask_ratio,
                        generator=self.mask_generator)
        loss = contrastive_loss(model.encode_image(pixels, keep), model.encode_text(ids, valid), model.scale())
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        clip_gradients(model.parameters(), 1.0)
        for group in self.optimizer.param_groups:
            group["lr"] = self.schedule.lr(step)
        self.optimizer.step()
        with torch.no_grad():
            record = StepRecord(step, float(loss), float(1 / model.scale()), time.perf_counter() - start)
        self.records.append(record)
        model.eval()
        return record


def train_clip(model: ClipModel, images: ImageSet, tokenizer: Tokenizer, config: ClipTrainConfig, *,
               progress: bool = True, on_step: Callable[[StepRecord], None] | None = None) -> list[StepRecord]:
    """Train `model` in place for config.steps steps (a progress bar); returns one record per step."""
    trainer = ClipTrainer(model, images, tokenizer, config)
    bar = tqdm(range(config.steps), desc=f"clip (mask {config.mask_ratio:.0%})", disable=not progress)
    for _ in bar:
        record = trainer.step()
        bar.set_postfix(loss=f"{record.loss:.3f}", T=f"{record.temperature:.3f}")
        if on_step is not None:
            on_step(record)
    return trainer.records


@torch.no_grad()
def embed_images(model: ClipModel, images: ImageSet, image_size: int, batch: int = 256) -> torch.Tensor:
    """[N, E] unit image embeddings, whole images (no masking)."""
    model.eval()
    return torch.cat([model.encode_image(images.pixels(range(i, min(i + batch, len(images))), size=image_size))
                      for i in range(0, len(images), batch)])


@torch.no_grad()
def embed_texts(model: ClipModel, tokenizer: Tokenizer, texts: Sequence[str], batch: int = 512) -> torch.Tensor:
    model.eval()
    tokens = CaptionTokens(tokenizer, model.config.text.max_tokens)
    return torch.cat([model.encode_text(*tokens.batch(texts[i: i + batch])) for i in range(0, len(texts), batch)])


@dataclasses.dataclass
class ZeroShot:
    top1: float
    top5: float
    classes: int                      # the candidate names (chance: 1 / classes)
    images: int


def zero_shot(model: ClipModel, images: ImageSet, tokenizer: Tokenizer, image_size: int) -> ZeroShot:
    """Each image against every distinct English name of the set; correct when its own name ranks first."""
    names = list(dict.fromkeys(images.names))
    target = torch.tensor([names.index(n) for n in images.names])
    scores = embed_images(model, images, image_size) @ embed_texts(model, tokenizer, names).T    # [N, C]
    top = scores.topk(min(5, len(names)), dim=1).indices
    return ZeroShot(top1=float((top[:, 0] == target).float().mean()),
                    top5=float((top == target[:, None]).any(1).float().mean()), classes=len(names),
                    images=len(images))
