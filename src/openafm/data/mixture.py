"""The pretraining mixture: domain weights, temperature sampling of languages, a multilingual curriculum.

Weights are token shares: with weights {general: 0.6, code: 0.2, ...} about 60% of the tokens a loader
yields come from general text. Inside the multilingual bucket each language gets a share proportional to
n_lang ** (1 / T), n_lang being its token count (T = 1: as found; larger T flattens toward uniform, giving
rare languages more than their natural share). Inside the other buckets sources share by token count.

The report raises the multilingual share over training (8% -> 30%); `Curriculum` moves one domain's weight
linearly from `start` to `end` as training progresses (0 -> 1) and rescales the other domains so the
weights still sum to 1, keeping their proportions.

`MixtureSampler` turns that into one choice per document draw: source i is drawn with probability
proportional to share_i / mean_document_length_i (so the token shares come out as asked), using a
counter-based random number (seed, draw index), so any draw can be recomputed without replaying the others.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from openafm.data.document import Document
from openafm.errors import ConfigError

DOMAINS = Document.DOMAINS
_TOLERANCE = 1e-6


def _default_weights() -> dict[str, float]:
    # The report does not publish its domain shares; these are openafm's defaults (multilingual at the
    # curriculum's 8% start).
    return {"general": 0.62, "code": 0.15, "math": 0.15, "multilingual": 0.08}


@dataclasses.dataclass(kw_only=True)
class Curriculum:
    """Move `domain`'s weight linearly from `start` (progress 0) to `end` (progress 1)."""

    domain: str = "multilingual"
    start: float = 0.08
    end: float = 0.30

    def __post_init__(self) -> None:
        if self.domain not in DOMAINS:
            raise ConfigError(f"curriculum.domain {self.domain!r} is not one of {DOMAINS}")
        for name in ("start", "end"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"curriculum.{name} {value} must be in [0, 1]")

    def share(self, progress: float) -> float:
        return self.start + (self.end - self.start) * min(max(progress, 0.0), 1.0)


@dataclasses.dataclass(kw_only=True)
class MixtureConfig:
    weights: dict[str, float] = dataclasses.field(default_factory=_default_weights)
    language_temperature: float = 3.0    # T in p_lang ∝ n_lang ** (1 / T), multilingual bucket only
    curriculum: Curriculum | None = None

    def __post_init__(self) -> None:
        unknown = sorted(set(self.weights) - set(DOMAINS))
        if unknown:
            raise ConfigError(f"mixture weights name unknown domains {unknown}; domains are {DOMAINS}")
        negative = {k: v for k, v in self.weights.items() if not v >= 0}
        if negative:
            raise ConfigError(f"mixture weights must be >= 0, got {negative}")
        total = sum(self.weights.values())
        if abs(total - 1.0) > _TOLERANCE:
            raise ConfigError(f"mixture weights {self.weights} sum to {total:.6g}, not 1")
        if not (self.language_temperature > 0 and math.isfinite(self.language_temperature)):
            raise ConfigError(f"language_temperature {self.language_temperature} must be a finite number > 0")
        if self.curriculum is not None:
            rest = total - self.weights.get(self.curriculum.domain, 0.0)
            if rest <= 0 and min(self.curriculum.start, self.curriculum.end) < 1:
                raise ConfigError(f"curriculum on {self.curriculum.domain!r}: the other domains' weights "
                                  f"{self.weights} sum to 0, so nothing can fill the remaining share")

    def domain_weights(self, progress: float = 0.0) -> dict[str, float]:
        """Weights of every domain at training progress in [0, 1] (they sum to 1)."""
        weights = {d: float(self.weights.get(d, 0.0)) for d in DOMAINS}
        c = self.curriculum
        if c is None:
            return weights
        share = c.share(progress)
        rest = 1.0 - weights[c.domain]
        scale = (1.0 - share) / rest if rest > 0 else 0.0
        return {d: share if d == c.domain else w * scale for d, w in weights.items()}

    def used_domains(self) -> set[str]:
        """Domains with a non-zero weight at some point of training."""
        return {d for d in DOMAINS if self.domain_weights(0.0)[d] > 0 or self.domain_weights(1.0)[d] > 0}


def language_probs(tokens_per_lang: dict[str, int], temperature: float) -> dict[str, float]:
    """p_lang ∝ n_lang ** (1 / temperature) over languages with their token counts n_lang > 0."""
    if not tokens_per_lang:
        raise ConfigError("language_probs needs at least one language")
    bad = {k: v for k, v in tokens_per_lang.items() if not v > 0}
    if bad:
        raise ConfigError(f"language token counts must be > 0, got {bad}")
    if not temperature > 0:
        raise ConfigError(f"temperature {temperature} must be > 0")
    logs = {k: math.log(v) / temperature for k, v in tokens_per_lang.items()}
    top = max(logs.values())
    raw = {k: math.exp(v - top) for k, v in logs.items()}
    total = sum(raw.values())
    return {k: v / total for k, v in raw.items()}


@dataclasses.dataclass(kw_only=True, frozen=True)
class SourceStats:
    """One source the sampler chooses among: a (domain, language) stream of documents."""

    domain: str
    lang: str | None
    n_tokens: int   # document tokens plus one EOS per document (what the loader emits)
    n_docs: int


class MixtureSampler:
    """Chooses the source of each document draw: deterministic in (seed, draw index, progress)."""

    def __init__(self, config: MixtureConfig, sources: list[SourceStats], seed: int = 0):
        self.config, self.sources, self.seed = config, list(sources), int(seed)
        present = {s.domain for s in self.sources if s.n_docs > 0}
        missing = sorted(config.used_domains() - present)
        if missing:
            raise ConfigError(f"mixture gives weight to domains {missing} but no source has documents for them "
                              f"(sources: {[f'{s.domain}/{s.lang}' for s in self.sources]})")
        unlabelled = [i for i, s in enumerate(self.sources) if s.domain == "multilingual" and s.lang is None]
        if unlabelled:
            raise ConfigError(f"multilingual sources need a language for temperature sampling; sources {unlabelled} "
                              "have lang=None")
        self._within = self._within_domain_shares()
        self._mean_len = np.array([s.n_tokens / s.n_docs if s.n_docs else 1.0 for s in self.sources])
        self._cached: tuple[float, np.ndarray] | None = None

    def _within_domain_shares(self) -> np.ndarray:
        """[n_sources] each source's share of its own domain's tokens."""
        within = np.zeros(len(self.sources))
        for domain in DOMAINS:
            idx = [i for i, s in enumerate(self.sources) if s.domain == domain and s.n_docs > 0]
            if not idx:
                continue
            if domain == "multilingual":
                per_lang: dict[str, int] = {}
                for i in idx:
                    per_lang[self.sources[i].lang] = per_lang.get(self.sources[i].lang, 0) + self.sources[i].n_tokens
                probs = language_probs(per_lang, self.config.language_temperature)
                for i in idx:   # several sources of one language share its probability by token count
                    s = self.sources[i]
                    within[i] = probs[s.lang] * s.n_tokens / per_lang[s.lang]
            else:
                total = sum(self.sources[i].n_tokens for i in idx)
                for i in idx:
                    within[i] = self.sources[i].n_tokens / total
        return within

    def token_shares(self, progress: float) -> np.ndarray:
        """[n_sources] the share of emitted tokens each source should get at this progress (sums to 1)."""
        weights = self.config.domain_weights(progress)
        return np.array([weights[s.domain] for s in self.sources]) * self._within

    def draw_probs(self, progress: float) -> np.ndarray:
        """[n_sources] the probability that one document draw picks each source."""
        if self._cached is not None and self._cached[0] == progress:
            return self._cached[1]
        raw = self.token_shares(progress) / self._mean_len
        probs = raw / raw.sum()
        self._cached = (progress, probs)
        return probs

    def choose(self, draw: int, progress: float) -> int:
        """Index of the source of document draw number `draw` at this training progress."""
        cdf = np.cumsum(self.draw_probs(progress))
        u = counter_uniform(self.seed, 0x6D6978, draw) * cdf[-1]
        return min(int(np.searchsorted(cdf, u, side="right")), len(cdf) - 1)


_MASK = (1 << 64) - 1


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def counter_uniform(*counters: int) -> float:
    """A uniform float in [0, 1) that depends only on the integer counters (splitmix64 over them)."""
    h = 0
    for c in counters:
        h = _splitmix64(h ^ (int(c) & _MASK))
    return (h >> 11) / float(1 << 53)
