"""`GenerationOptions` and `SamplingMode`: how the model picks tokens (apple_fm_sdk names and rules).

    >>> import openafm.fm as fm
    >>> fm.GenerationOptions(sampling=fm.SamplingMode.random(top=50, seed=42), temperature=0.8).to_dict()
    {'sampling': {'mode': 'random', 'top_k': '50', 'seed': '42'}, 'temperature': 0.8}
"""

from __future__ import annotations

import dataclasses
import enum

from openafm.fm.structured import StructuredDecoding
from openafm.runtime.sampling import SamplingParams

DEFAULT_TEMPERATURE = 0.7          # random sampling without an explicit temperature
DEFAULT_MAXIMUM_RESPONSE_TOKENS = 512


class SamplingModeType(str, enum.Enum):
    GREEDY = "greedy"
    RANDOM = "random"


@dataclasses.dataclass
class SamplingMode:
    """Greedy (always the most likely token) or random (optionally top-k or a probability threshold)."""

    mode_type: SamplingModeType
    top: int | None = None
    probability_threshold: float | None = None
    seed: int | None = None

    @classmethod
    def greedy(cls) -> "SamplingMode":
        return cls(mode_type=SamplingModeType.GREEDY)

    @classmethod
    def random(cls, top: int | None = None, probability_threshold: float | None = None,
               seed: int | None = None) -> "SamplingMode":
        if top is not None and probability_threshold is not None:
            raise ValueError("Cannot specify both 'top' and 'probability_threshold'. Choose one sampling constraint.")
        if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top <= 0):
            raise ValueError(f"'top' must be a positive integer, got {top!r}")
        if probability_threshold is not None and (
                not isinstance(probability_threshold, (int, float)) or not 0.0 <= probability_threshold <= 1.0):
            raise ValueError(f"'probability_threshold' must be between 0.0 and 1.0, got {probability_threshold!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"'seed' must be an integer, got {seed!r}")
        return cls(mode_type=SamplingModeType.RANDOM, top=top, probability_threshold=probability_threshold, seed=seed)


@dataclasses.dataclass
class GenerationOptions:
    sampling: SamplingMode | None = None
    temperature: float | None = None
    maximum_response_tokens: int | None = None
    # openafm extension: decoding-side remedies for structured responses (None: StructuredDecoding()'s defaults;
    # StructuredDecoding.off() for none). Not part of to_dict(), which keeps the SDK's shape.
    structured: StructuredDecoding | None = None

    def __post_init__(self) -> None:
        t = self.temperature
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or t < 0.0):
            raise ValueError(f"'temperature' must be a non-negative number, got {t!r}")
        m = self.maximum_response_tokens
        if m is not None and (isinstance(m, bool) or not isinstance(m, int) or m <= 0):
            raise ValueError(f"'maximum_response_tokens' must be a positive integer, got {m!r}")
        if self.sampling is not None and not isinstance(self.sampling, SamplingMode):
            raise ValueError(f"'sampling' must be a SamplingMode instance, got {type(self.sampling).__name__}")
        if self.structured is not None and not isinstance(self.structured, StructuredDecoding):
            raise ValueError(f"'structured' must be a StructuredDecoding, got {type(self.structured).__name__}")

    def to_dict(self) -> dict:
        result: dict = {}
        if self.sampling is not None:
            sampling = {"mode": self.sampling.mode_type.value}
            if self.sampling.mode_type is SamplingModeType.RANDOM:
                for key, value in (("top_k", self.sampling.top), ("top_p", self.sampling.probability_threshold),
                                   ("seed", self.sampling.seed)):
                    if value is not None:
                        sampling[key] = str(value)
            result["sampling"] = sampling
        if self.temperature is not None:
            result["temperature"] = self.temperature
        if self.maximum_response_tokens is not None:
            result["maximum_response_tokens"] = self.maximum_response_tokens
        return result

    def sampling_params(self) -> SamplingParams:
        """The runtime's sampling for these options. No sampling mode and no temperature (or temperature 0)
        is greedy; a random mode without a temperature uses DEFAULT_TEMPERATURE; greedy ignores temperature."""
        mode = self.sampling
        if mode is None:
            if not self.temperature:
                return SamplingParams()
            return SamplingParams(temperature=float(self.temperature))
        if mode.mode_type is SamplingModeType.GREEDY:
            return SamplingParams()
        temperature = DEFAULT_TEMPERATURE if self.temperature is None else float(self.temperature)
        if temperature == 0:
            return SamplingParams()
        if mode.probability_threshold == 0:                 # no mass at all: only the most likely token stays
            return SamplingParams(temperature=temperature, top_k=1, seed=mode.seed)
        return SamplingParams(temperature=temperature, top_k=mode.top, top_p=mode.probability_threshold,
                              seed=mode.seed)

    @property
    def structured_decoding(self) -> StructuredDecoding:
        return self.structured if self.structured is not None else StructuredDecoding()

    @property
    def max_tokens(self) -> int:
        return self.maximum_response_tokens or DEFAULT_MAXIMUM_RESPONSE_TOKENS
