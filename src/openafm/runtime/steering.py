"""Steering inside a grammar: reorder the tokens a constraint allows, never allow one it forbids.

`SteeredConstraint` wraps a `GrammarConstraint` (the same interface: mask_logits, consume, forced, done) and, after
the grammar's mask, adjusts the logits of the allowed tokens:

- repetition penalty: each token this output already produced has its logit divided by the penalty when positive
  and multiplied by it when negative (CTRL's rule), so a list that keeps repeating the same item (or a string
  that keeps repeating a digit) becomes less likely to go on;
- closing bias: once at most `close_within` tokens of the budget remain, tokens whose text contains a closing
  character (`"`, `]`, `}`) get `close_bias` added, so the value closes while the budget still allows it. The
  grammar decides what may close: an object with a required field left still has to generate that field.

Both only reorder tokens the grammar already allows: the output stays valid for the grammar either way.
"""

from __future__ import annotations

import weakref

import torch

CLOSERS = ('"', "]", "}")
_CLOSER_MASKS: "weakref.WeakKeyDictionary[object, torch.Tensor]" = weakref.WeakKeyDictionary()


def closer_mask(tokenizer) -> torch.Tensor:
    """float [V]: 1 for the tokens whose text contains a closing character (built once per tokenizer)."""
    if tokenizer not in _CLOSER_MASKS:
        texts = [tokenizer.decode([i]) for i in range(tokenizer.vocab_size)]
        _CLOSER_MASKS[tokenizer] = torch.tensor([any(c in t for c in CLOSERS) for t in texts], dtype=torch.float32)
    return _CLOSER_MASKS[tokenizer]


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
            seen = torch.tensor(sorted(set(self.generated)), dtype=torch.long, device=logits.device)
            row = logits.view(-1, logits.shape[-1])                              # [1, V]
            values = row[:, seen]
            row[:, seen] = torch.where(values > 0, values / self.repetition_penalty, values * self.repetition_penalty)
        if self.close_within is not None and self.budget - len(self.generated) <= self.close_within:
            closers = closer_mask(self.inner.tokenizer).to(logits.device)                    # [V_tok]
            bias = torch.zeros(logits.shape[-1], device=logits.device)
            n = min(bias.numel(), closers.numel())
            bias[:n] = closers[:n] * self.close_bias
            logits = logits + bias
        return logits
