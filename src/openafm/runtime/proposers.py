"""Proposers: guesses of a row's next tokens that the engine's step verifies in the same forward pass.

A proposer sees one row's tokens (prompt and output so far) and guesses up to gamma tokens that follow. The
engine feeds them after the row's next token, scores every position in one pass, and keeps the longest run the
row's own choice agrees with: at each position the row samples (or takes the argmax) exactly as it would
without speculation, and continues only while what it drew equals the guess. For a proposer that guesses one
token per position (a point mass q = 1 at d), "accept d with probability p(d), else draw from norm(max(0, p -
q))" is exactly this sample-then-compare rule, so a speculating row's output is distributed as without
speculation, and greedy rows produce the same tokens (up to float rounding of a multi-token pass).

`NgramProposer` is prompt lookup (Saxena 2023; vLLM's "ngram" proposer): find the most recent earlier place
where the row's last n tokens occurred (n from max_n down to min_n) and guess the tokens that followed there.
No model, no cache: it pays on outputs that copy from the prompt or from themselves (quoting, extraction, JSON
filled from given text, code edits) and proposes nothing elsewhere. Its index is updated per token, so a lookup
costs O(max_n), not a scan of the history.

`DraftProposer` asks a small draft model (runtime.draft, `openafm draft train`) for its greedy continuation. It
keeps the draft's own single-row cache a prefix of the row's tokens: each proposal first feeds the tokens the row
committed since the last one (after keeping whatever of its previous guesses the row accepted), then decodes
gamma tokens one at a time. It pays where the draft is much cheaper than the target and agrees with it often.

`Acceptance` keeps a row's running acceptance rate, from which the engine predicts what a guess of k tokens
will yield (`expected_tokens`); `StepCosts` what a step of that many slots costs; with both the engine decides per
step whether, and how far, speculating pays (runtime.engine).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import torch

from openafm.models.decoder import Logits
from openafm.runtime.draft import DraftModel
from openafm.runtime.fused_step import StepKind, choose_step
from openafm.runtime.kv_cache import KVCache, Sliding


class ProposerKind(enum.Enum):
    OFF = "off"        # plain decoding: one token per row per step
    NGRAM = "ngram"    # prompt lookup
    DRAFT = "draft"    # a draft model's greedy guesses (the engine must hold one)


@dataclass(frozen=True)
class NgramConfig:
    min_n: int = 2            # shortest suffix looked up (a single token repeats too often to predict much)
    max_n: int = 4            # longest suffix looked up (the longest match is preferred)
    max_gamma: int = 6        # most tokens guessed per step

    def __post_init__(self) -> None:
        if not 1 <= self.min_n <= self.max_n:
            raise ValueError(f"n-gram sizes min_n={self.min_n}, max_n={self.max_n}: need 1 <= min_n <= max_n")
        if not 1 <= self.max_gamma <= 16:
            raise ValueError(f"max_gamma={self.max_gamma} is invalid: use 1 .. 16")


class NgramProposer:
    """One row's prompt-lookup index: ``append`` each token the row commits, ``propose(k)`` the next k guesses."""

    def __init__(self, tokens: list[int], config: NgramConfig = NgramConfig()):
        self.config = config
        self.tokens: list[int] = []
        self._last_end: dict[tuple[int, ...], int] = {}    # n-gram -> end index of its latest occurrence
        self._match: int | None = None                     # end index of the earlier occurrence of the suffix
        for t in tokens:
            self.append(t)

    def append(self, token: int) -> None:
        self.tokens.append(token)
        end = len(self.tokens) - 1
        match = None
        for n in range(self.config.max_n, self.config.min_n - 1, -1):
            if end + 1 < n:
                continue
            key = tuple(self.tokens[end + 1 - n:])
            earlier = self._last_end.get(key)
            if match is None and earlier is not None:
                match = earlier                            # the longest suffix seen before wins
            self._last_end[key] = end
        self._match = match

    def propose(self, k: int) -> list[int]:
        """Up to k tokens that followed the latest earlier occurrence of the current suffix ([] if none)."""
        if self._match is None or k < 1:
            return []
        return self.tokens[self._match + 1:self._match + 1 + k]


class DraftProposer:
    """One row's draft: ``append`` each token the row commits, ``propose(k)`` the draft's next k greedy tokens."""

    def __init__(self, draft: DraftModel, tokens: list[int], max_context: int):
        self.draft, self.max_context = draft, max_context
        self.tokens = list(tokens)             # the row's committed tokens
        w = draft.model.norm.weight
        self.cache = KVCache(draft.model.kv_plan, batch_size=1, capacity=min(max_context, max(64, 2 * len(tokens))),
                             dtype=w.dtype, device=w.device, sliding=Sliding.FULL)
        self.held: list[int] = []              # the tokens whose K/V the draft's cache holds, in order
        self.fused, _ = choose_step(StepKind.AUTO, draft.model, self.cache)     # once: it checks every weight

    def append(self, token: int) -> None:
        self.tokens.append(token)

    def propose(self, k: int) -> list[int]:
        """The draft's greedy continuation of the row's tokens, k tokens long (fewer near the context's end)."""
        keep = _common_prefix(self.held, self.tokens)
        if keep == len(self.tokens):           # a whole step of guesses accepted: run the last one again
            keep -= 1
        self.cache.rewind(keep)
        del self.held[keep:]
        k = min(k, self.max_context - len(self.tokens))
        if k < 1:
            return []
        self._grow(len(self.tokens) + k)
        with torch.inference_mode():
            logits = self._feed(self.tokens[keep:])                                            # [V']
            guesses = []
            for j in range(k):
                guesses.append(self._pick(logits))
                if j + 1 < k:
                    logits = self._feed(guesses[-1:])
        return guesses

    def _feed(self, tokens: list[int]) -> torch.Tensor:
        """Run tokens through the draft into its cache -> the last position's logits [V'] (the draft's columns)."""
        ids = torch.tensor([tokens], device=self.cache.device)                                # [1, T]
        if self.fused is not None and len(tokens) == 1:
            pos = torch.tensor([[self.cache.steps]], device=self.cache.device)
            out = self.fused(ids, self.cache, pos)[0]
        else:
            out = self.draft.model(ids, cache=self.cache, logits=Logits.LAST)[0, -1]
        self.held += tokens
        return out

    def _pick(self, logits: torch.Tensor) -> int:
        idx = int(logits.argmax())
        return idx if self.draft.vocab_ids is None else int(self.draft.vocab_ids[idx])

    def _grow(self, need: int) -> None:
        if need > self.cache.capacity:
            self.cache = self.cache.grown(min(self.max_context, max(need, 2 * self.cache.capacity)))


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


@dataclass
class Acceptance:
    """A row's running rate of accepted guesses (an exponential average over verified positions)."""

    rate: float = 0.8          # prior: optimistic, so that a row with matches gets tried (a pessimistic prior is
                               # never corrected: guesses that are not tried are not judged)
    weight: float = 0.15       # how fast the average follows new evidence
    PRIOR, DRIFT = 0.8, 0.02   # a row whose guesses were left untried drifts back towards the prior, so it is
                               # tried again now and then (the text it copies may have changed)
    proposed: int = 0
    accepted: int = 0

    def update(self, proposed: int, accepted: int) -> None:
        """A step verified ``proposed`` guesses of this row and accepted the first ``accepted`` of them."""
        self.proposed, self.accepted = self.proposed + proposed, self.accepted + accepted
        for j in range(proposed):
            if j > accepted:
                break                                       # positions after the first rejection were not judged
            self.rate += self.weight * ((1.0 if j < accepted else 0.0) - self.rate)

    def untried(self) -> None:
        """A step had guesses for this row and did not verify them."""
        self.rate += self.DRIFT * (self.PRIOR - self.rate)

    def expected_tokens(self, k: int) -> float:
        """Expected tokens a step commits for this row with k guesses: 1 + a + a^2 + ... + a^k."""
        a = min(max(self.rate, 0.0), 0.999)
        return sum(a ** j for j in range(k + 1))


class StepCosts:
    """Seconds per engine step by (rows, slots per row), as running averages of what the engine measured.

    A shape not measured yet is estimated from the same row count's measured shapes with a prior ratio (a
    multi-slot step costs more than a one-slot step: PRIOR_MULTI, growing PRIOR_PER_SLOT per slot; measured on the
    default model with the tiled block kernels, 2 slots ~1.25x and 4 slots ~1.7x) — optimistic enough that a
    promising shape gets tried once, after which its measurement decides."""

    PRIOR_MULTI, PRIOR_PER_SLOT, WEIGHT = 1.25, 0.05, 0.2

    def __init__(self) -> None:
        self._seconds: dict[tuple[int, int], float] = {}

    def observe(self, n: int, t: int, seconds: float) -> None:
        old = self._seconds.get((n, t))
        self._seconds[(n, t)] = seconds if old is None else old + self.WEIGHT * (seconds - old)

    def measured(self) -> dict[tuple[int, int], float]:
        return dict(self._seconds)

    def estimate(self, n: int, t: int) -> float:
        """Seconds for a step of n rows and t slots (in arbitrary units while nothing for n is measured)."""
        if (n, t) in self._seconds:
            return self._seconds[(n, t)]
        measured = [(tt, v) for (nn, tt), v in self._seconds.items() if nn == n]
        if not measured:
            return self._prior(t)
        tt, v = min(measured)
        return v / self._prior(tt) * self._prior(t)

    def _prior(self, t: int) -> float:
        return 1.0 if t == 1 else self.PRIOR_MULTI + self.PRIOR_PER_SLOT * (t - 1)
