"""The engine's request and event: what a caller submits (`RowRequest`), what it hears back (`RowEvent`), and the
whole of one request's answer gathered from its events (`Completion`).

A request carries its prompt ids, token budget, sampling parameters, stop strings, grammar constraint, log-prob
count, cancel token, speculation choice, tokens to score as the first new token (an evaluation's answer choices,
read from the prefill that also starts the generation) and an `on_event` callback, which the engine calls from its own thread
(or the caller's, under `Engine.run`) for every token of the request and once more (or with the last token) with
`finish` set: a `FinishReason`, or one of the engine's own two below.

Continuing a sequence (a session's turns): a request may bring `cache`, a single-row KVCache holding the K/V of
the tokens before its prompt (`prompt` is then only the new tokens). The engine prefills the prompt on top of it,
and the last event hands back the row's K/V as a KVCache holding every token fed to the model (the prompt and
the output but its last token), for the next request to continue.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from typing import Callable

from openafm.runtime.cancel import CancelToken, GenerationCancelled
from openafm.runtime.kv_cache import KVCache
from openafm.runtime.proposers import ProposerKind
from openafm.runtime.sampling import SamplingParams

class FinishReason:
    EOS = "eos"          # the model produced an end-of-sequence token
    STOP = "stop"        # a stop string appeared (it is cut from the text)
    LENGTH = "length"    # max_new_tokens reached
    COMPLETE = "complete"  # the constraint's grammar is complete and admits nothing more


class Forced(enum.Enum):
    """What the engine does with the tokens a request's grammar forces."""
    FEED = "feed"          # append them without sampling, all in one step (fast-forward)
    SAMPLE = "sample"      # sample them one step each like any token (the mask leaves one choice): for measuring


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
    exception: Exception | None = None     # with `error`: what was raised (a caller in the same process re-raises it)
    prompt_tokens: int = 0         # set on the first event
    cached_tokens: int = 0         # prompt tokens reused from the prefix cache (first event)
    scores: list[float] | None = None   # first event of a request with `score`: those tokens' log-probabilities
    prefill_seconds: float = 0.0   # first event
    kv_bytes: int = 0              # K/V bytes this request's tokens hold
    guessed: bool = False          # the token was a proposer's guess, verified in the step that fed it
    proposed: int = 0              # last event: guesses of this request the engine verified ...
    accepted: int = 0              # ... and of them, accepted
    steps: int = 0                 # last event: decode steps the request's row took part in
    cache: KVCache | None = None   # last event of a request that brought a cache: the row's K/V (see above)


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
    cache: KVCache | None = None              # the K/V of the tokens before `prompt` (continuing a sequence)
    history: tuple[int, ...] = ()             # those tokens' ids, for proposers to read (never fed again)
    forced: Forced = Forced.FEED
    score: tuple[int, ...] = ()               # token ids whose log-probabilities as the first new token (the model's
                                              # own distribution: no constraint, no temperature) the first event gives
    submitted: float = dataclasses.field(default_factory=time.perf_counter)

    @property
    def continues(self) -> bool:
        """Whether it continues a sequence (a cache holding tokens); a fresh one may start from the prefix cache."""
        return self.cache is not None and self.cache.steps > 0


@dataclasses.dataclass
class Completion:
    """One request's answer, gathered from its events: pass it as the request's `on_event`.

    `token_ids` are the tokens produced, an end-of-sequence token excepted (as in `text`)."""
    token_ids: list[int] = dataclasses.field(default_factory=list)
    text: str = ""
    finish: str | None = None
    error: str | None = None
    exception: Exception | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0
    scores: list[float] | None = None
    prefill_seconds: float = 0.0
    first_token_at: float = 0.0       # seconds from submission to the first token
    last_at: float = 0.0              # ... to the last event
    forced: int = 0                   # tokens the grammar forced
    proposed: int = 0
    accepted: int = 0
    steps: int = 0
    cache: KVCache | None = None
    on_event: Callable[[RowEvent], None] | None = None    # also called with every event (streaming)

    def __call__(self, event: RowEvent) -> None:
        if event.prompt_tokens and not self.prompt_tokens:
            self.prompt_tokens, self.cached_tokens = event.prompt_tokens, event.cached_tokens
            self.prefill_seconds, self.scores = event.prefill_seconds, event.scores
        if event.token_id >= 0 and not (event.finish == FinishReason.EOS and not event.forced):
            self.token_ids.append(event.token_id)
            self.forced += event.forced
        if event.token_id >= 0 and not self.first_token_at:
            self.first_token_at = event.at
        self.text += event.text
        self.last_at = event.at
        if event.finish is not None:
            self.finish, self.error, self.cache = event.finish, event.error, event.cache
            self.exception = self.exception or event.exception
            self.proposed, self.accepted, self.steps = event.proposed, event.accepted, event.steps
        if self.on_event is not None:
            try:
                self.on_event(event)
            except Exception as e:        # the engine cancels the row; the caller re-raises it (raise_if_failed)
                self.exception = self.exception or e
                raise

    def raise_if_failed(self) -> None:
        """Raise what ended the request early: the exception a row or its consumer raised, or GenerationCancelled."""
        if self.exception is not None:
            raise self.exception
        if self.finish == ERROR:
            raise RuntimeError(f"generation failed: {self.error}")
        if self.finish == CANCELLED:
            raise GenerationCancelled("before the prefill" if not self.token_ids and not self.steps
                                      else f"before decode step {self.steps + 1}")

    @property
    def decode_seconds(self) -> float:
        """From the first token to the last event."""
        return max(0.0, self.last_at - self.first_token_at)
