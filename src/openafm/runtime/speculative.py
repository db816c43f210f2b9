"""Speculative decoding: a small draft proposes gamma tokens, the target scores them all in one forward pass,
and both KV caches roll back what the target rejected.

One round (Leviathan et al. 2023, "Fast inference from transformers via speculative decoding"):

1. the draft, fed the committed tokens it has not seen, proposes d_1..d_g one token at a time (fused step);
2. the target runs [pending, d_1..d_g] in one forward pass -> its distributions p_1..p_{g+1};
3. greedy: d_j is accepted while it equals argmax p_j; sampling: with probability min(1, p_j(d_j) / q_j(d_j)),
   and the first rejected position is resampled from norm(max(0, p_j - q_j)); if all g are accepted a bonus
   token comes from p_{g+1}. Each round commits accepted + 1 tokens, distributed exactly as the target's;
4. both caches `rewind_speculative` to the last accepted token (ring slots restored, runtime.kv_cache).

Greedy output is the target's greedy output token for token (up to float ties: the target scores g+1
positions in one pass, which rounds differently from one-token steps; tests and the benchmark compare).

With a constraint (runtime.constrained, one sequence): the draft samples under the grammar's mask, every
drafted token is consumed by the matcher as it is proposed (the mask of each position is kept for the
target's check), tokens the grammar forces enter the proposal as free tokens (accepted without a vote, as
fast-forward appends them), and on a rejection the matcher rolls back exactly the rejected tokens
(`GrammarConstraint.rollback`). Every committed token was allowed by the grammar, so outputs stay valid.

Batches: every row drafts g tokens; a round commits the same count for every row, the smallest accepted
run plus one (a longer-accepting row keeps its next accepted draft token as that extra token, which is a
valid draw of the rule), so the shared-step KV caches stay aligned. Rows accepting independently would need
per-row cache lengths, which the shared-slot cache does not have: not done.

gamma is fixed per call (benchmarks/speculative.py sweeps it); a round proposes fewer near max_new_tokens.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

import torch

from openafm.errors import ContextWindowExceededError
from openafm.models.decoder import CausalLM, Logits
from openafm.runtime.cancel import CancelToken
from openafm.runtime.draft import DraftModel
from openafm.runtime.fused_step import StepKind, choose_step
from openafm.runtime.generate import (PREFILL_CHUNK, FinishReason, Generation, GenerationStats, TokenEvent, _accept,
                                      _device_dtype, _flush, _left_pad, _Row, _stream_decoder)
from openafm.runtime.kv_cache import KVCache
from openafm.runtime.sampling import Sampler, SamplingParams
from openafm.runtime.stops import StopMatcher


@dataclasses.dataclass
class SpeculativeStats:
    rounds: int = 0              # draft-then-verify rounds
    proposed: int = 0            # drafted tokens the target scored (summed over rows)
    accepted: int = 0            # of them, accepted by the target's rule (summed over rows, before batch alignment)
    free: int = 0                # forced tokens a constraint put into proposals (accepted without a vote)
    draft_seconds: float = 0.0
    verify_seconds: float = 0.0
    verify: str = ""             # how the target's scoring pass ran ("fused" or "eager")
    draft_cache: KVCache | None = None   # the draft's cache after the call (continue it with draft_cache=)

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.proposed if self.proposed else float("nan")

    @property
    def mean_accepted_length(self) -> float:
        """Drafted tokens accepted per round and row (a round commits this + 1 tokens per row)."""
        return self.accepted / self.rounds if self.rounds else float("nan")


def generate_speculative(target: CausalLM, draft: DraftModel, prompts: list[list[int]], *, max_new_tokens: int,
                         gamma: int = 4, sampling: SamplingParams = SamplingParams(),
                         eos_token_ids: set[int] | frozenset = frozenset(), stop: list[str] | tuple[str, ...] = (),
                         tokenizer=None, on_token: Callable[[TokenEvent], None] | None = None,
                         stats: GenerationStats | None = None, spec_stats: SpeculativeStats | None = None,
                         constraint=None, fast_forward: bool = True, step: StepKind = StepKind.AUTO,
                         cancel: CancelToken | None = None, prefill_chunk: int = PREFILL_CHUNK,
                         cache: KVCache | None = None, draft_cache: KVCache | None = None,
                         draft_prefix: list[int] = ()) -> list[Generation]:
    """generate_tokens' contract (runtime.generate) with a draft proposing up to `gamma` tokens per round.

    cache / draft_cache: continue one sequence (a session): `cache` holds the target's earlier tokens, the
    draft's cache a prefix of them, and `draft_prefix` the tokens between the two (the draft prefills them first).
    Both caches end holding a prefix of the sequence (prompt + returned tokens); read them back from
    `stats.cache` and `spec_stats.draft_cache` (replaced by larger ones when they must grow)."""
    if isinstance(gamma, bool) or not isinstance(gamma, int) or gamma < 1:
        raise ValueError(f"gamma={gamma!r} is invalid: use an integer >= 1 (draft tokens per round)")
    if constraint is not None and len(prompts) != 1:
        raise ValueError(f"constrained decoding runs one sequence at a time; got a batch of {len(prompts)} prompts")
    if constraint is not None and not fast_forward:
        raise ValueError("speculative constrained decoding enters forced tokens as free proposals: fast_forward=False "
                         "is not supported with a draft")
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens={max_new_tokens!r} is invalid: use an integer >= 1")
    if stop and tokenizer is None:
        raise ValueError("stop strings need a tokenizer to decode text")
    if draft.vocab_size != target.kv_plan.vocab_size:
        raise ValueError(f"the draft's vocabulary ({draft.vocab_size}) differs from the target's "
                         f"({target.kv_plan.vocab_size}): a draft must share the target's tokenizer")
    if cache is not None and len(prompts) != 1:
        raise ValueError(f"continuing a cache takes one prompt of new tokens; got {len(prompts)} prompts")
    before = cache.steps if cache is not None else 0
    dbefore = draft_cache.steps if draft_cache is not None else 0
    if dbefore + len(draft_prefix) != before:
        raise ValueError(f"the draft's cache ({dbefore} steps) plus draft_prefix ({len(draft_prefix)} tokens) must "
                         f"reach the target's cache ({before} steps)")
    longest = max(len(p) for p in prompts)
    for name, m in (("target", target), ("draft", draft.model)):
        if before + longest + max_new_tokens > m.kv_plan.max_seq_len:
            raise ContextWindowExceededError(before + longest, m.kv_plan.max_seq_len, max_new_tokens)

    stats = stats if stats is not None else GenerationStats()
    spec = spec_stats if spec_stats is not None else SpeculativeStats()
    device, dtype = _device_dtype(target)
    b = len(prompts)
    stops = StopMatcher(stop)
    rows = [_Row(decoder=_stream_decoder(tokenizer)) for _ in prompts]
    sampler = Sampler(sampling, device)
    capacity = before + longest + max_new_tokens
    tcache = _cache(cache, target, b, capacity, dtype, device)
    dcache = _cache(draft_cache, draft.model, b, capacity, _device_dtype(draft.model)[1], device)
    stats.cache = tcache
    fused_t, stats.step = choose_step(step, target, tcache)
    fused_d, _ = choose_step(step, draft.model, dcache)
    verify = getattr(fused_t, "verify", None) if b == 1 else None
    spec.verify = "fused" if verify is not None else "eager"
    stats.kv_cache_bytes = tcache.nbytes() + dcache.nbytes()
    stats.prompt_tokens = sum(len(p) for p in prompts)
    # tokens one pass may write: less than any ring's window (it may not wrap over itself); without rings, a long
    # run of forced tokens beyond gamma + 64 is fed on its own first
    limit = min([w - 1 for c in (tcache, dcache) for w in _ring_windows(c)] + [gamma + 64])

    ids, positions = _left_pad(prompts, device)
    if cancel is not None:
        cancel.raise_if_cancelled("before the prefill")
    start = time.perf_counter()
    positions = positions + before
    with torch.inference_mode():
        if draft_prefix:
            _feed(draft.model, dcache, None, [list(draft_prefix)], torch.tensor([[dbefore]], device=device), device,
                  Logits.LAST)
        for s in range(0, ids.shape[1], prefill_chunk):
            logits = target(ids[:, s:s + prefill_chunk], cache=tcache, positions=positions[:, s:s + prefill_chunk],
                            logits=Logits.LAST)[:, -1]                                  # [B, V]
            draft.model(ids[:, s:s + prefill_chunk], cache=dcache, positions=positions[:, s:s + prefill_chunk],
                        logits=Logits.LAST)
        stats.prefill_seconds = time.perf_counter() - start
        next_pos = positions[:, -1:] + 1                                                # [B, 1] position of pending[0]
        if constraint is not None:
            logits = constraint.mask_logits(logits)
        first = sampler(logits)                                                         # [B]
        stats.time_to_first_token = time.perf_counter() - start
        decode_start = time.perf_counter()
        pending = [[int(t)] for t in first.tolist()]              # committed, not yet in the target's cache
        forced = _commit(rows, pending, None, constraint, eos_token_ids, stops, on_token, stats, max_new_tokens - 1)
        for r in range(b):
            pending[r] += forced
        dpending = [list(p) for p in pending]                    # committed, not yet in the draft's cache
        produced = len(pending[0])
        while not all(row.finish for row in rows) and produced < max_new_tokens:
            if cancel is not None:
                cancel.raise_if_cancelled(f"before decode round {spec.rounds + 1}")
            room = max_new_tokens - produced - 1                 # proposals leave room for the round's own token
            if len(pending[0]) + min(room, gamma) > limit:       # rings: one pass may not wrap over itself
                _feed(target, tcache, fused_t, [p[:-1] for p in pending], next_pos, device, Logits.LAST)
                next_pos = next_pos + len(pending[0]) - 1
                pending = [p[-1:] for p in pending]
            budget = min(room, limit - len(pending[0]))
            t0 = time.perf_counter()
            chunk, free, masks, q, seen, dtails = _propose(draft, dcache, fused_d, dpending, next_pos + len(pending[0])
                                                           - len(dpending[0]), gamma, budget, sampler, constraint,
                                                           eos_token_ids, device, limit)
            t1 = time.perf_counter()
            n_pend, n_chunk = len(pending[0]), len(chunk[0])
            feed = torch.tensor([p + c for p, c in zip(pending, chunk)], device=device)   # [B, P + L]
            base = tcache.steps
            tails = [tcache.save_tail(n_pend + n_chunk)] if _ring_windows(tcache) else []
            if verify is not None and n_pend + n_chunk > 1 and fused_t.can_verify(tcache, n_pend + n_chunk):
                tlogits = verify(feed, tcache, next_pos + torch.arange(feed.shape[1], device=device))
            else:
                tlogits = target(feed, cache=tcache, positions=next_pos + torch.arange(feed.shape[1], device=device),
                                 logits=Logits.ALL)
            tlogits = tlogits[:, n_pend - 1:].float()                                   # [B, L + 1, V]
            spec.verify_seconds += time.perf_counter() - t1
            spec.draft_seconds += t1 - t0
            accepted, extra = _judge(tlogits, chunk, free, masks, q, sampler, constraint)
            a = min(accepted)
            spec.rounds += 1
            spec.proposed += b * sum(not f for f in free)
            spec.accepted += sum(sum(not f for f in free[:n]) for n in accepted)
            spec.free += sum(free)
            if constraint is not None:
                constraint.rollback(n_chunk - a)
            last = [c[a] if n > a else extra[r] for r, (c, n) in enumerate(zip(chunk, accepted))]
            committed = [c[:a] + [t] for c, t in zip(chunk, last)]
            budget = max_new_tokens - produced - a - 1
            forced = _commit(rows, committed, free[:a], constraint, eos_token_ids, stops, on_token, stats, budget)
            produced += a + 1 + len(forced)
            # the target keeps pending + the accepted proposals; the draft what it saw of them
            tcache.rewind_speculative(base + n_pend + a, tails)
            next_pos = next_pos + n_pend + a
            pending = [[t, *forced] for t in last]
            keep = min(a, seen)
            dcache.rewind_speculative(dcache.steps - seen + keep, dtails)
            dpending = [c[keep:a] + p for c, p in zip(chunk, pending)]
            stats.decode_steps += 1
            if b == 1 and rows[0].finish is not None:     # the caches may hold tokens past the end (EOS, after it)
                end = before + len(prompts[0]) + len(rows[0].tokens)
                tcache.rewind_speculative(min(tcache.steps, end), tails)
                dcache.rewind_speculative(min(dcache.steps, end), dtails)
        stats.decode_seconds = time.perf_counter() - decode_start
        spec.draft_cache = dcache
    for r, row in enumerate(rows):
        if row.finish is None:
            row.finish = FinishReason.LENGTH
            _flush(row, r, on_token)
    return [Generation(row.tokens, row.text if row.decoder else None, row.finish) for row in rows]


def _cache(given: KVCache | None, model, b: int, capacity: int, dtype, device) -> KVCache:
    """A new cache, or the given one grown to hold `capacity` steps."""
    if given is None:
        return KVCache(model.kv_plan, batch_size=b, capacity=capacity, dtype=dtype, device=device)
    if capacity > given.capacity:
        return given.grown(min(model.kv_plan.max_seq_len, max(capacity, 2 * given.capacity)))
    return given


def _ring_windows(cache: KVCache) -> list[int]:
    return [w for w in cache._pos if w is not None]


def _feed(model, cache: KVCache, fused, tokens: list[list[int]], pos: torch.Tensor, device, kind: Logits):
    """Run committed tokens [B, n] through a model and its cache -> logits [B, V] of the last one (or None)."""
    n = len(tokens[0])
    if n == 0:
        return None
    if fused is not None and n == 1:
        return fused(torch.tensor(tokens, device=device), cache, pos)
    out = model(torch.tensor(tokens, device=device), cache=cache, positions=pos + torch.arange(n, device=device),
                logits=kind)
    return out[:, -1]


def _propose(draft: DraftModel, cache: KVCache, fused, dpending: list[list[int]], pos: torch.Tensor, gamma: int,
             budget: int, sampler: Sampler, constraint, eos: set[int], device, limit: int):
    """The draft's proposal: tokens [B][L], which are free (forced) [L], masks per position (constraint) and the
    draft's distributions per position ([B, V] each; None when greedy), how many proposed tokens the draft's
    cache holds and the ring tails saved before writing them. Leaves the grammar past the proposal."""
    b = len(dpending)
    chunk: list[list[int]] = [[] for _ in range(b)]
    free: list[bool] = []
    masks: list[torch.Tensor | None] = []
    qs: list[torch.Tensor | None] = []
    tails: list = []
    seen = 0
    feed = dpending
    drafted = 0
    while drafted < gamma and len(chunk[0]) < budget and not (constraint is not None and constraint.done):
        n = len(feed[0])
        if feed is not dpending and _ring_windows(cache):
            tails.append(cache.save_tail(n))
        raw = _feed(draft.model, cache, fused, feed, pos, device, Logits.LAST)         # [B, K]
        if feed is not dpending:
            seen += n
        pos = pos + n
        if sampler.params.greedy and constraint is None:
            idx = raw.argmax(-1)
            toks = (idx if draft.vocab_ids is None else draft.vocab_ids[idx]).tolist()
            for r in range(b):
                chunk[r].append(int(toks[r]))
            free.append(False)
            masks.append(None)
            qs.append(None)
            drafted += 1
            feed = [[t] for t in toks]
            if b == 1 and toks[0] in eos:
                break
            continue
        logits = draft.full_logits(raw)                                                 # [B, V]
        mask = None
        if constraint is not None:
            mask = constraint.allowed().to(device)
            logits = logits.masked_fill(~mask, float("-inf"))
            if not bool(torch.isfinite(logits).any()):   # the draft's head covers no allowed token: propose none
                break
        if sampler.params.greedy:
            tokens, q = logits.argmax(-1), None
        else:
            q = sampler.probs(logits)
            tokens = sampler.draw(q)
        toks = tokens.tolist()
        for r in range(b):
            chunk[r].append(int(toks[r]))
        free.append(False)
        masks.append(mask)
        qs.append(q)
        drafted += 1
        feed = [[t] for t in toks]
        if constraint is not None:
            constraint.consume(toks[0])
            forced = [] if constraint.done else constraint.forced_now(min(budget - len(chunk[0]), limit - 1))
            for t in forced:
                constraint.consume(t)
            chunk[0] += forced
            free += [True] * len(forced)
            masks += [None] * len(forced)
            qs += [None] * len(forced)
            feed = [[toks[0], *forced]]
        if b == 1 and toks[0] in eos:
            break
    return chunk, free, masks, qs, seen, tails


def _judge(tlogits: torch.Tensor, chunk: list[list[int]], free: list[bool], masks, qs, sampler: Sampler,
           constraint) -> tuple[list[int], list[int]]:
    """Per row: how many proposals the target accepts, and the token that follows them (correction or bonus)."""
    b, n = len(chunk), len(free)
    accepted, extra = [n] * b, [0] * b
    greedy = sampler.params.greedy
    for r in range(b):
        for j in range(n):
            if free[j]:
                continue
            logits = tlogits[r, j]
            if masks[j] is not None:
                logits = logits.masked_fill(~masks[j], float("-inf"))
            d = chunk[r][j]
            if greedy:
                best = int(logits.argmax())
                if best == d:
                    continue
                accepted[r], extra[r] = j, best
                break
            p = sampler.probs(logits[None])[0]                                          # [V]
            q = qs[j][r]
            if float(sampler.uniform(1)) * float(q[d]) < float(p[d]):                  # u < p(d) / q(d)
                continue
            residual = (p - q).clamp_(min=0)
            accepted[r] = j
            extra[r] = int(sampler.draw((residual if float(residual.sum()) > 0 else p)[None])[0])
            break
        else:
            if constraint is not None and constraint.done:
                extra[r] = -1                                      # the grammar is complete: no bonus token
                continue
            logits = tlogits[r, n]
            if constraint is not None:
                logits = constraint.mask_logits(logits)
            extra[r] = int(logits.argmax()) if greedy else int(sampler(logits[None].float())[0])
    return accepted, extra


def _commit(rows: list[_Row], tokens: list[list[int]], free: list[bool] | None, constraint, eos, stops, on_token,
            stats: GenerationStats, budget: int) -> list[int]:
    """Emit each row's committed tokens; with a constraint consume the round's own token and return the tokens
    the grammar then forces (emitted too, at most `budget`)."""
    forced: list[int] = []
    if constraint is not None:
        last = tokens[0][-1]
        if last >= 0:
            constraint.consume(last)
            if not constraint.done and budget > 0:
                forced = constraint.forced(budget=budget)
        else:
            tokens = [tokens[0][:-1]]
        stats.forced_tokens += len(forced) + (sum(free) if free else 0)
    for r, toks in enumerate(tokens):
        for tok in toks + (forced if constraint is not None else []):
            if rows[r].finish is None:
                _accept(rows[r], r, tok, eos, stops, on_token)
                stats.new_tokens += 1
    if constraint is not None and constraint.done and rows[0].finish is None:
        rows[0].finish = FinishReason.COMPLETE
        _flush(rows[0], 0, on_token)
    return forced
