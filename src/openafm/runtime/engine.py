"""The engine: every caller's requests decode here, one step over every live request at a time (continuous
batching); new requests join the batch at the next step and finished ones leave at once.

Two ways to drive it: `start()` runs the loop in a daemon thread and `submit()` queues requests from any thread
(the server, fm sessions of one model); `run(requests)` drives the loop in the calling thread until those requests
are done (batch callers: `LanguageModel.generate`, eval, RL rollouts, synthesis). A request that brings a `cache`
continues a sequence (a session's turns, runtime.request).

Each request is a `RowRequest` (prompt ids, its own sampling parameters, stop strings, grammar constraint,
log-prob count, a CancelToken and an `on_event` callback called from the engine thread). A loop turn:

1. admit waiting requests while rows are free: each prompt is prefilled alone into a single-row KVCache (the
   request's own, when it continues a sequence; else one that starts from the longest prefix of a recent prompt,
   the prefix cache: a shared system prompt or instructions are prefilled once, later requests prefill only what
   follows. The prefix cache is asked when a prompt's prefill begins, not when it is admitted, so requests that
   arrive together still share what the first of them prefilled). One chunk (`prefill_chunk` tokens) of the first
   joining prompt runs per loop turn, between decode steps, so a long prompt does not stall the running rows (a
   remainder of at most FUSED_PREFILL_MAX tokens in one fused pass, longer ones through the module graph);
   after its last chunk it is spliced into the `RowCache` and its first token is chosen;
2. one decode step over rows [0, n) (the fused C++ step where the model allows it, runs with one position
   per row);
3. per row: the grammar mask (timed), sampling with the row's own generator, log-probs, EOS / stop / length
   / grammar-complete checks; a row that finishes or was cancelled leaves (the last row moves into its slot).

Tokens the grammar forces are fed at the next step without sampling (marked `forced` in their events), all of
them in that one step (as guesses that cannot fail).

Speculation (a request's or the engine's `speculate`, runtime.proposers): a row may bring guesses of the tokens
after its next one — the tokens its grammar forces (certain), else its proposer's (n-gram lookup or a draft
model) — fed in the same step
(every row then writes 1 + longest-guess slots; shorter rows pad, and the fused step skips the padding: one ragged
pass over the tokens fed). The step scores every fed slot, and each row
chooses along its slots exactly as it would one step at a time, continuing while its choice equals the guess fed
next (sample-then-compare: the same tokens for greedy rows, the same distribution for sampled ones); the slots of
rejected guesses become holes in the row cache. Adaptive: per step, the engine weighs the tokens each row is
expected to commit (its running acceptance) against the measured cost of a step of that many slots for this
many rows, and takes the best number of slots — one (plain, fused) whenever guessing does not pay.
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
from openafm.runtime.draft import DraftModel
from openafm.runtime.fused_step import StepKind, choose_step
from openafm.runtime.kv_cache import KVStorage
from openafm.runtime.prefix_cache import PrefixCache
from openafm.runtime.request import CANCELLED, ERROR, Completion, RowEvent, RowRequest
from openafm.runtime.proposers import Acceptance, DraftProposer, NgramConfig, NgramProposer, ProposerKind, StepCosts
from openafm.runtime.row_cache import RowCache
from openafm.runtime.row_state import NoText, Prefill, Row
from openafm.runtime.sampling import Sampler
from openafm.runtime.stops import StopMatcher
from openafm.tokenizer.stream import StreamDecoder

PREFILL_CHUNK = 512   # prompt tokens per prefill forward: bounds the attention scores and activations
# The longest prompt remainder prefilled by the fused step (the block kernels in register tiles, the head on the last
# token only); longer ones run the module graph, whose one float32 matrix product per weight wins past ~128 tokens
# (benchmarks/prefill.py: docs/results/prefill.json).
FUSED_PREFILL_MAX = 96


class EngineBusy(OpenAFMError):
    """The engine's queue is full (`max_queue` requests waiting)."""


@dataclasses.dataclass(frozen=True)
class EngineConfig:
    max_batch: int = 16              # rows decoded together
    max_queue: int = 64              # requests waiting for a row; one more raises EngineBusy
    max_context: int = 2048          # prompt + new tokens of one request (and the row cache's largest capacity)
    initial_capacity: int = 256      # row-cache slots to start with (grows by doubling up to max_context)
    prefix_cache: int = 64           # prompts whose K/V are kept for prefix reuse (0: off) ...
    prefix_cache_bytes: int = 256 << 20    # ... holding at most this many bytes of K/V together
    min_prefix: int = 8              # shortest prefix worth reusing
    prefill_chunk: int = PREFILL_CHUNK   # prompt tokens a joining request prefills per loop turn (between steps)
    step: StepKind = StepKind.AUTO   # how steps run (multi-slot speculative steps too, where no ring wraps)
    kv_storage: KVStorage = KVStorage.NATIVE     # how the rows' K/V are stored (INT8: codes + a scale per token)
    speculate: ProposerKind = ProposerKind.OFF     # the default of requests that do not choose
    ngram: NgramConfig = NgramConfig()
    draft_gamma: int = 4             # most tokens a draft guesses per step (ProposerKind.DRAFT)

    def __post_init__(self) -> None:
        if not isinstance(self.kv_storage, KVStorage):
            raise ValueError(f"kv_storage={self.kv_storage!r} is not one of {[k.value for k in KVStorage]}")
        if not isinstance(self.speculate, ProposerKind):
            raise ValueError(f"speculate={self.speculate!r} is not one of {[k.value for k in ProposerKind]}")
        for name in ("max_batch", "max_queue", "max_context", "initial_capacity", "min_prefix", "prefill_chunk",
                     "draft_gamma", "prefix_cache_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} is invalid: use an integer >= 1")
        if isinstance(self.prefix_cache, bool) or not isinstance(self.prefix_cache, int) or self.prefix_cache < 0:
            raise ValueError(f"prefix_cache={self.prefix_cache!r} is invalid: use an integer >= 0 (0 = off)")


class Engine:
    """The engine loop over one model: `start()` + `submit()` from any thread, or `run()` in the caller's."""

    def __init__(self, model, tokenizer, config: EngineConfig = EngineConfig(), *, draft: DraftModel | None = None,
                 eos: frozenset[int] | set[int] | None = None):
        """tokenizer: decodes the rows' text (None: token ids only, no text, no stop strings).
        draft: the model `ProposerKind.DRAFT` rows ask for guesses (checked against this model's embeddings).
        eos: the token ids that end a row (default: the tokenizer's end-of-sequence ids)."""
        if eos is None and tokenizer is None:
            raise ValueError("an engine without a tokenizer needs its end-of-sequence ids: eos=")
        if config.max_context > model.kv_plan.max_seq_len:
            raise ContextWindowExceededError(config.max_context, model.kv_plan.max_seq_len)
        if draft is not None:
            if draft.vocab_size != model.kv_plan.vocab_size:
                raise ValueError(f"the draft's vocabulary ({draft.vocab_size}) differs from the model's "
                                 f"({model.kv_plan.vocab_size})")
            draft.check_target(model)
        elif config.speculate is ProposerKind.DRAFT:
            raise ValueError("speculate=draft needs a draft model: Engine(..., draft=DraftModel)")
        self.model, self.tokenizer, self.config, self.draft = model, tokenizer, config, draft
        self.eos = set(tokenizer.eos_token_ids if eos is None else eos)
        self.cache = RowCache(model.kv_plan, rows=config.max_batch, capacity=config.initial_capacity,
                              max_capacity=config.max_context, dtype=model.norm.weight.dtype,
                              device=model.norm.weight.device, storage=config.kv_storage)
        self.rows: list[Row] = []                     # live rows; rows[i] is cache row i
        self.queue: collections.deque[RowRequest] = collections.deque()
        self.joining: collections.deque[Prefill] = collections.deque()     # admitted, prefilling
        self.prefixes = PrefixCache(model.kv_plan, size=config.prefix_cache, min_prefix=config.min_prefix,
                                    dtype=self.cache.dtype, device=self.cache.device, storage=config.kv_storage,
                                    max_bytes=config.prefix_cache_bytes)
        self._cv = threading.Condition()
        self._stop = False
        self._thread: threading.Thread | None = None
        self.steps_run = 0
        self.tokens_out = 0
        self.prefill_seconds = 0.0                    # prompt chunks' forward passes, summed
        self._costs = StepCosts()
        # (fused step or None, its words): the model's weights stay put while the engine runs, so it is chosen once
        # (choose_step re-checks every weight's storage, ~2 ms a call); StepKind.FUSED raises here where it cannot run
        self._fused, self.step_kind = choose_step(config.step, model, self.cache.view(1))

    # --- the public side -------------------------------------------------------------------------
    def start(self) -> "Engine":
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
        self._check(req)
        with self._cv:
            if len(self.queue) >= self.config.max_queue:
                raise EngineBusy(f"{len(self.queue)} requests are waiting (max_queue={self.config.max_queue})")
            self.queue.append(req)
            self._cv.notify()

    def run(self, requests: list[RowRequest]) -> None:
        """Decode `requests` to their ends in the calling thread (their `on_event` callbacks are called here),
        up to `max_batch` at a time. For an engine that is not started."""
        if self._thread is not None:
            raise RuntimeError("run() drives an engine in the calling thread; this one is started: submit() to it")
        for req in requests:
            self._check(req)
        pending = collections.deque(requests)
        while pending or self.rows or self.joining:
            while pending and len(self.rows) + len(self.joining) < self.config.max_batch:
                self._admit(pending.popleft())
            self._turn()

    def complete(self, req: RowRequest) -> Completion:
        """Decode one request to its end and return its answer (its `on_event` still sees every event): through
        the loop thread of a started engine (waiting for it here), else in the calling thread."""
        done = threading.Event()
        out = Completion(on_event=req.on_event)

        def on_event(event: RowEvent) -> None:
            out(event)
            if event.finish is not None:
                done.set()
        req = dataclasses.replace(req, on_event=on_event)
        if self._thread is None:
            self.run([req])
        else:
            self.submit(req)
            done.wait()
        return out

    def _check(self, req: RowRequest) -> None:
        if not req.prompt:
            raise ValueError("a request needs at least one prompt token")
        if isinstance(req.max_new_tokens, bool) or not isinstance(req.max_new_tokens, int) or req.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens={req.max_new_tokens!r} is invalid: use an integer >= 1")
        before = req.cache.steps if req.cache is not None else 0
        if before + len(req.prompt) + req.max_new_tokens > self.config.max_context:
            raise ContextWindowExceededError(before + len(req.prompt), self.config.max_context, req.max_new_tokens)
        if req.cache is not None:
            self.cache.check_source(req.cache)
        if req.stop and self.tokenizer is None:
            raise ValueError("stop strings need a tokenizer to decode text; this engine has none")
        if req.speculate is ProposerKind.DRAFT and self.draft is None:
            raise ValueError("speculate=draft: this engine holds no draft model (start it with one)")
        vocab = self.model.kv_plan.vocab_size
        bad = [t for t in req.score if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < vocab]
        if bad:
            raise ValueError(f"score={list(req.score)!r}: {bad} are not token ids of this model (0 to {vocab - 1})")

    @property
    def waiting(self) -> int:
        """Requests not yet decoding: queued, or prefilling their prompt."""
        return len(self.queue) + len(self.joining)

    @property
    def running(self) -> int:
        return len(self.rows)

    def step_seconds(self) -> dict[tuple[int, int], float]:
        """The measured running average of a step's seconds by (rows, slots per row)."""
        return self._costs.measured()

    # --- the loop --------------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._stop and not self.queue and not self.rows and not self.joining:
                    self._cv.wait()
                if self._stop:
                    break
                admit = []
                while self.queue and len(self.rows) + len(self.joining) + len(admit) < self.config.max_batch:
                    admit.append(self.queue.popleft())
            for req in admit:
                self._admit(req)
            self._turn()

    def _turn(self) -> None:
        """Drop cancelled requests, prefill one chunk of a joining prompt, run one decode step."""
        try:
            self._drop_cancelled()
            if self.joining:
                self._prefill_chunk()
                self._drop_cancelled()           # a row cancelled at its first token takes no step
            if self.rows:
                self._step()
        except Exception as e:                     # noqa: BLE001 - the live rows fail; the engine goes on
            for row in self.rows:
                if row.next_token != -2:
                    self._emit(-1, row, RowEvent(-1, "", finish=ERROR, error=f"{type(e).__name__}: {e}",
                                                 exception=e))
            self._drop_finished()

    def _admit(self, req: RowRequest) -> None:
        """Start a request's prefill from the longest prefix the prefix cache holds."""
        if req.cancel.cancelled:
            self._end_alone(req, CANCELLED)
            return
        cache = None                           # a fresh sequence: the prefix cache is asked at its first chunk
        if req.continues:
            try:                               # continuing a sequence: its cache, grown to hold the prompt
                cache = req.cache.grown(max(req.cache.steps + len(req.prompt), req.cache.capacity))
            except Exception as e:                 # noqa: BLE001 - one bad request must not stop the engine
                self._end_alone(req, ERROR, e)
                return
        self.joining.append(Prefill(req, cache, 0, done=0))

    def _prefill_chunk(self) -> None:
        """One chunk of the first joining prompt (so a long prompt does not stall the running rows); a prompt
        whose last chunk ran joins the batch with its first token."""
        p = self.joining[0]
        try:
            start = time.perf_counter()
            if p.cache is None:        # asked now, not at admission: prompts admitted together share a prefix too
                p.cache, p.cached = self.prefixes.start(p.req.prompt)
                p.done = p.cached
            new = p.req.prompt[p.done:p.done + self.config.prefill_chunk]
            with torch.inference_mode():
                ids = torch.tensor([new], device=self.cache.device)                                 # [1, T]
                fused = self._fused
                if fused is not None and len(new) <= FUSED_PREFILL_MAX and fused.can_step_rows(p.cache, len(new)):
                    pos = torch.arange(p.cache.steps, p.cache.steps + len(new), device=self.cache.device)[None]
                    logits = fused.prefill(ids, p.cache, pos)                                       # [1, V]
                else:
                    logits = self.model(ids, cache=p.cache, logits=Logits.LAST)[:, -1]              # [1, V]
            p.done += len(new)
            spent = time.perf_counter() - start
            p.seconds += spent
            self.prefill_seconds += spent
            if p.done < len(p.req.prompt):
                return
            self.joining.popleft()
            if not p.req.continues:                                  # it began from nothing: worth remembering
                self.prefixes.remember(p.req.prompt, p.cache)
        except Exception as e:                     # noqa: BLE001 - one bad request must not stop the engine
            self.joining.popleft()
            self._end_alone(p.req, ERROR, e)
            return
        req, r = p.req, len(self.rows)
        self.cache.splice(r, p.cache, p.cache.steps)
        decoder = StreamDecoder(self.tokenizer) if self.tokenizer is not None else NoText()
        row = Row(req, Sampler(req.sampling, self.cache.device), decoder,
                   StopMatcher(list(req.stop)), position=p.cache.steps)
        kind = req.speculate or self.config.speculate
        if kind is ProposerKind.NGRAM:
            row.proposer = NgramProposer([*req.history, *req.prompt], self.config.ngram)
        elif kind is ProposerKind.DRAFT:
            row.proposer = DraftProposer(self.draft, [*req.history, *req.prompt], self.config.max_context)
        self.rows.append(row)
        first = RowEvent(-1, "", prompt_tokens=len(req.prompt), cached_tokens=p.cached, prefill_seconds=p.seconds)
        if req.score:
            first.scores = torch.log_softmax(logits[0].float(), dim=-1)[list(req.score)].tolist()
        self._choose(r, row, logits[0], first)

    def _step(self) -> None:
        n = len(self.rows)
        offers = self._guesses()                          # per row: tokens fed after its next token
        guesses = [g for g, _ in offers]
        t = 1 + max(map(len, guesses))
        self.cache.reserve(n, t)
        view = self.cache.view(n)
        pad = [t - 1 - len(g) for g in guesses]            # a row with fewer guesses pads (id 0, position -1)
        ids = torch.tensor([[row.next_token, *g] + [0] * k for row, g, k in zip(self.rows, guesses, pad, strict=True)],
                           device=self.cache.device)                                                # [n, t]
        pos = torch.tensor([list(range(row.position, row.position + 1 + len(g))) + [-1] * k
                            for row, g, k in zip(self.rows, guesses, pad, strict=True)],
                           device=self.cache.device)                                                # [n, t]
        fused = self._fused
        start = time.perf_counter()
        with torch.inference_mode():
            if fused is not None and t == 1:
                logits = fused(ids, view, pos)[:, None]                                             # [n, 1, V]
            elif fused is not None and fused.can_step_rows(view, t):    # one ragged pass: padding not computed
                fed = pos >= 0                                                                      # [n, t]
                logits = list(fused.ragged(ids, view, pos, fed).split(fed.sum(1).tolist()))    # n x [1 + g_r, V]
            else:
                logits = self.model(ids, cache=view, positions=pos, logits=Logits.LAST if t == 1 else Logits.ALL)
        self._costs.observe(n, t, time.perf_counter() - start)
        self.steps_run += 1
        first_slot = self.cache.steps - t
        for r, (row, (guess, acceptance)) in enumerate(zip(self.rows, offers, strict=True)):
            row.steps += 1
            kept = self._verify(r, row, logits[r], guess)
            if acceptance is not None and guess:
                acceptance.update(len(guess), kept - 1)
            if kept < 1 + len(guess):
                self.cache.forget(r, first_slot + kept, first_slot + 1 + len(guess))
        self._drop_finished()

    def _guesses(self) -> list[tuple[list[int], Acceptance | None]]:
        """Each speculating row's guesses (its forced tokens, else its proposer's, with the row's Acceptance), cut
        to the number of slots that maximises expected tokens per second (none when one plain slot is best)."""
        offers: list[tuple[list[int], Acceptance | None]] = []      # (guesses, None when they are certain)
        for row in self.rows:
            room = row.req.max_new_tokens - row.produced - 1
            if room < 1:
                offers.append(([], None))
            elif row.pending_forced:                      # certain guesses: fed at once, speculating or not
                offers.append((row.pending_forced[:room], None))
            elif row.proposer is None:
                offers.append(([], None))
            else:
                gamma = self.config.draft_gamma if isinstance(row.proposer, DraftProposer) else self.config.ngram.max_gamma
                offers.append((row.proposer.propose(min(room, gamma)), row.acceptance))
        longest = max(len(g) for g, _ in offers)
        if longest == 0:
            return offers
        n = len(offers)
        best, best_rate = 1, n / self._costs.estimate(n, 1)
        for t in range(2, longest + 2):
            expected = sum(1 + min(len(g), t - 1) if acc is None else acc.expected_tokens(min(len(g), t - 1))
                           for g, acc in offers)
            rate = expected / self._costs.estimate(n, t)
            if rate > best_rate:
                best, best_rate = t, rate
        if best == 1:
            for g, acc in offers:
                if g and acc is not None:
                    acc.untried()
        return [(g[:best - 1], acc) for g, acc in offers]

    def _verify(self, r: int, row: Row, logits: torch.Tensor, guess: list[int]) -> int:
        """Row r chooses along its slots (logits [t, V]): slot j's logits pick the token after slot j's token, and
        it goes on while that pick is the guess fed at slot j + 1. -> slots kept (1 + accepted guesses)."""
        accepted = 0
        row.step_proposed = len(guess)
        for j in range(len(guess) + 1):
            row.position += 1                                   # slot j's token is in the cache
            row.step_accepted, row.step_guess = accepted, guess[j] if j < len(guess) else None
            event = RowEvent(-1, "")
            self._choose(r, row, logits[j], event, guess=row.step_guess)
            if event.token_id != row.step_guess:
                break
            accepted += 1                                       # an accepted guess, even one that ends the row
            if row.next_token == -2:
                break
        row.step_proposed, row.step_accepted, row.step_guess = 0, 0, None
        return 1 + accepted

    def _choose(self, r: int, row: Row, logits: torch.Tensor, event: RowEvent, guess: int | None = None) -> None:
        """Row r picks its next token (Row.choose) and the event goes out."""
        if row.choose(logits, event, self.eos, guess):
            self.tokens_out += 1
        self._emit(r, row, event)

    def _emit(self, r: int, row: Row, event: RowEvent) -> None:
        """Send row r's event (r = -1: the row's cache is not to be trusted, as after a failed step)."""
        event.at = time.perf_counter() - row.req.submitted
        event.kv_bytes = row.position * self.cache.bytes_per_token()
        if event.finish is not None:
            row.next_token = -2                              # marks the row finished
            event.proposed = row.acceptance.proposed + row.step_proposed
            event.accepted = row.acceptance.accepted + row.step_accepted + (event.token_id == row.step_guess)
            event.steps = row.steps
            if row.req.cache is not None and r >= 0 and event.finish != ERROR:
                event.cache = self.cache.extract(r, row.position)     # every token fed: the sequence goes on
        try:
            row.req.on_event(event)
        except Exception:                                    # noqa: BLE001 - a failing consumer cancels its row
            row.req.cancel.cancel()

    def _drop_finished(self) -> None:
        self._remove(lambda row: row.next_token == -2)

    def _drop_cancelled(self) -> None:
        for r, row in enumerate(self.rows):
            if row.req.cancel.cancelled and row.next_token != -2:
                self._emit(r, row, RowEvent(-1, "", finish=CANCELLED))
        self._drop_finished()
        for p in [p for p in self.joining if p.req.cancel.cancelled]:
            self.joining.remove(p)
            self._end_alone(p.req, CANCELLED)

    def _remove(self, gone: Callable[[Row], bool]) -> None:
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

    def _end_alone(self, req: RowRequest, finish: str, exception: Exception | None = None) -> None:
        """End a request that never joined the batch (a continued cache comes back as it was)."""
        error = None if exception is None else f"{type(exception).__name__}: {exception}"
        try:
            req.on_event(RowEvent(-1, "", finish=finish, error=error, exception=exception,
                                  prompt_tokens=len(req.prompt), at=time.perf_counter() - req.submitted,
                                  cache=req.cache))
        except Exception:                                    # noqa: BLE001
            pass
