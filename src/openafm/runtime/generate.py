"""Prefill + decode for a batch of token prompts, with sampling, EOS, stop strings and streaming."""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

import torch

from openafm.errors import ContextWindowExceededError
from openafm.models.decoder import CausalLM, Logits
from openafm.runtime.cancel import CancelToken
from openafm.runtime.fused_step import StepKind, choose_step
from openafm.runtime.kv_cache import KVCache, KVStorage
from openafm.runtime.sampling import Sampler, SamplingParams
from openafm.runtime.stops import StopMatcher
from openafm.tokenizer.stream import StreamDecoder

PREFILL_CHUNK = 512   # prompt tokens per prefill forward: bounds the attention scores and activations


class FinishReason:
    EOS = "eos"          # the model produced an end-of-sequence token
    STOP = "stop"        # a stop string appeared (it is cut from the text)
    LENGTH = "length"    # max_new_tokens reached
    COMPLETE = "complete"  # the constraint's grammar is complete and admits nothing more


@dataclasses.dataclass
class TokenEvent:
    """One generated token of one row, with the newly visible text (may be '' while text is held back)."""
    row: int
    token_id: int
    text: str


@dataclasses.dataclass
class GenerationStats:
    prompt_tokens: int = 0          # all rows, padding excluded
    new_tokens: int = 0             # all rows
    prefill_seconds: float = 0.0
    time_to_first_token: float = 0.0
    decode_seconds: float = 0.0     # after the first token
    decode_steps: int = 0           # forward passes after the first token
    forced_tokens: int = 0          # tokens a constraint forced (appended without sampling)
    kv_cache_bytes: int = 0
    cache: KVCache | None = None    # the cache the generation ran on (holds every token fed to the model)
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


@dataclasses.dataclass
class _Row:
    decoder: object | None           # tokenizer StreamDecoder, when text is wanted
    text: str = ""
    shown: int = 0                   # characters of text already streamed
    tokens: list[int] = dataclasses.field(default_factory=list)
    finish: str | None = None


def generate_tokens(model: CausalLM, prompts: list[list[int]], *, max_new_tokens: int,
                    sampling: SamplingParams = SamplingParams(), eos_token_ids: set[int] | frozenset = frozenset(),
                    stop: list[str] | tuple[str, ...] = (), tokenizer=None,
                    on_token: Callable[[TokenEvent], None] | None = None,
                    stats: GenerationStats | None = None, constraint=None,
                    fast_forward: bool = True, cache: KVCache | None = None,
                    kv_storage: KVStorage = KVStorage.NATIVE,
                    cancel: CancelToken | None = None, step: StepKind = StepKind.AUTO,
                    prefill_chunk: int = PREFILL_CHUNK) -> list[Generation]:
    """Generate up to max_new_tokens for each prompt (lists of token ids); rows finish independently.

    constraint: a runtime.constrained.GrammarConstraint for a single prompt: the logits are masked to the
    grammar at every step, and with fast_forward the tokens it forces are appended without sampling and
    run through the model in one forward pass.

    cache: continue a single sequence whose earlier tokens are already in this cache (a session): the
    prompt holds only the new tokens, and only they are prefilled. Read the cache back from
    `stats.cache` (it is replaced by a larger one when it must grow).

    kv_storage: how a new cache stores K/V (KVStorage.INT8: int8 with per-token, per-head scales). A
    continued cache keeps its own storage; asking for another one raises.

    cancel: checked before the prefill and before every decode step; once it is cancelled (from any thread)
    no further forward pass runs and GenerationCancelled is raised. The cache then holds whole steps only:
    the prompt and every token fed back before the cancel (`stats.cache`, `stats.decode_steps`).

    step: how one-token decode steps run (runtime.fused_step): AUTO takes the fused C++ step where the
    model allows it and says which ran in `stats.step`; FUSED raises where it cannot run; EAGER is the
    module graph. Prefill and multi-token feeds (fast-forwarded tokens) always run the module graph.

    prefill_chunk: a longer prompt is prefilled this many tokens at a time through the cache (the same
    logits; memory for attention scores and activations stays bounded by the chunk).
    """
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
    if isinstance(prefill_chunk, bool) or not isinstance(prefill_chunk, int) or prefill_chunk < 1:
        raise ValueError(f"prefill_chunk={prefill_chunk!r} is invalid: use an integer >= 1")
    if stop and tokenizer is None:
        raise ValueError("stop strings need a tokenizer to decode text")
    window = model.kv_plan.max_seq_len
    before = cache.steps if cache is not None else 0
    longest = max(len(p) for p in prompts)
    if before + longest + max_new_tokens > window:
        raise ContextWindowExceededError(before + longest, window, max_new_tokens)

    stats = stats if stats is not None else GenerationStats()
    device, dtype = _device_dtype(model)
    b = len(prompts)
    stops = StopMatcher(stop)
    rows = [_Row(decoder=_stream_decoder(tokenizer)) for _ in prompts]
    sampler = Sampler(sampling, device)
    if cache is None:
        cache = KVCache(model.kv_plan, batch_size=b, capacity=longest + max_new_tokens,
                        dtype=dtype, device=device, storage=kv_storage)
    elif cache.steps + longest + max_new_tokens > cache.capacity:
        need = cache.steps + longest + max_new_tokens
        cache = cache.grown(min(window, max(need, 2 * cache.capacity)))
    stats.cache = cache
    fused, stats.step = choose_step(step, model, cache)
    stats.kv_cache_bytes = cache.nbytes()
    stats.prompt_tokens = sum(len(p) for p in prompts)

    ids, positions = _left_pad(prompts, device)
    if before:
        positions = positions + before          # a single unpadded prompt continuing the cache
    if cancel is not None:
        cancel.raise_if_cancelled("before the prefill")
    start = time.perf_counter()
    with torch.inference_mode():
        for s in range(0, ids.shape[1], prefill_chunk):
            logits = model(ids[:, s:s + prefill_chunk], cache=cache, positions=positions[:, s:s + prefill_chunk],
                           logits=Logits.LAST)[:, -1]                                      # [B, V]
        stats.prefill_seconds = time.perf_counter() - start
        next_pos = positions[:, -1:] + 1                                                   # [B, 1]
        produced = 0
        while True:
            if constraint is not None:
                logits = constraint.mask_logits(logits)
            tokens = sampler(logits)                                                       # [B]
            if produced == 0:
                stats.time_to_first_token = time.perf_counter() - start
                decode_start = time.perf_counter()
            feed = tokens[:, None]                                                         # [B, n]
            for r, tok in enumerate(tokens.tolist()):
                if rows[r].finish is None:
                    _accept(rows[r], r, tok, eos_token_ids, stops, on_token)
                    stats.new_tokens += 1
            produced += 1
            if constraint is not None and rows[0].finish is None:
                constraint.consume(int(tokens[0]))
                forced = constraint.forced(budget=max_new_tokens - produced) if fast_forward else []
                for tok in forced:
                    if rows[0].finish is None:
                        _accept(rows[0], 0, tok, eos_token_ids, stops, on_token)
                produced += len(forced)
                stats.new_tokens += len(forced)
                stats.forced_tokens += len(forced)
                feed = torch.tensor([[int(tokens[0]), *forced]], device=device)
                if constraint.done and rows[0].finish is None:
                    rows[0].finish = FinishReason.COMPLETE
                    _flush(rows[0], 0, on_token)
            if all(row.finish for row in rows) or produced >= max_new_tokens:
                break
            if cancel is not None:
                cancel.raise_if_cancelled(f"before decode step {stats.decode_steps + 1}")
            n = feed.shape[1]
            if fused is not None and n == 1:
                logits = fused(feed, cache, next_pos)                                      # [B, V]
            else:
                logits = model(feed, cache=cache, positions=next_pos + torch.arange(n, device=device),
                               logits=Logits.LAST)[:, -1]
            next_pos = next_pos + n
            stats.decode_steps += 1
        stats.decode_seconds = time.perf_counter() - decode_start
    for r, row in enumerate(rows):
        if row.finish is None:
            row.finish = FinishReason.LENGTH
            _flush(row, r, on_token)
    return [Generation(row.tokens, row.text if row.decoder else None, row.finish) for row in rows]


def _accept(row: _Row, r: int, tok: int, eos: set[int], stops: StopMatcher, on_token) -> None:
    if tok in eos:
        row.finish = FinishReason.EOS
        _flush(row, r, on_token, token_id=tok)
        return
    row.tokens.append(tok)
    if row.decoder is None:
        if on_token:
            on_token(TokenEvent(r, tok, ""))
        return
    before = len(row.text)
    row.text += row.decoder.push(tok)
    cut = stops.find(row.text, before) if stops.stops else None
    if cut is not None:
        row.text = row.text[:cut]
        row.finish = FinishReason.STOP
        _flush(row, r, on_token, token_id=tok)
        return
    visible = stops.safe_length(row.text) if stops.stops else len(row.text)
    delta, row.shown = row.text[row.shown:visible], max(row.shown, visible)
    if on_token:
        on_token(TokenEvent(r, tok, delta))


def _flush(row: _Row, r: int, on_token, token_id: int = -1) -> None:
    """At the end of a row: show whatever text was held back."""
    if row.decoder is not None and row.finish != FinishReason.STOP:
        row.text += row.decoder.flush()
    delta, row.shown = row.text[row.shown:], len(row.text)
    if on_token and (delta or token_id >= 0):
        on_token(TokenEvent(r, token_id, delta))


def _stream_decoder(tokenizer):
    if tokenizer is None:
        return None
    return StreamDecoder(tokenizer)


def _device_dtype(model: CausalLM) -> tuple[torch.device, torch.dtype]:
    """The device and activation dtype of a model (its final norm's weight: present in dense and packed models)."""
    w = model.norm.weight
    return w.device, w.dtype


def _left_pad(prompts: list[list[int]], device) -> tuple[torch.Tensor, torch.Tensor]:
    """-> ids [B, L] (pad id 0) and positions [B, L] with -1 on padding."""
    longest = max(len(p) for p in prompts)
    ids = torch.zeros(len(prompts), longest, dtype=torch.long)
    pos = torch.full((len(prompts), longest), -1, dtype=torch.long)
    for r, p in enumerate(prompts):
        ids[r, longest - len(p):] = torch.tensor(p, dtype=torch.long)
        pos[r, longest - len(p):] = torch.arange(len(p))
    return ids.to(device), pos.to(device)
