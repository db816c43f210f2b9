"""Continuous batching: one engine thread runs one decode step over every live request at a time; new
requests join the batch at the next step and finished ones leave at once.

Each request is a `RowRequest` (prompt ids, its own sampling parameters, stop strings, grammar constraint,
log-prob count, a CancelToken and an `on_event` callback called from the engine thread). A loop turn:

1. admit waiting requests while rows are free: each prompt is prefilled alone (a single-row KVCache, in
   chunks), reusing the K/V of the longest prompt prefix seen recently (the prefix cache: a shared system
   prompt is prefilled once, later requests prefill only what follows it), then spliced into the
   `RowCache`, and its first token is chosen;
2. one decode step over rows [0, n) (the fused C++ step where the model allows it, runs with one position
   per row);
3. per row: the grammar mask (timed), sampling with the row's own generator, log-probs, EOS / stop / length
   / grammar-complete checks; a row that finishes or was cancelled leaves (the last row moves into its slot).

A token the grammar forces is fed at the next step without sampling (marked `forced` in its event): no
multi-token fast-forward inside a batch, since every row advances one slot per step.
The queue is bounded: `submit` raises `EngineBusy` beyond `max_queue` waiting requests.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
from typing import Callable

import torch

from openafm.errors import ContextWindowExceededError, OpenAFMError
from openafm.models.decoder import Logits
from openafm.runtime.cancel import CancelToken
from openafm.runtime.fused_step import StepKind, choose_step
from openafm.runtime.generate import PREFILL_CHUNK, FinishReason
from openafm.runtime.kv_cache import KVCache, Sliding
from openafm.runtime.row_cache import RowCache
from openafm.runtime.sampling import Sampler, SamplingParams
from openafm.runtime.stops import StopMatcher
from openafm.tokenizer.stream import StreamDecoder

CANCELLED = "cancelled"     # a finish reason of the engine only: the request's CancelToken was cancelled
ERROR = "error"             # the row failed (its grammar reached a dead end, ...): `RowEvent.error` says why


class EngineBusy(OpenAFMError):
    """The engine's queue is full (`max_queue` requests waiting)."""


@dataclasses.dataclass(frozen=True)
class EngineConfig:
    max_batch: int = 16              # rows decoded together
    max_queue: int = 64              # requests waiting for a row; one more raises EngineBusy
    max_context: int = 2048          # prompt + new tokens of one request (and the row cache's largest capacity)
    initial_capacity: int = 256      # row-cache slots to start with (grows by doubling up to max_context)
    prefix_cache: int = 8            # prompts whose K/V are kept for prefix reuse (0: off)
    min_prefix: int = 8              # shortest prefix worth reusing
    step: StepKind = StepKind.AUTO

    def __post_init__(self) -> None:
        for name in ("max_batch", "max_queue", "max_context", "initial_capacity", "min_prefix"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} is invalid: use an integer >= 1")
        if isinstance(self.prefix_cache, bool) or not isinstance(self.prefix_cache, int) or self.prefix_cache < 0:
            raise ValueError(f"prefix_cache={self.prefix_cache!r} is invalid: use an integer >= 0 (0 = off)")


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
    submitted: float = dataclasses.field(default_factory=time.perf_counter)


@dataclasses.dataclass
class _Row:
    req: RowRequest
    sampler: Sampler
    decoder: StreamDecoder
    stops: StopMatcher
    text: str = ""
    shown: int = 0
    produced: int = 0
    position: int = 0               # position of the next token fed
    next_token: int = -1            # the token to feed at the next step
    pending_forced: list[int] = dataclasses.field(default_factory=list)


class BatchEngine:
    """The engine loop over one model; `start()` runs it in a daemon thread, `submit()` queues a request."""

    def __init__(self, model, tokenizer, config: EngineConfig = EngineConfig()):
        if config.max_context > model.kv_plan.max_seq_len:
            raise ContextWindowExceededError(config.max_context, model.kv_plan.max_seq_len)
        self.model, self.tokenizer, self.config = model, tokenizer, config
        self.eos = set(tokenizer.eos_token_ids)
        self.cache = RowCache(model.kv_plan, rows=config.max_batch, capacity=config.initial_capacity,
                              max_capacity=config.max_context, dtype=model.norm.weight.dtype,
                              device=model.norm.weight.device)
        self.rows: list[_Row] = []                     # live rows; rows[i] is cache row i
        self.queue: collections.deque[RowRequest] = collections.deque()
        self._prefixes: collections.OrderedDict[tuple, KVCache] = collections.OrderedDict()
        self._cv = threading.Condition()
        self._stop = False
        self._thread: threading.Thread | None = None
        self.step_kind = ""
        self.steps_run = 0
        self.tokens_out = 0

    # --- the public side -------------------------------------------------------------------------
    def start(self) -> "BatchEngine":
        self._thread = threading.Thread(target=self._loop, name="openafm-engine", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify()
        if self._thread is not None:
            self._thread.join()

    def submit(self, req: RowRequest) -> None:
        if not req.prompt:
            raise ValueError("a request needs at least one prompt token")
        if len(req.prompt) + req.max_new_tokens > self.config.max_context:
            raise ContextWindowExceededError(len(req.prompt), self.config.max_context, req.max_new_tokens)
        with self._cv:
            if len(self.queue) >= self.config.max_queue:
                raise EngineBusy(f"{len(self.queue)} requests are waiting (max_queue={self.config.max_queue})")
            self.queue.append(req)
            self._cv.notify()

    @property
    def waiting(self) -> int:
        return len(self.queue)

    @property
    def running(self) -> int:
        return len(self.rows)

    # --- the loop --------------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._stop and not self.queue and not self.rows:
                    self._cv.wait()
                if self._stop:
                    break
                admit = []
                while self.queue and len(self.rows) + len(admit) < self.config.max_batch:
                    admit.append(self.queue.popleft())
            try:
                for req in admit:
                    self._admit(req)
                self._drop_cancelled()
                if self.rows:
                    self._step()
            except Exception as e:                 # noqa: BLE001 - the live rows fail; the engine goes on
                for row in self.rows:
                    if row.next_token != -2:
                        self._emit(row, RowEvent(-1, "", finish=ERROR, error=f"{type(e).__name__}: {e}"))
                self._drop_finished()

    def _admit(self, req: RowRequest) -> None:
        if req.cancel.cancelled:
            self._end_alone(req, CANCELLED)
            return
        try:
            start = time.perf_counter()
            cache, cached = self._prefill_cache(req.prompt)
            with torch.inference_mode():
                new = req.prompt[cached:]
                ids = torch.tensor([new], device=self.cache.device)
                for s in range(0, len(new), PREFILL_CHUNK):
                    logits = self.model(ids[:, s:s + PREFILL_CHUNK], cache=cache, logits=Logits.LAST)[:, -1]
            self._remember(req.prompt, cache)
            prefill = time.perf_counter() - start
        except Exception as e:                     # noqa: BLE001 - one bad request must not stop the engine
            self._end_alone(req, ERROR, error=f"{type(e).__name__}: {e}")
            return
        r = len(self.rows)
        self.cache.splice(r, cache, len(req.prompt))
        row = _Row(req, Sampler(req.sampling, self.cache.device), StreamDecoder(self.tokenizer),
                   StopMatcher(list(req.stop)), position=len(req.prompt))
        self.rows.append(row)
        first = RowEvent(-1, "", prompt_tokens=len(req.prompt), cached_tokens=cached, prefill_seconds=prefill)
        self._choose(r, row, logits[0], first)

    def _step(self) -> None:
        n = len(self.rows)
        self.cache.reserve(n)
        view = self.cache.view(n)
        fused, self.step_kind = choose_step(self.config.step, self.model, view)
        ids = torch.tensor([[row.next_token] for row in self.rows], device=self.cache.device)       # [n, 1]
        pos = torch.tensor([[row.position] for row in self.rows], device=self.cache.device)         # [n, 1]
        with torch.inference_mode():
            if fused is not None:
                logits = fused(ids, view, pos)                                                     # [n, V]
            else:
                logits = self.model(ids, cache=view, positions=pos, logits=Logits.LAST)[:, -1]
        self.steps_run += 1
        for r, row in enumerate(self.rows):
            row.position += 1
            self._choose(r, row, logits[r], RowEvent(-1, ""))
        self._drop_finished()

    def _choose(self, r: int, row: _Row, logits: torch.Tensor, event: RowEvent) -> None:
        """Pick row r's next token from its logits [V] (or its pending forced token), emit it, check the end."""
        req = row.req
        try:
            if row.pending_forced:
                tok = row.pending_forced.pop(0)
                event.forced = True
                dist = None
            else:
                if req.constraint is not None:
                    t = time.perf_counter()
                    logits = req.constraint.mask_logits(logits[None])[0]
                    event.mask_seconds = time.perf_counter() - t
                tok = int(row.sampler(logits[None])[0])
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
            if req.constraint is not None:
                budget = req.max_new_tokens - row.produced - 1 - len(row.pending_forced)
                row.pending_forced += req.constraint.forced(budget=max(0, budget))
        except Exception as e:                           # noqa: BLE001
            event.finish, event.error = ERROR, f"{type(e).__name__}: {e}"
            self._emit(row, event)
            return
        row.produced += 1
        row.next_token = tok
        event.token_id = tok
        if tok in self.eos and not event.forced:
            event.finish = FinishReason.EOS
            row.text += row.decoder.flush()
            event.text, row.shown = row.text[row.shown:], len(row.text)
        else:
            before = len(row.text)
            row.text += row.decoder.push(tok)
            cut = row.stops.find(row.text, before) if row.stops.stops else None
            if cut is not None:
                row.text = row.text[:cut]
                event.finish = FinishReason.STOP
            elif req.constraint is not None and req.constraint.done and not row.pending_forced:
                event.finish = FinishReason.COMPLETE
            elif row.produced >= req.max_new_tokens:
                event.finish = FinishReason.LENGTH
            if event.finish in (FinishReason.COMPLETE, FinishReason.LENGTH):
                row.text += row.decoder.flush()
            visible = len(row.text) if event.finish or not row.stops.stops else row.stops.safe_length(row.text)
            event.text, row.shown = row.text[row.shown:visible], max(row.shown, visible)
        self.tokens_out += 1
        self._emit(row, event)

    def _emit(self, row: _Row, event: RowEvent) -> None:
        event.at = time.perf_counter() - row.req.submitted
        event.kv_bytes = (len(row.req.prompt) + row.produced) * self._bytes_per_token()
        if event.finish is not None:
            row.next_token = -2                              # marks the row finished
        try:
            row.req.on_event(event)
        except Exception:                                    # noqa: BLE001 - a failing consumer cancels its row
            row.req.cancel.cancel()

    def _drop_finished(self) -> None:
        self._remove(lambda row: row.next_token == -2)

    def _drop_cancelled(self) -> None:
        for row in self.rows:
            if row.req.cancel.cancelled and row.next_token != -2:
                self._emit(row, RowEvent(-1, "", finish=CANCELLED))
        self._drop_finished()

    def _remove(self, gone: Callable[[_Row], bool]) -> None:
        r = 0
        while r < len(self.rows):
            if gone(self.rows[r]):
                last = len(self.rows) - 1
                self.cache.release(r)
                if r != last:
                    self.cache.move(last, r)
                    self.rows[r] = self.rows[last]
                self.rows.pop()
            else:
                r += 1

    def _end_alone(self, req: RowRequest, finish: str, error: str | None = None) -> None:
        try:
            req.on_event(RowEvent(-1, "", finish=finish, error=error, prompt_tokens=len(req.prompt),
                                  at=time.perf_counter() - req.submitted))
        except Exception:                                    # noqa: BLE001
            pass

    # --- the prefix cache --------------------------------------------------------------------------
    def _prefill_cache(self, prompt: list[int]) -> tuple[KVCache, int]:
        """A single-row cache for `prompt`, holding the longest reusable prefix; -> (cache, tokens held)."""
        cache = KVCache(self.model.kv_plan, batch_size=1, capacity=len(prompt), dtype=self.cache.dtype,
                        device=self.cache.device, sliding=Sliding.FULL)      # spliced into the row cache as is
        best, best_len = None, 0
        for key, entry in self._prefixes.items():
            n = _common_prefix(key, prompt)
            if n > best_len:
                best, best_len = (key, entry), n
        held = min(best_len, len(prompt) - 1)               # the last prompt token is always run (its logits)
        if best is None or held < self.config.min_prefix:
            return cache, 0
        self._prefixes.move_to_end(best[0])
        for i in range(len(self.model.kv_plan.layers)):
            src, dst = best[1].layer_storage(i), cache.layer_storage(i)
            if src is None:
                continue
            dst[0][:, :, :held] = src[0][:, :, :held]
            dst[1][:, :, :held] = src[1][:, :, :held]
            dst[4][:, :held] = src[4][:, :held]
        cache.steps = held
        return cache, held

    def _remember(self, prompt: list[int], cache: KVCache) -> None:
        if not self.config.prefix_cache:
            return
        self._prefixes[tuple(prompt)] = cache
        self._prefixes.move_to_end(tuple(prompt))
        while len(self._prefixes) > self.config.prefix_cache:
            self._prefixes.popitem(last=False)

    def _bytes_per_token(self) -> int:
        c = self.model.kv_plan
        return 2 * len(self.cache.owners) * c.n_kv_heads * c.attn_head_dim * self.cache.dtype.itemsize


def _common_prefix(a, b) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
