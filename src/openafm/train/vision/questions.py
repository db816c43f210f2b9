"""Where an answer stage's training questions come from: pools rendered once, or images rendered afresh per batch.

    FIXED  `per_task` questions per task rendered before training (emoji: every training image, with placed
           copies), absent-object questions mixed into each pool; batches are drawn from them with replacement, so
           a long stage sees each image many times (the shipped recipe's 6,700 answer steps: ~10 passes)
    FRESH  every question rendered when its batch is drawn (tasks.RENDER), from a seed the trainer's checkpointed
           random generator draws, so no image repeats and a resumed run draws what the killed one would have;
           each question is an absent-object one with probability `absent`

Fresh images are what made the reading phase learn (train/vision/read.py: 58% from a fixed pool of 3,000 digit
images, 73% from fresh ones after the same steps). For the answer stages they measured no better: 300 steps from the
shipped tower on either read alike on validation, and the fixed pools were not learned by heart (training loss 1.07
on them, 1.10 on fresh images; benchmarks/vision_answer_probe.py, docs/results/vision_answer_probe.json).

    source = FreshQuestions(absent=0.25)             # or FixedPools(training_pools(...))
    batch = source.draw(Task.READ_DIGIT, 8, rng)     # -> list[QA], every image new
    source.answers(Task.READ_DIGIT)                  # what the alignment warm-up contrasts: labels (+ the refusal)
"""

from __future__ import annotations

import enum
import random
from typing import Protocol

from openafm.errors import ConfigError
from openafm.splits import Split
from openafm.train.vision.tasks import ABSENT_FROM, QA, RENDER, Task, labels

FRESH_SEED = 2_000_000_000      # fresh renderings' seeds start here: far from pools' (0..) and validation's (7)


class Pool(str, enum.Enum):
    FIXED = "fixed"
    FRESH = "fresh"


class QuestionSource(Protocol):
    def draw(self, task: Task, n: int, rng: random.Random) -> list[QA]:
        """n training questions asked in `task`'s words (absent-object ones among them)."""

    def answers(self, task: Task) -> list[str]:
        """Every answer a `task` question can have in this source, sorted."""

    def describe(self) -> dict:
        """What a stage's sidecar records of the source."""


class FixedPools:
    """Questions drawn with replacement from pools rendered once ({task: [QA]}, absent-object ones inside)."""

    def __init__(self, pools: dict[Task, list[QA]]):
        empty = [t.value for t, p in pools.items() if not p]
        if empty:
            raise ConfigError(f"fixed question pools: {empty} have no questions")
        self.pools = pools

    def draw(self, task: Task, n: int, rng: random.Random) -> list[QA]:
        return [rng.choice(self.pools[task]) for _ in range(n)]

    def answers(self, task: Task) -> list[str]:
        return sorted({q.answer for q in self.pools[task]})

    def describe(self) -> dict:
        return {"pool": Pool.FIXED.value, "sizes": {t.value: len(p) for t, p in self.pools.items()}}


class FreshQuestions:
    """Every question rendered when drawn (training split: its fonts, palettes and emoji styles); a fraction
    `absent` asks the task's question of an image of a kind that cannot answer it (tasks.ABSENT_FROM)."""

    def __init__(self, absent: float):
        if not 0.0 <= absent < 1.0:
            raise ConfigError(f"fresh questions: absent={absent} must be in [0, 1)")
        self.absent = absent

    def draw(self, task: Task, n: int, rng: random.Random) -> list[QA]:
        out = []
        for _ in range(n):
            seed = FRESH_SEED + rng.randrange(1 << 30)
            if rng.random() < self.absent:
                shown = rng.choice(ABSENT_FROM[task])
                image = RENDER[shown](Split.TRAIN, 1, seed)[0].image
                out.append(QA(task, image, task.refusal, absent=True))
            else:
                out.append(RENDER[task](Split.TRAIN, 1, seed)[0])
        return out

    def answers(self, task: Task) -> list[str]:
        return sorted({*labels(task), *([task.refusal] if self.absent > 0 else [])})

    def describe(self) -> dict:
        return {"pool": Pool.FRESH.value, "absent": self.absent}
