"""A model's recommended sampling: the settings its makers give for sampled generation, read from where they put
them, so that a server can apply them to a request that leaves sampling unset (vLLM's `--generation-config auto`).

    Hugging Face directory   generation_config.json: temperature / top_p / top_k / min_p, when do_sample is true
                             (transformers' rule: without it the model decodes greedily and the numbers are unused)
    GGUF file                general.sampling.temp / top_p / top_k / min_p (llama.cpp's converter writes them from
                             generation_config.json)
    bundled model            its sidecar's "sampling" (chosen on a validation split: benchmarks/default_sampling.py),
                             else its base model's
    packaged model           its model card's usage example (checkpoint/packaged.py)

Only the fields the source gives are set (a missing top_p is no cut, not transformers' implicit top_k=50). A source
that gives other sampling settings openafm does not run (repetition penalties, mirostat, XTC, a sampler order)
lists them in `unused`, which the server prints at start: nothing is dropped without a word. A value out of range
raises CheckpointError naming the file, the key and the value.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from openafm.errors import CheckpointError

GENERATION_CONFIG = "generation_config.json"
FIELDS = ("temperature", "top_p", "top_k", "min_p")          # generation_config.json names them the same
GGUF_KEYS = {"general.sampling.temp": "temperature", "general.sampling.top_p": "top_p",
             "general.sampling.top_k": "top_k", "general.sampling.min_p": "min_p"}
GGUF_PREFIX = "general.sampling."
HF_UNUSED = ("repetition_penalty", "no_repeat_ngram_size", "typical_p", "epsilon_cutoff", "eta_cutoff")


@dataclasses.dataclass(frozen=True)
class RecommendedSampling:
    temperature: float                  # > 0: a recommendation to sample (greedy needs none)
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    source: str = ""                    # where it was read, in words
    unused: tuple[str, ...] = ()        # settings the source gives that openafm does not apply

    def __post_init__(self) -> None:
        where = self.source or "recommended sampling"
        _check(where, "temperature", self.temperature, lambda t: math.isfinite(t) and t > 0, "a number > 0")
        _check(where, "top_p", self.top_p, lambda p: 0 < p <= 1, "a number in (0, 1]")
        _check(where, "top_k", self.top_k, lambda k: isinstance(k, int) and k >= 1, "an integer >= 1")
        _check(where, "min_p", self.min_p, lambda p: 0 <= p <= 1, "a number in [0, 1]")

    def settings(self) -> dict[str, float | int]:
        """The fields set: {"temperature": 0.2, "top_p": 0.9} (what SamplingParams takes, seed aside)."""
        return {k: v for k in FIELDS if (v := getattr(self, k)) is not None}

    def to_dict(self) -> dict:
        return {**self.settings(), "source": self.source, **({"unused": list(self.unused)} if self.unused else {})}


def _check(where: str, name: str, value, ok, what: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not ok(value):
        raise CheckpointError(f"{where}: {name}={value!r} is invalid: use {what}")


def from_settings(settings: dict[str, Any], source: str, unused: tuple[str, ...] = ()) -> RecommendedSampling | None:
    """{"temperature", "top_p", "top_k", "min_p"} (any of them; HF's top_k 0 and top_p 1 mean no cut) -> the
    recommendation, or None when there is no temperature > 0 to sample with."""
    given = {k: v for k, v in settings.items() if v is not None}
    if given.get("top_k") == 0:
        given.pop("top_k")
    if given.get("top_p") == 1:
        given.pop("top_p")
    temperature = given.pop("temperature", 1.0)
    if temperature == 0:
        return None
    return RecommendedSampling(temperature=temperature, **given, source=source, unused=unused)


def from_generation_config(folder: Path) -> RecommendedSampling | None:
    """A Hugging Face directory's generation_config.json -> its recommendation (None: no file, or do_sample false)."""
    path = Path(folder) / GENERATION_CONFIG
    if not path.is_file():
        return None
    try:
        config = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{path}: not readable JSON ({e})") from None
    if not isinstance(config, dict) or not config.get("do_sample"):
        return None
    unused = tuple(k for k in HF_UNUSED if k in config and config[k] not in (None, 1.0, 0))
    return from_settings({k: config.get(k) for k in FIELDS}, str(path), unused)


def from_gguf_metadata(metadata: dict[str, Any], path: str | Path) -> RecommendedSampling | None:
    """A GGUF file's metadata -> its general.sampling.* recommendation (None: the file gives none)."""
    given = {ours: metadata[key] for key, ours in GGUF_KEYS.items() if key in metadata}
    unused = tuple(sorted(k for k in metadata if k.startswith(GGUF_PREFIX) and k not in GGUF_KEYS))
    if not given:
        return None
    given = {k: int(v) if k == "top_k" else float(v) for k, v in given.items()}          # numpy scalars -> Python
    return from_settings(given, f"{path} (general.sampling.*)", unused)
