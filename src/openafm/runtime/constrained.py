"""Constrained decoding: a grammar (llguidance) masks the logits at every step and fast-forwards the
tokens it forces.

llguidance compiles a JSON Schema, Lark grammar or regex against the model's tokenizer; at each step it
gives the set of tokens that keep the output inside the grammar (~15 µs for SmolLM2's 49,152 tokens) and,
after a token is consumed, the tokens the grammar now forces (keys, punctuation, enum tails). The
runtime appends forced tokens without sampling and runs them through the model in one forward pass.
"""

from __future__ import annotations

import json
import weakref
from typing import Any

import llguidance
import numpy as np
import torch

from openafm.errors import OpenAFMError

# Bounded whitespace: JSON is generated compactly with fixed separators, so structure is forced, not sampled.
COMPACT_JSON = {"whitespace_flexible": False, "key_separator": ": ", "item_separator": ", "}

_LL_TOKENIZERS: "weakref.WeakKeyDictionary[object, Any]" = weakref.WeakKeyDictionary()


class GrammarError(OpenAFMError, ValueError):
    """A grammar or schema the engine cannot compile (names what it rejected), or a decoding dead end."""


def ll_tokenizer(tokenizer) -> Any:
    """The llguidance view of an openafm Tokenizer (built once per tokenizer, ~0.4 s)."""
    if tokenizer not in _LL_TOKENIZERS:
        eos = sorted(tokenizer.eos_token_ids)
        _LL_TOKENIZERS[tokenizer] = llguidance.LLTokenizer(tokenizer.backend.to_str(), n_vocab=tokenizer.vocab_size,
                                                           eos_token=eos[0] if len(eos) == 1 else eos)
    return _LL_TOKENIZERS[tokenizer]


class GrammarConstraint:
    """One sequence's grammar state: allowed-token masks, consumption, forced tokens."""

    def __init__(self, grammar: str, tokenizer, *, description: str = "grammar"):
        is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar, ll_tokenizer(tokenizer))
        if is_error:
            raise GrammarError(f"{description} cannot be compiled: {messages[0]}")
        if messages:
            warnings = messages
            raise GrammarError(f"{description} compiles only partly (the engine would not enforce all of it): "
                               f"{'; '.join(warnings)}")
        self.tokenizer, self.description = tokenizer, description
        self.vocab_size = tokenizer.vocab_size
        self.matcher = llguidance.LLMatcher(ll_tokenizer(tokenizer), grammar)
        self._raise_if_error()
        self.forced_count = 0       # tokens appended by fast-forward rather than sampled
        self.generated: list[int] = []

    @classmethod
    def from_json_schema(cls, schema: dict, tokenizer) -> "GrammarConstraint":
        schema = {**schema, "x-guidance": {**COMPACT_JSON, **schema.get("x-guidance", {})}}
        grammar = llguidance.LLMatcher.grammar_from_json_schema(json.dumps(schema))
        return cls(grammar, tokenizer, description="JSON schema")

    @classmethod
    def from_regex(cls, pattern: str, tokenizer) -> "GrammarConstraint":
        return cls(llguidance.LLMatcher.grammar_from_regex(pattern), tokenizer, description=f"regex {pattern!r}")

    @classmethod
    def from_lark(cls, lark: str, tokenizer) -> "GrammarConstraint":
        return cls(llguidance.LLMatcher.grammar_from_lark(lark), tokenizer, description="Lark grammar")

    def allowed(self) -> torch.Tensor:
        """Bool mask [V] of the tokens the grammar admits next."""
        bits = np.frombuffer(self.matcher.compute_bitmask(), dtype=np.uint8)
        mask = np.unpackbits(bits, bitorder="little")[:self.vocab_size]
        return torch.from_numpy(mask.astype(np.bool_))

    def mask_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """logits [V] or [1, V] -> the same with disallowed tokens at -inf."""
        allowed = self.allowed().to(logits.device)
        if not bool(allowed.any()):
            raise GrammarError(f"{self.description}: no token can continue the output "
                               f"{self.tokenizer.decode(self.generated)!r}")
        return logits.masked_fill(~allowed, float("-inf"))

    def consume(self, token: int) -> None:
        if not self.matcher.consume_token(token):
            raise GrammarError(f"{self.description}: token {token} ({self.tokenizer.decode([token])!r}) is not allowed "
                               f"here: {self.matcher.get_error()}")
        self._raise_if_error()
        self.generated.append(token)

    def forced(self, budget: int) -> list[int]:
        """Consume and return the tokens the grammar now forces (at most `budget`)."""
        tokens = list(self.matcher.compute_ff_tokens())[:budget]
        for t in tokens:
            self.consume(t)
        self.forced_count += len(tokens)
        return tokens

    @property
    def done(self) -> bool:
        """The grammar is complete and admits nothing more."""
        return self.matcher.is_stopped()

    def _raise_if_error(self) -> None:
        if self.matcher.is_error():
            raise GrammarError(f"{self.description}: {self.matcher.get_error()}")
