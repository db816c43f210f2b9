import math

import pytest
import torch

from openafm.eval.perplexity import perplexity


class Uniform(torch.nn.Module):
    """Predicts a uniform distribution over V tokens: perplexity is exactly V."""

    def __init__(self, vocab: int):
        super().__init__()
        self.vocab = vocab
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def forward(self, ids):
        return torch.zeros(*ids.shape, self.vocab) + self.dummy


def test_uniform_model_has_perplexity_equal_to_vocab():
    result = perplexity(Uniform(50), torch.randint(0, 50, (1000,)), context=64, batch_size=3)
    assert result.tokens == (1000 // 64) * 63
    assert result.ppl == pytest.approx(50.0, rel=1e-6)


def test_matches_a_naive_loop_on_a_tiny_decoder():
    from tiny import make_tiny
    model = make_tiny("smollm2-tiny")
    ids = torch.randint(0, model.config.vocab_size, (130,))
    got = perplexity(model, ids, context=32, batch_size=2)
    total, n = 0.0, 0
    for w in range(130 // 32):
        chunk = ids[w * 32:(w + 1) * 32]
        logp = torch.log_softmax(model(chunk[None]).double()[0], -1)
        for t in range(1, 32):
            total -= float(logp[t - 1, chunk[t]])
            n += 1
    assert got.tokens == n
    assert got.ppl == pytest.approx(math.exp(total / n), rel=1e-5)


def test_too_short_input_names_the_lengths():
    with pytest.raises(ValueError, match="at least one full window of 64 tokens, got 10"):
        perplexity(Uniform(5), torch.zeros(10, dtype=torch.long), context=64)
