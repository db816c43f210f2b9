"""Batched inference for evaluation: log-likelihoods of continuations, and greedy generation over prompt lists.

Log-likelihood. A request (context, continuation) is scored as the summed log-probability of the
continuation's tokens after the context's (the two encoded apart, so every choice of an item is scored
after the same context tokens), and whether greedy decoding would have produced exactly them. The model
only needs the tokens context + continuation[:-1] as input (the last continuation token is predicted,
never read), so requests with the same input share one row: the four letter choices " A".." D" after
one prompt cost one row, not four. Rows are sorted by length (longest first, so a batch pads little),
left-padded (positions -1 on padding) so every row's scored positions are its trailing ones, and run
`batch_size` at a time; when every continuation in a batch is one token only the last position's logits
are computed (`Logits.LAST`).

    scores = loglikelihoods(model, tokenizer, [("Question: 2+2?\\nAnswer:", " 4"), ...], batch_size=16)
    scores[0].logprob, scores[0].greedy

Generation: `generate_batched` runs greedy generation over many prompts, `batch_size` prompts per call
of runtime.generate_tokens (one forward per step for the whole batch), sorted by length.

Both at once: `score_and_generate` scores one-token choices after each prompt and generates from it greedily in one
pass through the engine: each prompt is prefilled once, its last position's log-probabilities give the choices'
scores (the engine's `RowRequest.score`), and the rows decode on from that prefill, `batch_size` at a time — a
multiple-choice item whose letter is also generated costs one prefill, not two.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from openafm.models.decoder import CausalLM, Logits
from openafm.runtime.engine import Engine, EngineConfig
from openafm.runtime.generate import generate_tokens
from openafm.runtime.request import Completion, RowRequest
from openafm.runtime.sampling import SamplingParams


class Rows(enum.Enum):
    SHARED = "shared"               # requests with the same input share one row (the default)
    PER_REQUEST = "per_request"     # one row per request: the one-request-per-forward baseline


@dataclass(frozen=True)
class Score:
    logprob: float          # summed log-probability of the continuation's tokens, nats
    greedy: bool            # every continuation token was the argmax at its position
    tokens: int             # continuation tokens scored


@dataclass
class _Row:
    input_ids: list[int]                          # context + continuation[:-1]
    wanted: list[tuple[int, list[int]]]           # (request index, continuation tokens)


def encode_requests(tokenizer, requests: Sequence[tuple[str, str]]) -> list[tuple[list[int], list[int]]]:
    """(context ids, continuation ids) of each request; an empty context becomes the EOS token (the
    document boundary the model was trained to start after), an empty continuation raises."""
    prefix = [tokenizer.eos_token_id]
    out = []
    for context, continuation in requests:
        cont = tokenizer.encode(continuation)
        if not cont:
            raise ValueError(f"empty continuation {continuation!r} after context {context[-60:]!r}: nothing to score")
        out.append((tokenizer.encode(context) if context else prefix, cont))
    return out


def loglikelihoods(model: CausalLM, tokenizer, requests: Sequence[tuple[str, str]], *, batch_size: int = 16,
                   rows: Rows = Rows.SHARED, on_batch: Callable[[int], None] | None = None) -> list[Score]:
    """Score each (context, continuation); see the module doc. rows=Rows.PER_REQUEST gives every request its own
    row (the one-request-per-forward baseline). on_batch(n_requests_done) after each batch."""
    return score_token_requests(model, encode_requests(tokenizer, requests), batch_size=batch_size,
                                rows=rows, on_batch=on_batch)


@torch.no_grad()
def score_token_requests(model: CausalLM, requests: Sequence[tuple[list[int], list[int]]], *, batch_size: int = 16,
                         rows: Rows = Rows.SHARED, on_batch: Callable[[int], None] | None = None) -> list[Score]:
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    window = model.kv_plan.max_seq_len
    by_input: dict[tuple[int, ...] | int, _Row] = {}
    for i, (ctx, cont) in enumerate(requests):
        if not ctx or not cont:
            raise ValueError(f"request {i}: context and continuation need at least one token each")
        inp = list(ctx) + list(cont[:-1])
        if len(inp) > window:
            raise ValueError(f"request {i}: {len(inp)} input tokens exceed the context window of {window}")
        key = tuple(inp) if rows is Rows.SHARED else i
        by_input.setdefault(key, _Row(inp, [])).wanted.append((i, list(cont)))
    ordered = sorted(by_input.values(), key=lambda r: -len(r.input_ids))
    device = model.norm.weight.device
    out: list[Score | None] = [None] * len(requests)
    done = 0
    for start in range(0, len(ordered), batch_size):
        batch = ordered[start:start + batch_size]
        k = max(len(c) for r in batch for _, c in r.wanted)                  # trailing positions needed
        longest = max(len(r.input_ids) for r in batch)
        ids = torch.zeros(len(batch), longest, dtype=torch.long)
        pos = torch.full((len(batch), longest), -1, dtype=torch.long)
        for b, r in enumerate(batch):
            n = len(r.input_ids)
            ids[b, longest - n:] = torch.tensor(r.input_ids)
            pos[b, longest - n:] = torch.arange(n)
        logits = model(ids.to(device), positions=pos.to(device), logits=Logits.LAST if k == 1 else Logits.ALL)
        logp = F.log_softmax(logits[:, -k:].float(), dim=-1).cpu()          # [B, k, V]
        for b, r in enumerate(batch):
            for i, cont in r.wanted:
                steps = logp[b, k - len(cont):]                              # [len(cont), V]
                target = torch.tensor(cont)
                lp = steps.gather(1, target[:, None]).squeeze(1)
                out[i] = Score(logprob=float(lp.sum()), greedy=bool((steps.argmax(-1) == target).all()),
                               tokens=len(cont))
                done += 1
        if on_batch is not None:
            on_batch(done)
    return out  # type: ignore[return-value]


def generate_batched(model: CausalLM, tokenizer, prompts: Sequence[str], *, max_tokens: int, stop: Sequence[str] = (),
                     batch_size: int = 8, on_batch: Callable[[int], None] | None = None) -> list[str]:
    """Greedy continuations of each prompt (stop strings cut from the text), `batch_size` prompts per batch."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    encoded = [tokenizer.encode(p) for p in prompts]
    order = sorted(range(len(prompts)), key=lambda i: -len(encoded[i]))
    out: list[str] = [""] * len(prompts)
    eos = set(tokenizer.eos_token_ids)
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        gens = generate_tokens(model, [encoded[i] for i in chunk], max_new_tokens=max_tokens,
                               sampling=SamplingParams(), eos_token_ids=eos, stop=list(stop), tokenizer=tokenizer)
        for i, g in zip(chunk, gens):
            out[i] = g.text or ""
        if on_batch is not None:
            on_batch(start + len(chunk))
    return out


def score_and_generate(model: CausalLM, tokenizer, prompts: Sequence[str], choices: Sequence[int], *,
                       max_tokens: int, batch_size: int = 8) -> list[tuple[list[float], str]]:
    """Per prompt: (the log-probability of each token in `choices` as the next token, the greedy continuation's
    text), from one prefill per prompt (see the module doc); `batch_size` rows decode together."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    encoded = [tokenizer.encode(p) for p in prompts]
    if any(not ids for ids in encoded):
        raise ValueError("every prompt needs at least one token")
    window = model.kv_plan.max_seq_len
    config = EngineConfig(max_batch=batch_size, max_queue=max(1, len(prompts)), max_context=window,
                          initial_capacity=min(window, max(len(ids) for ids in encoded) + max_tokens), prefix_cache=0)
    outs = [Completion() for _ in prompts]
    Engine(model, tokenizer, config).run([RowRequest(ids, max_tokens, out, score=tuple(choices))
                                          for ids, out in zip(encoded, outs)])
    for out in outs:
        out.raise_if_failed()
    return [(out.scores, out.text) for out in outs]
