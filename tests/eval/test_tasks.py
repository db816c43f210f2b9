"""The multiple-choice task set: items are right and reproducible, each choice is scored by the summed
log-probability of its tokens (checked against one unpadded forward per choice), accuracy counts argmaxes."""

import re

import pytest
import torch
import torch.nn.functional as F

from openafm.eval.tasks import MCItem, arithmetic_items, choice_logprobs, mc_accuracy, task_items
from tiny import make_tiny


def test_arithmetic_items_are_correct_reproducible_and_length_balanced():
    items = arithmetic_items(60, seed=3)
    assert items == arithmetic_items(60, seed=3) and items != arithmetic_items(60, seed=4)
    for item in items:
        a, op, b = re.search(r"Question: (\d+) ([-+*]) (\d+) = \?\nAnswer:$", item.prompt).groups()
        value = {"+": int(a) + int(b), "-": int(a) - int(b), "*": int(a) * int(b)}[op]
        assert item.choices[item.answer] == f" {value}"
        assert len(set(item.choices)) == 4 and len({len(c) for c in item.choices}) == 1
    assert {i.answer for i in items} == {0, 1, 2, 3}                      # the right answer moves around


def test_bad_task_and_count_raise():
    with pytest.raises(ValueError, match="'mmlu'.*arithmetic"):
        task_items("mmlu", 5)
    with pytest.raises(ValueError, match="n=0"):
        arithmetic_items(0)


def test_choice_logprobs_equal_separate_forwards(tokenizer):
    model = make_tiny("smollm2-tiny", vocab_size=tokenizer.vocab_size).eval()
    item = MCItem(prompt="Question: 2 + 2 = ?\nAnswer:", choices=(" 4", " 5", " 40", " 1234"), answer=0)
    got = choice_logprobs(model, tokenizer, item)
    prompt = tokenizer.encode(item.prompt)
    with torch.no_grad():
        for choice, value in zip(item.choices, got, strict=True):
            cont = tokenizer.encode(choice)
            logp = F.log_softmax(model(torch.tensor([prompt + cont])), -1)[0]
            expected = sum(float(logp[len(prompt) - 1 + j, t]) for j, t in enumerate(cont))
            assert value == pytest.approx(expected, abs=1e-4)


def test_accuracy_counts_the_argmax(tokenizer):
    model = make_tiny("smollm2-tiny", vocab_size=tokenizer.vocab_size).eval()
    items = arithmetic_items(12, seed=0)
    picks = [max(range(4), key=choice_logprobs(model, tokenizer, i).__getitem__) for i in items]
    result = mc_accuracy(model, tokenizer, items)
    assert result.items == 12 and result.chance == 0.25
    assert result.correct == sum(p == i.answer for p, i in zip(picks, items, strict=True))
    # relabel every item so the model's pick is the answer: accuracy 1
    rigged = [MCItem(i.prompt, i.choices, p) for i, p in zip(items, picks, strict=True)]
    assert mc_accuracy(model, tokenizer, rigged).accuracy == 1.0
