"""`generate_tokens`: a batch of token prompts decoded to their ends by the engine, in the calling thread.

The call shape batch callers use (eval, RL rollouts, synthesis, `LanguageModel.generate`, benchmarks): prompts in,
`Generation`s out, optional streaming through `on_token` and timings in `GenerationStats`. Each call runs a
private `Engine` sized to its prompts (runtime.engine: continuous batching, forced tokens fed at once, the fused
step) through `Engine.run`; there is no second decode loop.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from openafm.errors import ContextWindowExceededError
from openafm.models.decoder import CausalLM
from openafm.runtime.cancel import CancelToken
from openafm.runtime.draft import DraftModel
from openafm.runtime.engine import PREFILL_CHUNK, Engine, EngineConfig
from openafm.runtime.fused_step import StepKind
from openafm.runtime.kv_cache import KVCache, KVStorage, Sliding
from openafm.runtime.proposers import ProposerKind
from openafm.runtime.request import ERROR, Completion, FinishReason, Forced, RowEvent, RowRequest
from openafm.runtime.sampling import SamplingParams

__all__ = ["PREFILL_CHUNK", "FinishReason", "Generation", "GenerationStats", "TokenEvent", "generate_tokens"]


@dataclasses.dataclass
class TokenEvent:
    """One generated token of one row, with the newly visible text (may be '' while text is held back)."""
    row: int
    token_id: int
    text: str


@dataclasses.dataclass
class GenerationStats:
    prompt_tokens: int = 0          # all rows
    new_tokens: int = 0             # all rows
    prefill_seconds: float = 0.0    # all rows' prefills
    time_to_first_token: float = 0.0    # until every row had its first token
    decode_seconds: float = 0.0     # after that
    decode_steps: int = 0           # forward passes after the first token (engine steps)
    forced_tokens: int = 0          # tokens a constraint forced (appended without sampling)
    proposed: int = 0               # proposers' guesses verified ...
    accepted: int = 0               # ... and accepted
    kv_cache_bytes: int = 0
    cache: KVCache | None = None    # one prompt: the cache holding every token fed to the model (to continue)
    step: str = ""                  # how decode steps ran: "fused", or "eager" with the reason

    @property
    def decode_tokens_per_second(self) -> float:
        """Decode steps per second (per sequence: a batch of B produces B tokens per step)."""
        return self.decode_steps / self.decode_seconds if self.decode_seconds else float("nan")


@dataclasses.dataclass
class Generation:
    token_ids: list[int]
    text: str | None
    finish_reason: str


def generate_tokens(model: CausalLM, prompts: list[list[int]], *, max_new_tokens: int,
                    sampling: SamplingParams = SamplingParams(), eos_token_ids: set[int] | frozenset = frozenset(),
                    stop: list[str] | tuple[str, ...] = (), tokenizer=None,
                    on_token: Callable[[TokenEvent], None] | None = None,
                    stats: GenerationStats | None = None, constraint=None,
                    forced: Forced = Forced.FEED, cache: KVCache | None = None,
                    kv_storage: KVStorage = KVStorage.NATIVE,
                    cancel: CancelToken | None = None, step: StepKind = StepKind.AUTO,
                    prefill_chunk: int = PREFILL_CHUNK, speculate: ProposerKind = ProposerKind.OFF,
                    draft: DraftModel | None = None, gamma: int = 4) -> list[Generation]:
    """Generate up to max_new_tokens for each prompt (lists of token ids); rows finish independently.

    sampling: each row draws from its own generator (seeded seed + row index when a seed is given).
    constraint: a runtime.constrained.GrammarConstraint for a single prompt; the tokens it forces are fed
    without sampling in one step (forced=Forced.SAMPLE samples them one step each instead).
    cache: continue a single sequence whose earlier tokens are in this cache (a session): the prompt holds only
    the new tokens, and only they are prefilled. A single prompt's `stats.cache` holds every token fed (the
    prompt and the output but its last token), for the next call to continue.
    cancel: once cancelled (from any thread) no further step runs and GenerationCancelled is raised; the cache
    then holds whole steps (`stats.cache`).
    step: how one-token decode steps run (runtime.fused_step: AUTO, FUSED raises where it cannot, EAGER).
    speculate: a proposer's guesses verified in the same step (NGRAM, or DRAFT with `draft`, a DraftModel, guessing
    up to `gamma` tokens a step); the output is unchanged, `stats.proposed` / `stats.accepted` count the guesses.
    """
    _check(model, prompts, max_new_tokens, constraint, cache, kv_storage)
    stats = stats if stats is not None else GenerationStats()
    before = cache.steps if cache is not None else 0
    longest = max(len(p) for p in prompts)
    if cache is None and len(prompts) == 1:
        w = model.norm.weight
        cache = KVCache(model.kv_plan, batch_size=1, capacity=longest, dtype=w.dtype, device=w.device,
                        sliding=Sliding.FULL, storage=kv_storage)
    config = EngineConfig(max_batch=len(prompts), max_queue=len(prompts), max_context=model.kv_plan.max_seq_len,
                          initial_capacity=min(model.kv_plan.max_seq_len, before + longest + max_new_tokens),
                          prefix_cache=0, prefill_chunk=prefill_chunk, step=step, kv_storage=kv_storage,
                          speculate=speculate, draft_gamma=gamma)
    engine = Engine(model, tokenizer, config, draft=draft, eos=frozenset(eos_token_ids))
    cancel = cancel if cancel is not None else CancelToken()
    outs = [Completion(on_event=_streamer(r, on_token)) for r in range(len(prompts))]
    seeds = [None if sampling.seed is None else sampling.seed + r for r in range(len(prompts))]
    requests = [RowRequest(list(p), max_new_tokens, out, sampling=dataclasses.replace(sampling, seed=seed),
                           stop=tuple(stop), constraint=constraint, cancel=cancel, cache=cache, forced=forced)
                for p, out, seed in zip(prompts, outs, seeds, strict=True)]
    engine.run(requests)
    _fill(stats, engine, outs)
    for out in sorted(outs, key=lambda o: o.finish != ERROR):         # a failure before a cancellation
        out.raise_if_failed()
    return [Generation(out.token_ids, out.text if tokenizer is not None else None, out.finish) for out in outs]


def _check(model, prompts, max_new_tokens, constraint, cache, kv_storage) -> None:
    """What must hold before the engine is built and sized from it; the engine checks the rest per request."""
    if cache is not None and cache.storage is not kv_storage:
        raise ValueError(f"kv_storage={kv_storage} differs from the continued cache's {cache.storage}")
    if cache is not None and len(prompts) != 1:
        raise ValueError(f"continuing a cache takes one prompt of new tokens; got {len(prompts)} prompts")
    if constraint is not None and len(prompts) != 1:
        raise ValueError(f"constrained decoding runs one sequence at a time; got a batch of {len(prompts)} prompts")
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens={max_new_tokens!r} is invalid: use an integer >= 1")
    window = model.kv_plan.max_seq_len
    before = cache.steps if cache is not None else 0
    longest = max(len(p) for p in prompts)
    if before + longest + max_new_tokens > window:
        raise ContextWindowExceededError(before + longest, window, max_new_tokens)


def _streamer(r: int, on_token) -> Callable[[RowEvent], None] | None:
    """RowEvents of row r -> TokenEvents (a token, or the text a row's end releases)."""
    if on_token is None:
        return None

    def forward(event: RowEvent) -> None:
        if event.token_id >= 0 or event.text:
            on_token(TokenEvent(r, event.token_id, event.text))
    return forward


def _fill(stats: GenerationStats, engine: Engine, outs: list[Completion]) -> None:
    started = [o for o in outs if o.prompt_tokens]
    stats.prompt_tokens = sum(o.prompt_tokens for o in outs)
    stats.new_tokens = sum(len(o.token_ids) for o in outs)
    stats.prefill_seconds = sum(o.prefill_seconds for o in started)
    stats.time_to_first_token = max((o.first_token_at for o in started), default=0.0)
    stats.decode_seconds = max(0.0, max((o.last_at for o in started), default=0.0) - stats.time_to_first_token)
    stats.decode_steps = engine.steps_run
    stats.forced_tokens = sum(o.forced for o in outs)
    stats.proposed, stats.accepted = sum(o.proposed for o in outs), sum(o.accepted for o in outs)
    stats.kv_cache_bytes = engine.cache.nbytes()
    stats.step = engine.step_kind
    if len(outs) == 1 and outs[0].cache is not None:
        stats.cache = outs[0].cache
