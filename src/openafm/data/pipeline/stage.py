"""A pipeline stage maps one Document to a kept Document or a Drop with a reason, and counts what it did.

Stages are streamed shard by shard by :mod:`openafm.data.pipeline.runner`. A stage with cross-document
state (dedup) rebuilds it on resume from its finished output shards through ``restore``; a stage that must
see all its input first (the trained quality filter) does that work in ``prepare``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openafm.data.document import Document


@dataclass(frozen=True)
class Drop:
    """The stage removes the document; ``reason`` is a short kebab-case key counted in the stage report."""

    reason: str


class Stage(ABC):
    """One curation step. ``name`` names its work directory and its entry in the build report."""

    name: str = ""

    @abstractmethod
    def process(self, doc: Document, counts: Counter) -> Document | Drop:
        """Return the (possibly changed) document or a Drop. ``counts`` takes extra per-stage counters."""

    def prepare(self, input_shards: list[Path], work_dir: Path) -> dict[str, Any]:
        """Called once before any shard; returns facts for the stage report (e.g. a model's accuracy)."""
        return {}

    def restore(self, doc: Document) -> None:
        """Called with every document of an already finished output shard when a run resumes."""
