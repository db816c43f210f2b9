"""The engine's request and event: what a caller submits (`RowRequest`) and what it hears back (`RowEvent`).

A request carries its prompt ids, token budget, sampling parameters, stop strings, grammar constraint, log-prob
count, cancel token, speculation choice and an `on_event` callback, which the engine calls from its own thread
for every token of the request and once more (or with the last token) with `finish` set. Finish reasons are
`runtime.generate.FinishReason`'s, plus the engine's own two below.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

from openafm.runtime.cancel import CancelToken
from openafm.runtime.proposers import ProposerKind
from openafm.runtime.sampling import SamplingParams

CANCELLED = "cancelled"     # a finish reason of the engine only: the request's CancelToken was cancelled
ERROR = "error"             # the row failed (its grammar reached a dead end, ...): `RowEvent.error` says why


@dataclasses.dataclass
class RowEvent:
    """One token of one request (or its end): what streams to the client, and what the profiler shows."""
    token_id: int                  # -1 on an end event with no token
    text: str                      # newly visible text ('' while text is held back for a stop string)
    forced: bool = False           # the grammar forced it (not sampled)
    logprob: float | None = None   # of the chosen token, under the distribution sampled from
    top_logprobs: list[tuple[int, float]] | None = None
    mask_seconds: float = 0.0      # time computing the grammar mask for this token
    at: float = 0.0                # seconds since the request was submitted
    finish: str | None = None      # set on the last event: eos / stop / length / complete / cancelled / error
    error: str | None = None
    prompt_tokens: int = 0         # set on the first event
    cached_tokens: int = 0         # prompt tokens reused from the prefix cache (first event)
    prefill_seconds: float = 0.0   # first event
    kv_bytes: int = 0              # K/V bytes this request's tokens hold
    guessed: bool = False          # the token was a proposer's guess, verified in the step that fed it
    proposed: int = 0              # last event: guesses of this request the engine verified ...
    accepted: int = 0              # ... and of them, accepted


@dataclasses.dataclass
class RowRequest:
    prompt: list[int]
    max_new_tokens: int
    on_event: Callable[[RowEvent], None]
    sampling: SamplingParams = SamplingParams()
    stop: tuple[str, ...] = ()
    constraint: object | None = None          # runtime.constrained.GrammarConstraint (or a steered one)
    logprobs: int | None = None               # None: no log-probs; k >= 0: the chosen token's and the top k
    cancel: CancelToken = dataclasses.field(default_factory=CancelToken)
    speculate: ProposerKind | None = None      # None: the engine's `EngineConfig.speculate`
    submitted: float = dataclasses.field(default_factory=time.perf_counter)
