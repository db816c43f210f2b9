"""Batched rollouts and scoring for RLOO: the P * k responses of a step sampled as batches on the runtime, and the
per-token log-probabilities of (prompt + response) rows under a model, in micro-batches.

    rows = sample_rows(policy, prompt_ids, k=4, max_new_tokens=48, temperature=1.0, seed=7, eos_token_ids={2},
                       batch=32)                         # P * k Row(prompt, response) (row n = p * k + i)
    tokens, mask = pack_rows(rows)                       # [N, T] right-padded, [N, T - 1] response positions
    logprobs = row_logprobs(model, tokens, mask, temperature=1.0, micro_batch=16)   # [N, T - 1], no gradient
    micro_batches(mask, 16)                              # [(row indices, width)]: longest first, each group cut

A response keeps the token that ended it (the end-of-turn token) when it stopped there, so the policy is trained
on where to stop as well; a response cut at max_new_tokens has no end token. Log-probabilities are those of the
sampling distribution, softmax(logits / temperature), so the importance ratio of a fresh sample is exactly 1.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch

from openafm.runtime.generate import FinishReason, TokenEvent, generate_tokens
from openafm.runtime.sampling import SamplingParams


@dataclasses.dataclass(frozen=True)
class Row:
    prompt: list[int]
    response: list[int]         # sampled tokens, the end-of-turn token last when the response stopped there
    stopped: bool               # ended by an end-of-turn token (else cut at max_new_tokens)

    @property
    def text_ids(self) -> list[int]:
        """The response without its end-of-turn token: what a reward reads."""
        return self.response[:-1] if self.stopped else self.response


def sample_rows(model, prompts: Sequence[list[int]], *, k: int, max_new_tokens: int, temperature: float, seed: int,
                eos_token_ids: frozenset[int] | set[int], batch: int) -> list[Row]:
    """k samples of every prompt (rows p * k .. p * k + k - 1), generated `batch` rows at a time."""
    flat = [list(p) for p in prompts for _ in range(k)]
    return generate_rows(model, flat, max_new_tokens=max_new_tokens, eos_token_ids=eos_token_ids, batch=batch,
                         sampling=lambda start: SamplingParams(temperature=temperature, seed=seed * 1_000_003 + start))


def greedy_rows(model, prompts: Sequence[list[int]], *, max_new_tokens: int, eos_token_ids, batch: int) -> list[Row]:
    """One greedy response per prompt (held-out evaluation)."""
    return generate_rows(model, [list(p) for p in prompts], max_new_tokens=max_new_tokens,
                         eos_token_ids=eos_token_ids, batch=batch, sampling=lambda start: SamplingParams())


def generate_rows(model, prompts: list[list[int]], *, max_new_tokens: int, eos_token_ids, batch: int,
                  sampling) -> list[Row]:
    rows: list[Row] = []
    for start in range(0, len(prompts), batch):
        chunk = prompts[start:start + batch]
        last: dict[int, int] = {}

        def remember(event: TokenEvent) -> None:
            if event.token_id >= 0:
                last[event.row] = event.token_id

        gens = generate_tokens(model, chunk, max_new_tokens=max_new_tokens, sampling=sampling(start),
                               eos_token_ids=frozenset(eos_token_ids), on_token=remember)
        for r, (prompt, gen) in enumerate(zip(chunk, gens)):
            stopped = gen.finish_reason == FinishReason.EOS
            rows.append(Row(prompt, list(gen.token_ids) + ([last[r]] if stopped else []), stopped))
    return rows


def pack_rows(rows: Sequence[Row]) -> tuple[torch.Tensor, torch.Tensor]:
    """-> tokens [N, T] (prompt + response, right-padded with 0), mask [N, T - 1] (1 where tokens[:, t + 1] was
    sampled)."""
    width = max(len(r.prompt) + len(r.response) for r in rows)
    tokens = torch.zeros(len(rows), width, dtype=torch.long)
    mask = torch.zeros(len(rows), width - 1)
    for n, row in enumerate(rows):
        ids = row.prompt + row.response
        tokens[n, :len(ids)] = torch.tensor(ids)
        mask[n, len(row.prompt) - 1:len(ids) - 1] = 1.0
    return tokens, mask


def forward_logprobs(model, tokens: torch.Tensor, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    """tokens [n, T] -> (logprobs [n, T - 1] of tokens[:, 1:], entropy [n, T - 1] of each position's distribution)
    under softmax(logits / temperature); with gradient when grad mode is on."""
    logits = model(tokens[:, :-1]).float() / temperature                   # [n, T - 1, V]
    logp_all = torch.log_softmax(logits, dim=-1)
    with torch.no_grad():
        entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp_all.gather(-1, tokens[:, 1:].unsqueeze(-1)).squeeze(-1), entropy


def micro_batches(mask: torch.Tensor, size: int) -> list[tuple[torch.Tensor, int]]:
    """mask [N, T - 1] -> [(row indices, width)]: the rows `size` at a time, longest first, each group with the
    token width its longest row needs. A step mixes 60-token math prompts with 700-token tool prompts; cut to the
    whole step's width, the short rows' forward passes were mostly padding."""
    positions = torch.arange(1, mask.shape[1] + 1)
    widths = ((mask > 0) * positions).amax(-1) + 1                             # [N] tokens up to the last sampled
    order = torch.argsort(widths, descending=True, stable=True)
    groups = [order[i:i + size] for i in range(0, len(order), size)]
    return [(g, max(int(widths[g].max()), 2)) for g in groups]


@torch.no_grad()
def row_logprobs(model, tokens: torch.Tensor, mask: torch.Tensor, *, temperature: float, micro_batch: int
                 ) -> torch.Tensor:
    """tokens [N, T], mask [N, T - 1] -> [N, T - 1] (0 past each group's width), micro_batch rows per forward
    pass (micro_batches), no gradient."""
    out = torch.zeros(mask.shape, dtype=torch.float32, device=tokens.device)
    for rows, width in micro_batches(mask.cpu(), micro_batch):
        rows = rows.to(tokens.device)
        out[rows, :width - 1] = forward_logprobs(model, tokens[rows, :width], temperature)[0].float()
    return out
