"""Batched log-likelihoods equal one unpadded forward per request (a naive loop), shared rows change nothing,
batched greedy generation equals generating each prompt alone, and scoring and generating in one pass equals both."""

import pytest
import torch
import torch.nn.functional as F

from openafm.checkpoint.load import LoadedModel
from openafm.eval.scoring import Rows, generate_batched, loglikelihoods, score_and_generate
from openafm.runtime.language_model import LanguageModel
from tiny import make_tiny

REQUESTS = [("Question: 2 + 2 = ?\nAnswer:", " A"), ("Question: 2 + 2 = ?\nAnswer:", " B"),
            ("The capital of France is", " Paris, a city on the Seine"), ("x", " y z"), ("", " Hello world"),
            ("A much longer context that pads the others in its batch by several tokens at least", " B")]


@pytest.fixture(scope="module")
def model(tokenizer):
    return make_tiny("smollm2-tiny", vocab_size=tokenizer.vocab_size).eval()


def naive(model, tokenizer, context, continuation):
    ctx = tokenizer.encode(context) if context else [tokenizer.eos_token_id]
    cont = tokenizer.encode(continuation)
    with torch.no_grad():
        logp = F.log_softmax(model(torch.tensor([ctx + cont])).double(), -1)[0]
    steps = logp[len(ctx) - 1: len(ctx) - 1 + len(cont)]
    return float(sum(steps[j, t] for j, t in enumerate(cont))), all(int(steps[j].argmax()) == t
                                                                    for j, t in enumerate(cont))


@pytest.mark.parametrize("batch_size,rows", [(1, Rows.PER_REQUEST), (3, Rows.SHARED), (16, Rows.SHARED)])
def test_loglikelihoods_equal_a_naive_loop(model, tokenizer, batch_size, rows):
    got = loglikelihoods(model, tokenizer, REQUESTS, batch_size=batch_size, rows=rows)
    for (context, continuation), score in zip(REQUESTS, got, strict=True):
        value, greedy = naive(model, tokenizer, context, continuation)
        assert score.logprob == pytest.approx(value, abs=2e-4)
        assert score.greedy == greedy
        assert score.tokens == len(tokenizer.encode(continuation))


def test_the_greedy_continuation_is_flagged_greedy(model, tokenizer):
    ctx = tokenizer.encode("Once upon a time")
    with torch.no_grad():
        best = int(model(torch.tensor([ctx]))[0, -1].argmax())
    text = tokenizer.decode([best])
    if tokenizer.encode(text) != [best]:
        pytest.skip("the argmax token does not round-trip through text")
    assert loglikelihoods(model, tokenizer, [("Once upon a time", text)])[0].greedy


def test_empty_continuation_and_bad_batch_size_raise(model, tokenizer):
    with pytest.raises(ValueError, match="empty continuation"):
        loglikelihoods(model, tokenizer, [("context", "")])
    with pytest.raises(ValueError, match="batch_size must be at least 1, got 0"):
        loglikelihoods(model, tokenizer, REQUESTS, batch_size=0)


def test_batched_generation_equals_one_at_a_time(model, tokenizer):
    prompts = ["The old lighthouse", "Water", "A somewhat longer prompt about the sea and ships"]
    lm = LanguageModel.of(LoadedModel(model, tokenizer, "tiny", "test"))
    alone = [lm.generate(p, max_tokens=8) for p in prompts]
    assert generate_batched(model, tokenizer, prompts, max_tokens=8, batch_size=3) == alone


@pytest.mark.parametrize("batch_size", [1, 2])
def test_scoring_and_generating_in_one_pass_equals_the_two_passes(model, tokenizer, batch_size):
    prompts = ["Question: 2 + 2 = ?\nAnswer:", "Water", "A somewhat longer prompt about the sea and ships\nAnswer:"]
    letters = [" A", " B", " C", " D"]
    ids = [tokenizer.encode(L)[0] for L in letters]
    assert all(len(tokenizer.encode(L)) == 1 for L in letters)
    both = score_and_generate(model, tokenizer, prompts, ids, max_tokens=8, batch_size=batch_size)
    texts = generate_batched(model, tokenizer, prompts, max_tokens=8, batch_size=3)
    for prompt, (scores, text), alone in zip(prompts, both, texts, strict=True):
        assert text == alone
        for L, score in zip(letters, scores, strict=True):
            assert score == pytest.approx(naive(model, tokenizer, prompt, L)[0], abs=2e-4)


def test_one_pass_scoring_names_a_token_id_the_model_lacks(model, tokenizer):
    with pytest.raises(ValueError, match=r"not token ids of this model"):
        score_and_generate(model, tokenizer, ["Water"], [tokenizer.vocab_size + 5], max_tokens=2)
