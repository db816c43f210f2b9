"""Constrained decoding: a grammar (llguidance) masks the logits at every step and fast-forwards the
tokens it forces.

llguidance compiles a JSON Schema, Lark grammar or regex against the model's tokenizer; at each step it
gives the set of tokens that keep the output inside the grammar (~15 µs for SmolLM2's 49,152 tokens) and,
after a token is consumed, the tokens the grammar now forces (keys, punctuation, enum tails). The
runtime appends forced tokens without sampling and runs them through the model in one forward pass.

:func:`accepts_text` asks the same engine whether a grammar admits a whole text, byte by byte, with no
model tokenizer: checks after generation (a guide's regex, a test's table of values) then agree with the
grammar that constrained the output by construction.

>>> accepts_text(llguidance.LLMatcher.grammar_from_regex(r"[a-z]+"), "momo")
True
>>> accepts_text(llguidance.LLMatcher.grammar_from_json_schema('{"type": "string", "pattern": "^a$"}'), '"ab"')
False
"""

from __future__ import annotations

import functools
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


def json_schema_grammar(schema: dict) -> str:
    """The grammar guided generation uses for ``schema``: compact JSON with the separators above."""
    schema = {**schema, "x-guidance": {**COMPACT_JSON, **schema.get("x-guidance", {})}}
    return llguidance.LLMatcher.grammar_from_json_schema(json.dumps(schema))


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
        return cls(json_schema_grammar(schema), tokenizer, description="JSON schema")

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

    def rollback(self, n: int) -> None:
        """Undo the last `n` consumed tokens (speculative decoding: what the target rejected)."""
        if n <= 0:
            return
        if n > len(self.generated) or not self.matcher.rollback(n):
            raise GrammarError(f"{self.description}: cannot roll back {n} tokens: {self.matcher.get_error()}")
        del self.generated[-n:]

    def forced_now(self, budget: int) -> list[int]:
        """The tokens the grammar forces next (at most `budget`), not yet consumed."""
        return list(self.matcher.compute_ff_tokens())[:budget]

    @property
    def done(self) -> bool:
        """The grammar is complete and admits nothing more."""
        return self.matcher.is_stopped()

    def _raise_if_error(self) -> None:
        if self.matcher.is_error():
            raise GrammarError(f"{self.description}: {self.matcher.get_error()}")


# ---- whole-text checks, no model ----------------------------------------------------------------

class _ByteVocabulary:
    """A vocabulary of the 256 bytes plus an end token: any UTF-8 text is one token per byte."""

    eos_token_id = 256
    bos_token_id = None
    special_token_ids = [256]
    tokens = [bytes([b]) for b in range(256)] + [b"<end>"]

    def __call__(self, text: str | bytes) -> list[int]:
        return list(text if isinstance(text, bytes) else text.encode("utf-8"))


@functools.cache
def _byte_tokenizer() -> Any:
    return llguidance.LLTokenizer(llguidance.TokenizerWrapper(_ByteVocabulary()))


def accepts_text(grammar: str, text: str) -> bool:
    """Whether ``grammar`` (from ``LLMatcher.grammar_from_*``) admits ``text`` as a complete output.

    Raises :class:`GrammarError` for a grammar the engine cannot compile. A text that is not valid
    UTF-8 (a lone surrogate) is not admitted.
    """
    matcher = llguidance.LLMatcher(_byte_tokenizer(), grammar)
    if matcher.is_error():
        raise GrammarError(f"the grammar cannot be compiled: {matcher.get_error()}")
    try:
        data = list(text.encode("utf-8"))
    except UnicodeEncodeError:
        return False
    return matcher.validate_tokens(data) == len(data) and matcher.consume_tokens(data) and matcher.is_accepting()
