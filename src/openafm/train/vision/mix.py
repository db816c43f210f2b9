"""The report's multimodal training mixes: which kind of example comes next, and at which resolution mode.

Data (report §4.2, the joint vision-language stage): 60% text-only, 10% interleaved image-text, 28.5% image
captions, 1.5% domain-specific (here: "read the word" and "name the emoji" question-answer pairs).

Resolution (report §2.3): a low-resolution image gets a coin flip between rapid mode and the others; a
high-resolution image gets rapid mode 1% of the time, then balanced mode for 20% of the rest (so 19.8%
balanced, 79.2% high). The report is silent on two points, chosen here: "the others" for a low-resolution
image split as they do for a high-resolution one (20% balanced, 80% high), and an image is low-resolution
when its longer side is below the view size (672 on-device): it holds no detail a tile could add.
"""

from __future__ import annotations

import dataclasses
import enum
import random

from openafm.errors import ConfigError
from openafm.models.image_views import Resolution


class ExampleKind(enum.Enum):
    TEXT = "text"
    INTERLEAVED = "interleaved"
    CAPTION = "caption"
    DOMAIN = "domain"


REPORT_DATA_MIX = {ExampleKind.TEXT: 0.60, ExampleKind.INTERLEAVED: 0.10, ExampleKind.CAPTION: 0.285,
                   ExampleKind.DOMAIN: 0.015}


@dataclasses.dataclass(frozen=True, kw_only=True)
class ResolutionMix:
    low_rapid: float = 0.5          # low-resolution image: P(rapid)
    high_rapid: float = 0.01        # high-resolution image: P(rapid)
    balanced_of_rest: float = 0.2   # of the non-rapid draws: P(balanced); the rest are high
    low_below: int = 672            # an image whose longer side is below this is low-resolution

    def __post_init__(self) -> None:
        for name in ("low_rapid", "high_rapid", "balanced_of_rest"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"resolution mix: {name}={getattr(self, name)} must be a probability in [0, 1]")

    def probabilities(self, longer_side: int) -> dict[Resolution, float]:
        """P(mode) for an image whose longer side is `longer_side` pixels."""
        rapid = self.low_rapid if longer_side < self.low_below else self.high_rapid
        rest = 1.0 - rapid
        return {Resolution.RAPID: rapid, Resolution.BALANCED: rest * self.balanced_of_rest,
                Resolution.HIGH: rest * (1.0 - self.balanced_of_rest)}

    def sample(self, longer_side: int, rng: random.Random) -> Resolution:
        """One draw, as the report's two-step rule: rapid or not, then balanced or high."""
        rapid = self.low_rapid if longer_side < self.low_below else self.high_rapid
        if rng.random() < rapid:
            return Resolution.RAPID
        return Resolution.BALANCED if rng.random() < self.balanced_of_rest else Resolution.HIGH


class DataMix:
    """Draws example kinds in fixed proportions (default: the report's multimodal mix)."""

    def __init__(self, weights: dict[ExampleKind, float] | None = None, seed: int = 0):
        weights = dict(REPORT_DATA_MIX if weights is None else weights)
        if any(w < 0 for w in weights.values()) or sum(weights.values()) <= 0:
            raise ConfigError(f"data mix weights must be non-negative with a positive sum, got "
                              f"{ {k.value: w for k, w in weights.items()} }")
        total = sum(weights.values())
        self.kinds = list(weights)
        self.weights = [weights[k] / total for k in self.kinds]
        self.rng = random.Random(seed)

    def sample(self) -> ExampleKind:
        return self.rng.choices(self.kinds, self.weights)[0]
