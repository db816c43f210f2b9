"""A small multiple-choice task set scored by log-likelihood (the way MMLU-style tables, like the report's
Table 3, score a base model; the `openafm eval` harness's MMLU-format tasks live in eval/mc.py): the model
picks the choice whose tokens it finds most likely after the prompt; accuracy is the fraction of items where
that is the right one. No generation, so a whole compressed-model table is scored in seconds per row.

Tasks (generated from a seed, so every model sees the same items):

* ``arithmetic`` — "Question: 37 + 48 = ?" after three solved examples (a fixed 3-shot prefix), with four
  numeric answers: the right one and three near misses (±1, ±2, ±10, which keep the digit count so length
  does not give the answer away). Chance is 0.25; SmolLM2-135M-Instruct in fp32 scores about 0.4 (it is
  near chance zero-shot, so the examples are there to make the task measure something).

    from openafm.eval.tasks import arithmetic_items, mc_accuracy
    result = mc_accuracy(lm.model, lm.tokenizer, arithmetic_items(200, seed=0))   # -> MCResult
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
from tqdm import tqdm

from openafm.eval.scoring import loglikelihoods

TASKS = ("arithmetic",)
ARITHMETIC_SHOTS = ("Question: 12 + 7 = ?\nAnswer: 19\n\nQuestion: 50 - 8 = ?\nAnswer: 42\n\n"
                    "Question: 6 * 3 = ?\nAnswer: 18\n\n")


@dataclass(frozen=True)
class MCItem:
    prompt: str
    choices: tuple[str, ...]
    answer: int                 # index into choices


@dataclass(frozen=True)
class MCResult:
    correct: int
    items: int
    chance: float

    @property
    def accuracy(self) -> float:
        return self.correct / self.items


def arithmetic_items(n: int, *, seed: int = 0, low: int = 2, high: int = 99) -> list[MCItem]:
    """n addition/subtraction/multiplication questions on integers in [low, high] (products of a one-digit
    factor), each with four choices in a seeded random order."""
    if n < 1:
        raise ValueError(f"n={n}: ask for at least one item")
    rng = random.Random(seed)
    items = []
    while len(items) < n:
        op = rng.choice("+-*")
        a, b = rng.randint(low, high), rng.randint(low, high)
        if op == "*":
            b = rng.randint(2, 9)
        if op == "-" and b > a:
            a, b = b, a
        value = {"+": a + b, "-": a - b, "*": a * b}[op]
        misses = [value + d for d in (-10, -2, -1, 1, 2, 10) if value + d >= 0 and len(str(value + d)) == len(str(value))]
        if len(misses) < 3:
            continue
        choices = [value, *rng.sample(misses, 3)]
        rng.shuffle(choices)
        items.append(MCItem(prompt=f"{ARITHMETIC_SHOTS}Question: {a} {op} {b} = ?\nAnswer:", choices=tuple(f" {c}" for c in choices),
                            answer=choices.index(value)))
    return items


def task_items(task: str, n: int, *, seed: int = 0) -> list[MCItem]:
    if task == "arithmetic":
        return arithmetic_items(n, seed=seed)
    raise ValueError(f"unknown task {task!r}; accepted: {list(TASKS)}")


def choice_logprobs(model: torch.nn.Module, tokenizer, item: MCItem) -> list[float]:
    """Summed log-probability of each choice's tokens after the prompt (prompt and choice encoded apart,
    so every choice is scored after the same prompt tokens); see eval.scoring."""
    return [s.logprob for s in loglikelihoods(model, tokenizer, [(item.prompt, c) for c in item.choices])]


def mc_accuracy(model: torch.nn.Module, tokenizer, items: list[MCItem], *, batch_size: int = 16,
                progress: bool = False) -> MCResult:
    """Accuracy of the argmax choice by log-likelihood, every choice of every item scored in batches."""
    requests = [(item.prompt, c) for item in items for c in item.choices]
    with tqdm(total=len(requests), desc="task", disable=not progress, leave=False) as bar:
        scores = loglikelihoods(model, tokenizer, requests, batch_size=batch_size,
                                on_batch=lambda done: bar.update(done - bar.n))
    correct, k = 0, 0
    for item in items:
        values = [s.logprob for s in scores[k:k + len(item.choices)]]
        k += len(item.choices)
        correct += int(max(range(len(values)), key=values.__getitem__) == item.answer)
    return MCResult(correct=correct, items=len(items), chance=sum(1 / len(i.choices) for i in items) / len(items))
