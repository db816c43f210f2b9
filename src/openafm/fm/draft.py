"""`Draft`: a draft model directory for speculative decoding (openafm extension; Apple's toolkit trains one beside
an adapter, the SDK has no name for it). `SystemLanguageModel(draft=fm.Draft("drafts/smollm2"))` makes every
session on that model generate speculatively: the same text for greedy decoding, the target's distribution when
sampling, faster where the draft predicts the model well. An adapter bundle with a draft/ brings its own.

The directory is what `openafm draft train --out DIR` writes (runtime.draft). It is checked when the Draft is
made (a missing or foreign directory raises AssetsUnavailableError) and again against the model it runs beside.
"""

from __future__ import annotations

import json
from pathlib import Path

from openafm.checkpoint.load import LoadedModel
from openafm.errors import CheckpointError
from openafm.fm.errors import AssetsUnavailableError
from openafm.runtime.draft import FORMAT, DraftModel, load_draft

DEFAULT_GAMMA = 4      # draft tokens per round (benchmarks/speculative.py sweeps 2..8)


class Draft:
    def __init__(self, directory: str | Path, *, gamma: int = DEFAULT_GAMMA):
        self.directory = Path(directory)
        meta = self.directory / "draft.json"
        try:
            info = json.loads(meta.read_text())
        except (OSError, ValueError) as e:
            raise AssetsUnavailableError(f"{self.directory}: not a draft directory ({e}); make one with "
                                         f"`openafm draft train --out DIR`") from e
        if info.get("format") != FORMAT:
            raise AssetsUnavailableError(f"{meta}: format {info.get('format')!r} is not {FORMAT!r}")
        if isinstance(gamma, bool) or not isinstance(gamma, int) or gamma < 1:
            raise ValueError(f"gamma={gamma!r} is invalid: use an integer >= 1")
        self.gamma, self.target_name = gamma, info.get("target_name", "")

    @property
    def key(self) -> str:
        return str(self.directory.resolve())

    def load(self, lm: LoadedModel) -> DraftModel:
        """The draft over the loaded model (raises AssetsUnavailableError for a model it was not made for)."""
        try:
            return load_draft(self.directory, lm.model)
        except CheckpointError as e:
            raise AssetsUnavailableError(str(e)) from e

    def __repr__(self) -> str:
        return f"Draft({str(self.directory)!r}, gamma={self.gamma}, target={self.target_name!r})"
