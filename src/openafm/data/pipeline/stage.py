"""A pipeline stage maps one Document to a kept Document or a Drop with a reason, and counts what it did.

Stages run shard by shard through :mod:`openafm.data.pipeline.runner`, on whichever executor the build uses, so
``process`` sees one document at a time with no state carried between documents or shards. A stage that needs
all its input first — dedup's global decision, the quality filter trained on the data — does that work in
``prepare`` (on the driver, using the executor for what is per shard) and keeps it on disk under its work
directory, so a resumed run reuses it.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openafm.data.document import Document
from openafm.data.pipeline.executor import Executor


@dataclass(frozen=True)
class Drop:
    """The stage removes the document; ``reason`` is a short kebab-case key counted in the stage report."""

    reason: str


class Scope(enum.Enum):
    DOCUMENT = "document"   # prepare needs nothing from the input: the stage runs shard by shard behind the last
    CORPUS = "corpus"       # prepare reads all of the input first (dedup's decision, the trained quality filter)


class Stage(ABC):
    """One curation step. ``name`` names its work directory and its entry in the build report. A stage is
    pickled to the executor's workers, so it holds only plain data (a trained model's arrays, a list of ids)."""

    name: str = ""
    scope: Scope = Scope.DOCUMENT

    @abstractmethod
    def process(self, doc: Document, counts: Counter) -> Document | Drop:
        """Return the (possibly changed) document or a Drop. ``counts`` takes extra per-stage counters."""

    def prepare(self, input_shards: list[Path], work_dir: Path, executor: Executor) -> dict[str, Any]:
        """Called once before any shard; returns facts for the stage report (e.g. a model's accuracy)."""
        return {}
