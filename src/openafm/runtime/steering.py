"""Steering inside a grammar: reorder the tokens a constraint allows, never allow one it forbids.

`SteeredConstraint` wraps a `GrammarConstraint` (the same interface: mask_logits, consume, forced, done) and, after
the grammar's mask, adjusts the logits of the allowed tokens:

- repetition penalty: each content token this output already produced (a token with no quote, bracket or comma:
  words, digits) has its logit divided by the penalty when positive and multiplied by it when negative (CTRL's
  rule), so a list that keeps repeating the same item (or a string that keeps repeating a digit) becomes less
  likely to go on. Structure is not penalised: penalising every token made the model close strings at once
  (measured on validation schemas: 18 empty strings in 40 answers at 1.3, against none for content tokens only);
- closing walk: once at most `close_within` tokens of the budget remain, each allowed token's logit gains
  `close_bias` times how far it moves the JSON toward its end: +1 for each string, list or object it closes, -1
  for each it opens, and -1/4 for a token that moves nothing (no quote, bracket or comma: more digits, more
  words). Where a token starts — inside a string or not — is read from the output so far. So `"}` (close the
  string and the object, +2) is favoured over `", "` (close the string, start another key, 0), and a number or
  string that keeps running is ended by the nearest closer; where the grammar forbids closing (a required field
  is left, `minItems`), a comma (0) still beats running on. The output stays valid for the grammar either way.

Both only reorder tokens the grammar already allows: the output stays valid for the grammar either way.
"""

from __future__ import annotations

import weakref

import torch

IDLE = -0.25    # the closing walk's score of a token that moves no string, list or object toward its end
_TEXTS: "weakref.WeakKeyDictionary[object, list[str]]" = weakref.WeakKeyDictionary()
_SCORES: "weakref.WeakKeyDictionary[object, torch.Tensor]" = weakref.WeakKeyDictionary()


class JsonLexer:
    """Whether JSON text read so far ends inside a string (a backslash escapes the next character)."""

    def __init__(self, in_string: bool = False) -> None:
        self.in_string, self.escaped = in_string, False

    def feed(self, text: str) -> float:
        """Read `text` -> how far it moved toward the end: strings/lists/objects closed minus opened, or IDLE
        where it held no quote, bracket or comma (outside a string) at all."""
        progress, moved = 0.0, False
        for ch in text:
            if self.in_string:
                if self.escaped:
                    self.escaped = False
                elif ch == "\\":
                    self.escaped = True
                elif ch == '"':
                    self.in_string, progress, moved = False, progress + 1, True
            elif ch == '"':
                self.in_string, progress, moved = True, progress - 1, True
            elif ch in "{[":
                progress, moved = progress - 1, True
            elif ch in "}]":
                progress, moved = progress + 1, True
            elif ch == ",":
                moved = True
        return progress if moved else IDLE


def token_texts(tokenizer) -> list[str]:
    """Each token id's text, decoded alone (built once per tokenizer)."""
    if tokenizer not in _TEXTS:
        _TEXTS[tokenizer] = [tokenizer.decode([i]) for i in range(tokenizer.vocab_size)]
    return _TEXTS[tokenizer]


def close_scores(tokenizer) -> torch.Tensor:
    """float [2, V]: each token's progress toward the end (JsonLexer.feed) read from outside a string (row 0) and
    from inside one (row 1); built once per tokenizer. Row 0 == IDLE marks the content tokens (words, digits)."""
    if tokenizer not in _SCORES:
        texts = token_texts(tokenizer)
        _SCORES[tokenizer] = torch.tensor([[JsonLexer(inside).feed(t) for t in texts] for inside in (False, True)],
                                          dtype=torch.float32)
    return _SCORES[tokenizer]


class SteeredConstraint:
    def __init__(self, constraint, *, budget: int, repetition_penalty: float | None = None,
                 close_within: int | None = None, close_bias: float = 10.0):
        if repetition_penalty is not None and repetition_penalty < 1.0:
            raise ValueError(f"repetition_penalty={repetition_penalty} must be >= 1 (1 = no penalty), or None")
        if close_within is not None and close_within < 1:
            raise ValueError(f"close_within={close_within} must be a positive number of tokens, or None")
        if budget < 1:
            raise ValueError(f"budget={budget} must be a positive number of tokens")
        self.inner, self.budget = constraint, budget
        self.repetition_penalty, self.close_within, self.close_bias = repetition_penalty, close_within, close_bias
        self._lexer, self._lexed = JsonLexer(), 0          # the output's lexer state, and how many tokens it read

    # --- the GrammarConstraint interface --------------------------------------------------------------------
    @property
    def generated(self) -> list[int]:
        return self.inner.generated

    @property
    def forced_count(self) -> int:
        return self.inner.forced_count

    @property
    def done(self) -> bool:
        return self.inner.done

    @property
    def description(self) -> str:
        return self.inner.description

    def consume(self, token: int) -> None:
        self.inner.consume(token)

    def forced(self, budget: int) -> list[int]:
        return self.inner.forced(budget)

    def mask_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """logits [V] or [1, V] -> masked by the grammar, then steered among the allowed tokens."""
        logits = self.inner.mask_logits(logits)
        if self.repetition_penalty is not None and self.generated:
            content = close_scores(self.inner.tokenizer)[0] == IDLE                             # [V_tok] bool
            seen = torch.tensor(sorted(set(self.generated)), dtype=torch.long)
            seen = seen[seen < content.numel()]
            seen = seen[content[seen]].to(logits.device)                        # words and digits, not structure
            row = logits.view(-1, logits.shape[-1])                              # [1, V]
            values = row[:, seen]
            row[:, seen] = torch.where(values > 0, values / self.repetition_penalty, values * self.repetition_penalty)
        if self.close_within is not None and self.budget - len(self.generated) <= self.close_within:
            scores = close_scores(self.inner.tokenizer).to(logits.device)[int(self._read())]     # [V_tok]
            bias = torch.zeros(logits.shape[-1], device=logits.device)
            n = min(bias.numel(), scores.numel())
            bias[:n] = scores[:n] * self.close_bias
            logits = logits + bias
        return logits

    def _read(self) -> bool:
        """Lex the tokens generated since the last call (forced ones too) -> whether the output is inside a string."""
        texts = token_texts(self.inner.tokenizer)
        for token in self.generated[self._lexed:]:
            self._lexer.feed(texts[token])
        self._lexed = len(self.generated)
        return self._lexer.in_string
