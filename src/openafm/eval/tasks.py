"""A small multiple-choice task set scored by log-likelihood (the way MMLU-style tables, like the report's
Table 3, score a base model): the model picks the choice whose tokens it finds most likely after the
prompt; accuracy is the fraction of items where that is the right one. No generation, so a whole
compressed-model table is scored in seconds per row.

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
import torch.nn.functional as F
from tqdm import tqdm

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


@torch.no_grad()
def choice_logprobs(model: torch.nn.Module, tokenizer, item: MCItem) -> list[float]:
    """Summed log-probability of each choice's tokens after the prompt (prompt and choice encoded apart,
    so every choice is scored after the same prompt tokens). One batched forward per item."""
    prompt = tokenizer.encode(item.prompt)
    conts = [tokenizer.encode(c) for c in item.choices]
    if not prompt or any(not c for c in conts):
        raise ValueError(f"an empty prompt or choice in {item!r}")
    seqs = [prompt + c for c in conts]
    width = max(map(len, seqs))
    ids = torch.zeros(len(seqs), width, dtype=torch.long)      # right padding: causal attention never reads it
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
    device = next(model.parameters()).device
    logp = F.log_softmax(model(ids.to(device)).float(), dim=-1).cpu()
    out = []
    for i, c in enumerate(conts):
        pos = torch.arange(len(prompt) - 1, len(prompt) - 1 + len(c))
        out.append(float(logp[i, pos, torch.tensor(c)].sum()))
    return out


def mc_accuracy(model: torch.nn.Module, tokenizer, items: list[MCItem], *, progress: bool = False) -> MCResult:
    correct = 0
    for item in tqdm(items, desc="task", disable=not progress, leave=False):
        scores = choice_logprobs(model, tokenizer, item)
        correct += int(max(range(len(scores)), key=scores.__getitem__) == item.answer)
    return MCResult(correct=correct, items=len(items), chance=sum(1 / len(i.choices) for i in items) / len(items))
