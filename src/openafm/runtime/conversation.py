"""An append-only conversation whose KV cache persists across turns.

The conversation is a token sequence; text is appended (tokenized on its own) and generation appends the
model's tokens. The KV cache always holds a prefix of the sequence, so each turn prefills only the tokens
added since the last one. If a generation fails part-way, the cache is dropped, not trusted: the next
turn rebuilds it from the token history, so no state is lost or corrupted.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from openafm.runtime.generate import Generation, GenerationStats, TokenEvent, generate_tokens
from openafm.runtime.kv_cache import KVCache
from openafm.runtime.sampling import SamplingParams


@dataclasses.dataclass
class TurnCounters:
    prefilled_tokens: int = 0       # tokens run through prefill this turn (the new ones only)
    cached_tokens: int = 0          # tokens already in the KV cache when the turn started
    generated_tokens: int = 0


class Conversation:
    def __init__(self, model, tokenizer):
        self.model, self.tokenizer = model, tokenizer
        self.tokens: list[int] = []     # the whole conversation, in order
        self.text = ""                  # what those tokens stand for, as appended
        self.cache: KVCache | None = None
        self.last_turn = TurnCounters()
        self.total_prefilled = 0

    @property
    def cached(self) -> int:
        return self.cache.steps if self.cache is not None else 0

    def append_text(self, text: str) -> list[int]:
        ids = self.tokenizer.encode(text)
        self.tokens += ids
        self.text += text
        return ids

    def generate(self, *, max_new_tokens: int, sampling: SamplingParams = SamplingParams(), constraint=None,
                 on_token: Callable[[TokenEvent], None] | None = None,
                 stats: GenerationStats | None = None) -> Generation:
        """Generate after everything appended so far; the generated tokens join the conversation."""
        new = self.tokens[self.cached:]
        if not new:
            raise ValueError("nothing new to respond to: append text before generating")
        stats = stats if stats is not None else GenerationStats()
        counters = TurnCounters(prefilled_tokens=len(new), cached_tokens=self.cached)
        try:
            out = generate_tokens(self.model, [new], max_new_tokens=max_new_tokens, sampling=sampling,
                                  eos_token_ids=set(self.tokenizer.eos_token_ids), tokenizer=self.tokenizer,
                                  on_token=on_token, stats=stats, constraint=constraint, cache=self.cache)[0]
        except BaseException:
            self.cache = None           # it may hold part of a failed turn: rebuild from tokens next time
            raise
        self.cache = stats.cache
        self.tokens += out.token_ids
        self.text += out.text
        counters.generated_tokens = len(out.token_ids)
        self.last_turn = counters
        self.total_prefilled += counters.prefilled_tokens
        return out
