"""Each metric on hand-made items with known answers: the MMLU letter scorings (a stub model with a fixed
distribution), letter and number extraction on tricky outputs, BFCL AST match, Wilson intervals."""

import math

import pytest
import torch

from openafm.eval.bfcl_data import question_correct
from openafm.eval.mc import LETTERS, MCQuestion, extract_letter, mc_prompt, score_mc
from openafm.eval.mgsm import extract_answer, extract_last_number
from openafm.eval.report import wilson_interval
from openafm.eval.scoring import loglikelihoods


class FixedLetter(torch.nn.Module):
    """Whatever the input, the next token is `letter`'s token with probability ~1: a model that always answers it."""

    def __init__(self, tokenizer, letter: str):
        super().__init__()
        self.vocab = tokenizer.vocab_size
        self.favoured = tokenizer.encode(f" {letter}")[0]
        self.norm = torch.nn.Module()
        self.norm.weight = torch.nn.Parameter(torch.zeros(1))

    @property
    def kv_plan(self):
        return type("Plan", (), {"max_seq_len": 4096})()

    def forward(self, ids, positions=None, logits=None, cache=None):
        out = torch.zeros(*ids.shape, self.vocab)
        out[..., self.favoured] = 30.0
        return out[:, -1:] if logits is not None and logits.value == "last" else out


def items(answers):
    return [MCQuestion(id=f"q{i}", subject="tests", question=f"Question {i}?", options=("w", "x", "y", "z"),
                       answer=LETTERS.index(a)) for i, a in enumerate(answers)]


def test_letter_loglikelihood_and_generated_letter_accuracies(tokenizer):
    qs = items("BABCDB")
    prompts = [mc_prompt(q, []) for q in qs]
    scores = loglikelihoods(FixedLetter(tokenizer, "B"), tokenizer, [(p, f" {L}") for p in prompts for L in LETTERS])
    outputs = [" B", "The answer is A", " (B)\nQuestion", "I don't know", " C.", ""]
    records = [score_mc(q, p, [s.logprob for s in scores[4 * k:4 * k + 4]], out)
               for k, (q, p, out) in enumerate(zip(qs, prompts, outputs, strict=True))]
    assert [r["loglik_pick"] for r in records] == ["B"] * 6
    assert [r["metrics"]["acc_loglik"] for r in records] == [1, 0, 1, 0, 0, 1]      # three answers are B
    assert [r["gen_pick"] for r in records] == ["B", "A", "B", None, "C", None]
    assert [r["metrics"]["acc_gen"] for r in records] == [1, 1, 1, 0, 0, 0]


def test_mmlu_prompt_is_the_mmlu_format():
    q, shot = items("CA")
    text = mc_prompt(q, [shot])
    assert text.startswith("The following are multiple choice questions (with answers) about tests.\n\n")
    assert "Question 1?\nA. w\nB. x\nC. y\nD. z\nAnswer: A\n\n" in text
    assert text.endswith("Question 0?\nA. w\nB. x\nC. y\nD. z\nAnswer:")


@pytest.mark.parametrize("text,letter", [
    (" B", "B"), ("B", "B"), (" (C)", "C"), ("D. river", "D"), ("A) the first", "A"), ("[b]", None),
    ("The answer is C", "C"), ("answer: (d)", "D"), ("Answer: B.", "B"), ("A", "A"), ("Apple", None),
    ("I think so", None), ("", None), ("\n", None), (" Because option B fits", "B"), ("E.", None)])
def test_extract_letter(text, letter):
    assert extract_letter(text) == letter


@pytest.mark.parametrize("text,strict,flex", [
    ("5 + 3 = 8\nThe answer is 8.", "8", "8"),
    ("The answer is $1,234.", "1234", "1234"),
    ("the answer is: -7", "-7", "-7"),
    ("The answer is **42**.", "42", "42"),
    ("The answer is 3.50", "3.5", "3.5"),
    ("First 12 then 15. The answer is 15. Wait, the answer is 16.", "16", "16"),
    ("She has 4 apples and buys 6, so 10 apples.", None, "10"),
    ("The answer is unknown", None, None),
    ("no numbers here", None, None),
    ("The answer is 20.0", "20", "20"),
])
def test_extract_answer(text, strict, flex):
    assert extract_answer(text) == strict
    assert (extract_answer(text) or extract_last_number(text)) == flex


FUNCS = [{"name": "area", "parameters": {"type": "dict", "properties": {"base": {"type": "integer"},
                                                                          "unit": {"type": "string"}},
                                          "required": ["base"]}}]


@pytest.mark.parametrize("calls,correct", [
    ([{"name": "area", "arguments": {"base": 10}}], True),
    ([{"name": "area", "arguments": {"base": 10.0, "unit": "CM "}}], True),     # int == float; trimmed, any case
    ([{"name": "area", "arguments": {"base": 11}}], False),
    ([{"name": "area", "arguments": {"unit": "cm"}}], False),                    # a required parameter missing
    ([{"name": "area", "arguments": {"base": 10, "height": 2}}], False),          # an invented parameter
    ([{"name": "volume", "arguments": {"base": 10}}], False),
    ([], False),
    ([{"name": "area", "arguments": {"base": 10}}] * 2, False),                  # one call too many
])
def test_bfcl_ast_match(calls, correct):
    truth = [{"area": {"base": [10], "unit": ["cm", ""]}}]
    assert question_correct(calls, truth, FUNCS) is correct


def test_wilson_interval_matches_the_formula():
    lo, hi = wilson_interval(0, 10)
    assert lo == 0 and hi == pytest.approx(0.2775, abs=1e-4)
    lo, hi = wilson_interval(5, 10)
    assert (lo, hi) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    lo, hi = wilson_interval(50, 100)
    z = 1.959963984540054                       # n large: near the normal approximation
    assert hi - lo == pytest.approx(2 * z * math.sqrt(0.25 / 100), rel=0.02)
    assert wilson_interval(0, 0) == (0.0, 1.0)
