"""One request's state inside the engine (`Row`): its sampler, text, stop strings, forced tokens and proposer, and
how it picks each token (`Row.choose`); a prompt still prefilling (`Prefill`).

`Row.choose` is everything row-local about a token: the grammar mask, sampling with the row's own generator,
log-probs, the grammar's forced tokens (fed at the next step, all at once), and the end checks (end of sequence,
a stop string, the grammar complete, the token budget). The engine (runtime.engine) owns what is shared: the
batch, the caches, the step, and sending events.
"""

from __future__ import annotations

import dataclasses
import time

import torch

from openafm.runtime.kv_cache import KVCache
from openafm.runtime.proposers import Acceptance, DraftProposer, NgramProposer
from openafm.runtime.request import ERROR, FinishReason, Forced, RowEvent, RowRequest
from openafm.runtime.sampling import Sampler
from openafm.runtime.stops import StopMatcher
from openafm.tokenizer.stream import StreamDecoder


class NoText:
    """The stream decoder of an engine without a tokenizer: rows produce token ids only."""

    def push(self, token: int) -> str:
        return ""

    def flush(self) -> str:
        return ""


@dataclasses.dataclass
class Row:
    req: RowRequest
    sampler: Sampler
    decoder: StreamDecoder | NoText
    stops: StopMatcher
    text: str = ""
    shown: int = 0
    produced: int = 0
    position: int = 0               # position of the next token fed
    next_token: int = -1            # the token to feed at the next step
    pending_forced: list[int] = dataclasses.field(default_factory=list)
    proposer: NgramProposer | DraftProposer | None = None     # set when the row speculates
    acceptance: Acceptance = dataclasses.field(default_factory=Acceptance)
    step_proposed: int = 0          # the step being verified: its guesses, those accepted so far, the one judged now
    step_accepted: int = 0          # (a row that finishes mid-step reports them in its last event)
    step_guess: int | None = None
    steps: int = 0                  # decode steps the row took part in

    def choose(self, logits: torch.Tensor, event: RowEvent, eos: set[int], guess: int | None = None) -> bool:
        """Pick the row's next token from its logits [V] (or its pending forced token) into `event`, with the text it
        makes visible and the end it reaches (eos / stop / complete / length, or an error). ``guess``: the token fed
        after this one in a speculative step (the event says whether the pick is it). -> whether a token came."""
        req = self.req
        try:
            if self.pending_forced:
                tok = self.pending_forced.pop(0)
                event.forced = True
                dist = None
            else:
                if req.constraint is not None:
                    t = time.perf_counter()
                    logits = req.constraint.mask_logits(logits[None])[0]
                    event.mask_seconds = time.perf_counter() - t
                tok = int(self.sampler(logits[None])[0])
                dist = logits
            if req.logprobs is not None and dist is not None:
                lp = torch.log_softmax(dist.float(), -1)
                event.logprob = float(lp[tok])
                if req.logprobs:
                    top = lp.topk(req.logprobs)
                    event.top_logprobs = list(zip(top.indices.tolist(), top.values.tolist()))
            elif req.logprobs is not None:
                event.logprob = 0.0                       # a forced token has probability 1
                event.top_logprobs = [(tok, 0.0)] if req.logprobs else None
            if req.constraint is not None and not event.forced:
                req.constraint.consume(tok)
            if req.constraint is not None and req.forced is Forced.FEED:
                budget = req.max_new_tokens - self.produced - 1 - len(self.pending_forced)
                self.pending_forced += req.constraint.forced(budget=max(0, budget))
        except Exception as e:                           # noqa: BLE001
            event.finish, event.error, event.exception = ERROR, f"{type(e).__name__}: {e}", e
            return False
        self.produced += 1
        self.next_token = tok
        event.token_id = tok
        event.guessed = tok == guess and not event.forced
        if self.proposer is not None:
            self.proposer.append(tok)
        if tok in eos and not event.forced:
            event.finish = FinishReason.EOS
            self.text += self.decoder.flush()
            event.text, self.shown = self.text[self.shown:], len(self.text)
        else:
            before = len(self.text)
            self.text += self.decoder.push(tok)
            cut = self.stops.find(self.text, before) if self.stops.stops else None
            if cut is not None:
                self.text = self.text[:cut]
                event.finish = FinishReason.STOP
            elif req.constraint is not None and req.constraint.done and not self.pending_forced:
                event.finish = FinishReason.COMPLETE
            elif self.produced >= req.max_new_tokens:
                event.finish = FinishReason.LENGTH
            if event.finish in (FinishReason.COMPLETE, FinishReason.LENGTH):
                self.text += self.decoder.flush()
            visible = len(self.text) if event.finish or not self.stops.stops else self.stops.safe_length(self.text)
            event.text, self.shown = self.text[self.shown:visible], max(self.shown, visible)
        return True


@dataclasses.dataclass
class Prefill:
    """A request joining: its prompt goes into its own single-row cache one chunk per loop turn."""
    req: RowRequest
    cache: KVCache | None           # None until its first chunk, where a fresh sequence asks the prefix cache
    cached: int                     # prompt tokens the prefix cache supplied
    done: int                       # prompt tokens in the cache so far
    seconds: float = 0.0            # spent prefilling (the chunks only)
